"""One keyset page of jobs, or their count, put together from a backend's fixed statement
parts.

Each backend names the same parts in its sql/queries.sql (list_jobs, list_jobs_in_state, ...),
written in its own placeholders; only which of them go in, and in what order, is decided
here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import JobState
from ..query import JobQuery


def _pattern(text: str) -> str:
    """A LIKE pattern for a part of a text: its own %, _ and \\ escaped with \\."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _any_of(part: str, values: tuple[Any, ...]) -> str:
    return part if len(values) == 1 else "(" + " OR ".join([part] * len(values)) + ")"


def _conditions(
    sql: Mapping[str, str],
    state: JobState | None,
    search: str | None,
    queue: str | None,
    query: JobQuery | None,
) -> tuple[list[str], list[Any]]:
    query = query or JobQuery()
    states = tuple(dict.fromkeys((*([state] if state else []), *query.states)))
    queues = tuple(dict.fromkeys((*([queue] if queue else []), *query.queues)))
    where: list[str] = []
    params: list[Any] = []
    if states:
        where.append(_any_of(sql["list_jobs_in_state"], states))
        params.extend(value.value for value in states)
    if queues:
        where.append(_any_of(sql["list_jobs_in_queue"], queues))
        params.extend(queues)
    if query.exit_codes:
        where.append(_any_of(sql["list_jobs_exit"], query.exit_codes))
        params.extend(query.exit_codes)
    if query.worker:
        where.append(sql["list_jobs_worker"])
        params.append(_pattern(query.worker))
    if query.since is not None:
        where.append(sql["list_jobs_since"])
        params.append(query.since)
    if query.error:
        where.append(sql["list_jobs_error"])
        params.extend([_pattern(query.error)] * 2)
    for text in (*([search] if search else []), *query.text):
        where.append(sql["list_jobs_matching"])
        params.extend([_pattern(text)] * 3)
    return where, params


def list_jobs_statement(
    sql: Mapping[str, str],
    state: JobState | None,
    limit: int,
    after_seq: int | None,
    newest_first: bool,
    search: str | None,
    queue: str | None,
    query: JobQuery | None = None,
) -> tuple[str, list[Any]]:
    """The statement and its parameters: each combination of filters a plain range that keeps
    its index."""
    where, params = _conditions(sql, state, search, queue, query)
    if after_seq is not None:
        where.append(sql["list_jobs_before" if newest_first else "list_jobs_after"])
        params.append(after_seq)
    statement = sql["list_jobs"]
    if where:
        statement += "\nWHERE " + "\nAND ".join(where)
    statement += "\n" + sql["list_jobs_newest_first" if newest_first else "list_jobs_oldest_first"]
    params.append(max(0, limit))
    return statement, params


def count_jobs_statement(sql: Mapping[str, str], query: JobQuery) -> tuple[str, list[Any]]:
    """How many jobs match the query."""
    where, params = _conditions(sql, None, None, None, query)
    statement = sql["count_jobs"]
    if where:
        statement += "\nWHERE " + "\nAND ".join(where)
    return statement, params
