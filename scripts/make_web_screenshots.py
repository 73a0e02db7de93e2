"""PNGs of the web dashboard, served by `queuectl dashboard --addr` on the demo queue (seeded
at the current time, so that its per-minute rates and heartbeats are recent), taken in
Debian's chromium through Playwright at 1280x800.

    .venv/bin/python scripts/make_web_screenshots.py [--out docs/assets/screenshots]

Needs /usr/bin/chromium (`apt-get install chromium`); Playwright's own browsers are not used.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from queuectl_tui.store import SQLiteStore
from queuectl_tui.timeutil import now_ms

# The demo queue lives with the tests that use it most.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from demo_queue import seed_demo

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def dashboard_server(db: Path, folder: Path, read_token: str | None = None) -> Iterator[str]:
    """`queuectl dashboard --addr` on a free port (reads needing `read_token` if given),
    until the block ends."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
    if read_token is not None:
        env["QUEUECTL_READ_TOKEN"] = read_token
    queuectl = [sys.executable, "-m", "queuectl_tui", "--db", str(db)]
    server = subprocess.Popen(
        [*queuectl, "dashboard", "--addr", f"127.0.0.1:{port}"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the dashboard server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def live(page: Page) -> None:
    """Wait until the script has drawn a poll's answer, and the chart's rates are in."""
    page.wait_for_selector("#live.on", timeout=15000)
    page.wait_for_timeout(300)


def shoot(url: str, out: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        page.goto(url + "/")
        live(page)
        page.screenshot(path=str(out / "web-overview.png"))

        page.click("#jobs a.job-link:text-is('report-daily')")
        page.wait_for_selector("#detail .attempt", timeout=15000)
        live(page)
        page.screenshot(path=str(out / "web-job.png"))

        page.goto(url + "/?state=dead")
        live(page)
        page.screenshot(path=str(out / "web-dlq.png"))
        browser.close()


def shoot_sign_in(url: str, out: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 400})
        page.goto(url + "/")
        page.wait_for_selector("#sign-in-form", timeout=15000)
        page.screenshot(path=str(out / "web-sign-in.png"))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Screenshots of the web dashboard.")
    parser.add_argument("--out", default="docs/assets/screenshots", help="folder for the images")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        store = SQLiteStore(folder / "queue.db")
        seed_demo(store, now_ms())
        store.close()
        with dashboard_server(folder / "queue.db", folder) as url:
            shoot(url, out)
        token = "screenshot-read-token-0f3c9a7e2b51d684"
        with dashboard_server(folder / "queue.db", folder, token) as url:
            shoot_sign_in(url, out)
    for shot in ("web-overview", "web-job", "web-dlq", "web-sign-in"):
        print(out / f"{shot}.png")


if __name__ == "__main__":
    main()
