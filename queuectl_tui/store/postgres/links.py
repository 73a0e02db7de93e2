"""The statements store/dependencies.py runs, on a PostgreSQL connection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from .statements import SQL


class PostgresLinks:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def rows(self, name: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(SQL[name], params).fetchall()

    def run_many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            with self._conn.cursor() as cursor:  # one round trip for them all
                cursor.executemany(SQL[name], rows)
