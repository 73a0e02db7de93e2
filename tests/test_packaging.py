"""Every file the package reads at run time is installed with it: a file that is not Python
must be named by a package-data pattern in pyproject.toml (a plain `pip install .` leaves
anything else behind, and the command that needs it fails on the user's machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "queuectl_tui"


def test_every_data_file_of_the_package_is_named_in_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["queuectl_tui"]
    data_files = {
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    installed = {path for path in data_files if any(path.match(p) for p in patterns)}
    assert sorted(map(str, data_files - installed)) == []
    assert any(str(path).startswith("store/postgres/sql") for path in installed)
