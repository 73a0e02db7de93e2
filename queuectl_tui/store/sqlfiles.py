"""The SQL files a backend keeps beside its code: named statements, and numbered migrations."""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"-- name: (\w+)")
_MIGRATION = re.compile(r"(\d{4})_\w+\.sql")


def named_statements(path: Path) -> dict[str, str]:
    """Each statement of the file under its `-- name:` line, without the comment lines."""
    statements: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        named = _NAME.fullmatch(line.strip())
        if named is not None:
            if named.group(1) in statements:
                raise ValueError(f"{path}: two statements are named {named.group(1)}")
            lines = statements[named.group(1)] = []
        elif line.strip() and not line.lstrip().startswith("--"):
            if lines is None:
                raise ValueError(f"{path}: SQL before the first '-- name:' line")
            lines.append(line.rstrip())
    empty = [name for name, body in statements.items() if not body]
    if empty:
        raise ValueError(f"{path}: no SQL under {', '.join(empty)}")
    return {name: "\n".join(body) for name, body in statements.items()}


def numbered_scripts(folder: Path) -> list[tuple[int, str, str]]:
    """(number, file name, text) of each `NNNN_name.sql` in `folder`, numbered 1, 2, 3 ..."""
    files = sorted(
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := _MIGRATION.fullmatch(path.name))
    )
    if [version for version, _ in files] != list(range(1, len(files) + 1)):
        raise RuntimeError(f"the migrations in {folder} are not numbered 1, 2, 3 ...")
    return [(version, path.name, path.read_text(encoding="utf-8")) for version, path in files]
