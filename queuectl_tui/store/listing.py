"""One keyset page of jobs, put together from a backend's fixed statement parts.

Each backend names the same parts in its sql/queries.sql (list_jobs, list_jobs_in_state, ...),
written in its own placeholders; only which of them go in, and in what order, is decided
here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import JobState


def list_jobs_statement(
    sql: Mapping[str, str],
    state: JobState | None,
    limit: int,
    after_seq: int | None,
    newest_first: bool,
    search: str | None,
    queue: str | None,
) -> tuple[str, list[Any]]:
    """The statement and its parameters: each combination of filters a plain range that keeps
    its index."""
    where: list[str] = []
    params: list[Any] = []
    if state is not None:
        where.append(sql["list_jobs_in_state"])
        params.append(state.value)
    if queue is not None:
        where.append(sql["list_jobs_in_queue"])
        params.append(queue)
    if after_seq is not None:
        where.append(sql["list_jobs_before" if newest_first else "list_jobs_after"])
        params.append(after_seq)
    if search:
        # A substring of the id or the command; the pattern's own %, _ and \\ are escaped.
        pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern += "%"
        where.append(sql["list_jobs_matching"])
        params.extend((pattern, pattern))
    statement = sql["list_jobs"]
    if where:
        statement += "\nWHERE " + "\nAND ".join(where)
    statement += "\n" + sql["list_jobs_newest_first" if newest_first else "list_jobs_oldest_first"]
    params.append(max(0, limit))
    return statement, params
