"""QUEUECTL_* variables: one list of those queuectl knows, and a warning for the others."""

from __future__ import annotations

import re
from pathlib import Path

from queuectl_tui.env_names import KNOWN, unknown_names

from helpers import RunCli, clean_env

ROOT = Path(__file__).resolve().parent.parent


def test_every_variable_the_code_spells_is_known() -> None:
    spelled: set[str] = set()
    for folder in ("queuectl_tui", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            spelled |= set(re.findall(r"QUEUECTL_[A-Z][A-Z_]*", path.read_text(encoding="utf-8")))
    assert spelled <= KNOWN, sorted(spelled - KNOWN)


def test_an_unknown_variable_warns_naming_the_one_meant() -> None:
    assert unknown_names({"QUEUECTL_DB_PATH": "x"}) == [
        "warning: QUEUECTL_DB_PATH is not a variable queuectl reads; did you mean QUEUECTL_DB?"
    ]
    assert unknown_names({"QUEUECTL_CONFG": "c"})[0].endswith("did you mean QUEUECTL_CONFIG?")
    assert unknown_names({"QUEUECTL_COLOUR": "red"}) == [
        "warning: QUEUECTL_COLOUR is not a variable queuectl reads"
    ]
    assert unknown_names({"QUEUECTL_DB": "q.db", "PATH": "/bin"}) == []


def test_the_command_warns_once_on_stderr_and_goes_on(run_cli: RunCli, tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "queuectl_tui", "--db", str(tmp_path / "q.db"), "status"],
        env=clean_env(QUEUECTL_DB_PATH=str(tmp_path / "other.db")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        "warning: QUEUECTL_DB_PATH is not a variable queuectl reads; did you mean QUEUECTL_DB?"
    )
    assert result.stderr.count("warning:") == 1
    assert "warning" not in run_cli("status").stderr  # the known ones say nothing
