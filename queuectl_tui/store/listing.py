"""One keyset page of jobs, or their count, put together from a backend's fixed statement
parts.

Each backend names the same parts in its sql/queries.sql (list_jobs, list_jobs_in_state, ...),
written in its own placeholders; only which of them go in, and in what order, is decided
here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..models import JobState
from ..query import JobQuery


def _pattern(text: str) -> str:
    """A LIKE pattern for a part of a text: its own %, _ and \\ escaped with \\."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _any_of(part: str, values: tuple[Any, ...]) -> str:
    return part if len(values) == 1 else "(" + " OR ".join([part] * len(values)) + ")"


MIN_INDEXED_TEXT = 3  # a trigram index finds a text of three characters or more
# A backend's way to find free-text terms through its text index: the conditions (joined by
# AND with the others) and their parameters.
TextIndex = Callable[[list[str]], tuple[list[str], list[Any]]]


def _conditions(
    sql: Mapping[str, str],
    state: JobState | None,
    search: str | None,
    queue: str | None,
    query: JobQuery | None,
    text_index: TextIndex | None = None,
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
    texts = [*([search] if search else []), *query.text]
    indexed = [text for text in texts if len(text) >= MIN_INDEXED_TEXT] if text_index else []
    for text in texts:
        if text not in indexed:
            where.append(sql["list_jobs_matching"])
            params.extend([_pattern(text)] * 3)
    if indexed and text_index is not None:
        found, values = text_index(indexed)
        where.extend(found)
        params.extend(values)
    return where, params


def has_free_text(search: str | None, query: JobQuery | None) -> bool:
    """Whether a listing searches free text (and would use a text index if there is one)."""
    return bool(search) or bool(query and query.text)


def list_jobs_statement(
    sql: Mapping[str, str],
    *,
    state: JobState | None,
    limit: int,
    after_seq: int | None,
    newest_first: bool,
    search: str | None,
    queue: str | None,
    query: JobQuery | None = None,
    by_end: bool = False,
    text_index: TextIndex | None = None,
    after_end: int | None = None,
) -> tuple[str, list[Any]]:
    """The statement and its parameters: each combination of filters a plain range that keeps
    its index. `by_end` orders by when the jobs ended (those that have not are left out)
    instead of by creation; `newest_first` is the direction either way."""
    where, params = _conditions(sql, state, search, queue, query, text_index)
    if by_end:
        where.append(sql["list_jobs_ended"])
    if after_seq is not None:
        if by_end and after_end is not None:  # the anchor's own end: it may be gone since
            names = ("list_jobs_ended_before_at", "list_jobs_ended_after_at")
            params.append(after_end)
        elif by_end:
            names = ("list_jobs_ended_before", "list_jobs_ended_after")
        else:
            names = ("list_jobs_before", "list_jobs_after")
        where.append(sql[names[0] if newest_first else names[1]])
        params.append(after_seq)
    statement = sql["list_jobs"]
    if where:
        statement += "\nWHERE " + "\nAND ".join(where)
    if by_end:
        order = "list_jobs_ended_last" if newest_first else "list_jobs_ended_first"
    else:
        order = "list_jobs_newest_first" if newest_first else "list_jobs_oldest_first"
    statement += "\n" + sql[order]
    params.append(max(0, limit))
    return statement, params


def count_jobs_statement(
    sql: Mapping[str, str], query: JobQuery, text_index: TextIndex | None = None
) -> tuple[str, list[Any]]:
    """How many jobs match the query."""
    where, params = _conditions(sql, None, None, None, query, text_index)
    statement = sql["count_jobs"]
    if where:
        statement += "\nWHERE " + "\nAND ".join(where)
    return statement, params
