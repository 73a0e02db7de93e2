"""The named statements of sql/queries.sql (read once at import) and the lists bound to them."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from ..sqlfiles import named_statements

T = TypeVar("T")

_FILE = Path(__file__).with_name("sql") / "queries.sql"
LIST = "?, ..."  # in a statement: one ? per value of a list (see with_list)
# Values per list; SQLite allows 32,766 parameters but smaller chunks keep statements cheap.
CHUNK = 500


SQL: Mapping[str, str] = named_statements(_FILE)


@functools.lru_cache(maxsize=256)  # the hot ones are short lists: the workers of one pool
def with_list(name: str, count: int) -> str:
    """Statement `name` with its `(?, ...)` as `count` placeholders."""
    # The only SQL put together at run time: as many question marks as the list has values.
    return SQL[name].replace(LIST, ",".join("?" * count))


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """`items` in lists short enough to bind to one statement each."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
