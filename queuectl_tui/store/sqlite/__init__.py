"""The SQLite store: WAL journal, busy timeout, and one `BEGIN IMMEDIATE` transaction per
state change, so that claims are atomic across threads and separate OS processes."""

from __future__ import annotations

from .store import SQLiteStore

__all__ = ["SQLiteStore"]
