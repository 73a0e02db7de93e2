"""The named statements of sql/queries.sql, read once at import."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..sqlfiles import named_statements

SQL: Mapping[str, str] = named_statements(Path(__file__).with_name("sql") / "queries.sql")
