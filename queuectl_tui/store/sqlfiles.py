"""The SQL files a backend keeps beside its code: named statements, and numbered migrations."""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"-- name: (\w+)")
_FRAGMENT = re.compile(r"-- fragment: (\w+)")
_USE = re.compile(r"-- use: (\w+)")
_MIGRATION = re.compile(r"(\d{4})_\w+\.sql")


def named_statements(path: Path) -> dict[str, str]:
    """Each statement of the file under its `-- name:` line, without the comment lines.

    A part that several statements share is written once, under a `-- fragment:` line, and
    each statement takes it in with a `-- use:` line where it belongs: the statements are
    still fixed texts, put together once, when the file is read."""
    statements: dict[str, list[str]] = {}
    fragments: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        heading = _NAME.fullmatch(text) or _FRAGMENT.fullmatch(text)
        if heading is not None:
            name = heading.group(1)
            if name in statements or name in fragments:
                raise ValueError(f"{path}: two parts are named {name}")
            lines = (statements if heading.re is _NAME else fragments).setdefault(name, [])
        elif text.startswith("-- use:") and not _USE.fullmatch(text):
            raise ValueError(f"{path}: not a fragment's name: {text!r}")
        elif text and (not text.startswith("--") or _USE.fullmatch(text)):
            if lines is None:
                raise ValueError(f"{path}: SQL before the first '-- name:' line")
            lines.append(line.rstrip())
    empty = [name for name, body in {**statements, **fragments}.items() if not body]
    if empty:
        raise ValueError(f"{path}: no SQL under {', '.join(empty)}")
    used: set[str] = set()
    expanded = {
        name: "\n".join(_with_fragments(path, body, fragments, used))
        for name, body in statements.items()
    }
    unused = sorted(set(fragments) - used)
    if unused:
        raise ValueError(f"{path}: no statement uses {', '.join(unused)}")
    return expanded


def _with_fragments(
    path: Path,
    body: list[str],
    fragments: dict[str, list[str]],
    used: set[str],
    within: tuple[str, ...] = (),
) -> list[str]:
    """`body` with each `-- use:` line replaced by its fragment (which may use others)."""
    expanded: list[str] = []
    for line in body:
        use = _USE.fullmatch(line.strip())
        if use is None:
            expanded.append(line)
            continue
        name = use.group(1)
        if name not in fragments:
            raise ValueError(f"{path}: no fragment named {name}")
        if name in within:
            raise ValueError(f"{path}: fragment {name} uses itself")
        used.add(name)
        expanded += _with_fragments(path, fragments[name], fragments, used, (*within, name))
    return expanded


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
