"""The statements store/dependencies.py runs, on a SQLite connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from .statements import SQL


def _bound(params: Mapping[str, Any]) -> dict[str, Any]:
    # SQLite has no arrays: a list travels as JSON text, unpacked by json_each.
    return {
        name: json.dumps(value) if isinstance(value, (list, tuple)) else value
        for name, value in params.items()
    }


class SqliteLinks:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def rows(self, name: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(SQL[name], _bound(params)).fetchall()

    def run_many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._conn.executemany(SQL[name], [_bound(row) for row in rows])
