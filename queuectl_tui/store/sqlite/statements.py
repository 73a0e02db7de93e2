"""The named statements of sql/queries.sql (read once at import) and the lists bound to them."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_FILE = Path(__file__).with_name("sql") / "queries.sql"
_NAME = re.compile(r"-- name: (\w+)")
LIST = "?, ..."  # in a statement: one ? per value of a list (see with_list)
# Values per list; SQLite allows 32,766 parameters but smaller chunks keep statements cheap.
CHUNK = 500


def _parse(text: str) -> dict[str, str]:
    """Each statement under its `-- name:` line, without the comment lines."""
    statements: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        named = _NAME.fullmatch(line.strip())
        if named is not None:
            if named.group(1) in statements:
                raise ValueError(f"{_FILE}: two statements are named {named.group(1)}")
            lines = statements[named.group(1)] = []
        elif line.strip() and not line.lstrip().startswith("--"):
            if lines is None:
                raise ValueError(f"{_FILE}: SQL before the first '-- name:' line")
            lines.append(line.rstrip())
    empty = [name for name, body in statements.items() if not body]
    if empty:
        raise ValueError(f"{_FILE}: no SQL under {', '.join(empty)}")
    return {name: "\n".join(body) for name, body in statements.items()}


SQL: Mapping[str, str] = _parse(_FILE.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=256)  # the hot ones are short lists: the workers of one pool
def with_list(name: str, count: int) -> str:
    """Statement `name` with its `(?, ...)` as `count` placeholders."""
    # The only SQL put together at run time: as many question marks as the list has values.
    return SQL[name].replace(LIST, ",".join("?" * count))


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """`items` in lists short enough to bind to one statement each."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
