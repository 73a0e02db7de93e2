"""The SQL files' named statements: fragments written once and taken in where they are used."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuectl_tui.store.sqlfiles import named_statements


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "queries.sql"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_fragment_is_taken_in_where_a_statement_uses_it(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "-- name: first\n-- a comment, dropped\nWITH\n-- use: shared\nSELECT * FROM picked\n"
        "-- fragment: shared\n-- its own comment\npicked AS (SELECT 1)\n"
        "-- name: second\n-- use: shared\n",
    )
    assert named_statements(path) == {
        "first": "WITH\npicked AS (SELECT 1)\nSELECT * FROM picked",
        "second": "picked AS (SELECT 1)",
    }


def test_a_fragment_may_use_another(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "-- name: a\n-- use: outer\n-- fragment: outer\nWITH\n-- use: inner\nSELECT 2\n"
        "-- fragment: inner\nx AS (SELECT 1)\n",
    )
    assert named_statements(path) == {"a": "WITH\nx AS (SELECT 1)\nSELECT 2"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: a\n-- use: missing\n", "no fragment named missing"),
        ("-- name: a\nSELECT 1\n-- fragment: a\nSELECT 2\n", "two parts are named a"),
        ("-- name: a\nSELECT 1\n-- fragment: empty\n", "no SQL under empty"),
        ("-- name: a\nSELECT 1\n-- fragment: spare\nSELECT 2\n", "no statement uses spare"),
        ("-- name: a\n-- use: b  -- why\n-- fragment: b\nSELECT 2\n", "not a fragment's name"),
        ("-- name: a\n-- use: b\n-- fragment: b\n-- use: b\n", "fragment b uses itself"),
    ],
)
def test_a_file_that_does_not_hold_together_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        named_statements(_file(tmp_path, text))
