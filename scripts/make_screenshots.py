"""Write an SVG of every main view of the console into docs/assets/screenshots/, taken on the
seeded demo queue at a fixed time, and a PNG of each where `rsvg-convert` is installed (with the
`fonts-firacode` package for the intended font).

    .venv/bin/python scripts/make_screenshots.py [--out docs/assets/screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from queuectl_tui.config import Settings
from queuectl_tui.store import SQLiteStore
from queuectl_tui.tui.app import QueueConsole

# The demo queue lives with the tests that use it most.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from demo_queue import DEMO_NOW, seed_demo

WAIT = "<wait>"  # not a key: let the views that read at their own pace (live output) catch up

# name, terminal size, keys pressed after the first load
VIEWS: tuple[tuple[str, tuple[int, int], Sequence[str]], ...] = (
    ("jobs", (100, 30), ()),
    ("jobs-80x24", (80, 24), ()),
    ("jobs-160x50", (160, 50), ()),
    ("jobs-failed", (100, 30), ("4",)),
    ("workers", (100, 30), ("w",)),
    ("dead-letters", (100, 30), ("d",)),
    ("job-detail", (100, 30), ("d", "down", "down", "enter")),
    ("enqueue-form", (100, 30), ("n", *"echo hello", "tab", "tab", *"high", "ctrl+s")),
    ("start-pool", (100, 30), ("s",)),
    ("retry-all-confirm", (100, 30), ("d", "R")),
    ("filter", (100, 30), ("slash", *"thumbs-01", "enter")),
    ("help", (100, 30), ("question_mark",)),
    ("live-output", (100, 30), ("slash", *"import-orders", "enter", "enter", WAIT)),
    ("marks", (100, 30), ("2", "space", "down", "space", "c")),
    ("search", (120, 30), ("slash", *"state:dead exit:1", "enter")),
    ("error-groups", (120, 30), ("e",)),
    ("schedules", (120, 30), ("t",)),
)


async def capture(settings: Settings, size: tuple[int, int], keys: Sequence[str]) -> str:
    app = QueueConsole(settings, clock=lambda: DEMO_NOW)
    async with app.run_test(size=size) as pilot:
        for key in ("", *keys):
            if key == WAIT:
                await pilot.pause(0.6)
            elif key:
                await pilot.press(key)
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
        return app.export_screenshot(title="queuectl dashboard")


def to_png(svg: Path) -> Path | None:
    converter = shutil.which("rsvg-convert")
    if converter is None:
        return None
    png = svg.with_suffix(".png")
    # librsvg drops the no-break spaces that start or end a styled run; plain spaces kept by
    # xml:space="preserve" render the same text with its spacing intact.
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ")
    text = text.replace("<svg ", '<svg xml:space="preserve" ', 1)
    with tempfile.NamedTemporaryFile("w", suffix=".svg", encoding="utf-8") as source:
        source.write(text)
        source.flush()
        subprocess.run([converter, "--zoom", "1.5", source.name, "-o", str(png)], check=True)
    return png


def main() -> None:
    parser = argparse.ArgumentParser(description="Screenshots of the console.")
    parser.add_argument("--out", default="docs/assets/screenshots", help="folder for the images")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "queue.db")
        seed_demo(store)
        store.close()
        os.chdir(folder)  # the console shows the database path: keep it short and stable
        settings = Settings(database="queue.db")
        for name, size, keys in VIEWS:
            svg = out / f"{name}.svg"
            svg.write_text(asyncio.run(capture(settings, size, keys)), encoding="utf-8")
            png = to_png(svg)
            print(f"{svg}" + (f"  {png.name}" if png else ""))


if __name__ == "__main__":
    main()
