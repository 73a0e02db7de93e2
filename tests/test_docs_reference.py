"""The reference pages of the docs are what the code makes of them: a command, a setting, an
endpoint or a console key changed without them fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_reference_pages_match_the_code() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr


def test_every_command_and_setting_is_in_its_page() -> None:
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("queuectl enqueue", "queuectl dlq retry", "queuectl schedule add"):
        assert f"## {command}\n" in cli
    assert "--output FORMAT" in cli
    settings = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert "| `http-access-log` | `on` | " in settings
