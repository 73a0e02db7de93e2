"""Bulk enqueue: batches of jobs as JSON texts that SQLite unpacks, in one transaction."""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...models import JobSpec
from ..base import BulkEnqueueResult
from .statements import SQL
from .submit import insert_one

if TYPE_CHECKING:
    from concurrent.futures import Future

# Only the fields some job of the batch sets travel; the others take their defaults in SQL
# (every json_extract costs a parse of the row, a third of the insert when all seven are read).
# Columns: (name, JobSpec index, what an unset value becomes: ?2 is now, ?3 the default
# max_retries).
_COLUMNS = (
    ("priority", 2, "0"),
    ("run_at", 3, "?2"),
    ("max_retries", 4, "?3"),
    ("timeout", 5, "NULL"),
    ("idempotency_key", 6, "NULL"),
    ("queue", 7, "'default'"),
    ("job_type", 8, "NULL"),
    ("payload", 9, "NULL"),
    ("cwd", 11, "NULL"),  # 10, a delay, is a run_at by now
    ("env", 12, "NULL"),
)
_QUEUE = 7
_DEFAULTS = JobSpec("", "")


class RepeatedId(Exception):
    """An id of a bulk insert exists already; carries the batches to find which one."""

    def __init__(self, batches: Sequence[Sequence[JobSpec]]) -> None:
        super().__init__("repeated id")
        self.batches = batches


def insert_batches(
    conn: sqlite3.Connection,
    batches: Iterable[Sequence[JobSpec]],
    default_max_retries: int,
    now: int,
) -> BulkEnqueueResult:
    """Insert every batch, inside the caller's write transaction. Each is inserted on a helper
    thread (three times faster than binding rows from Python): SQLite releases the GIL while
    it works, so the next batch is produced and encoded meanwhile. A batch with jobs that run
    after others goes a job at a time, in order (a job may run after one above it). Raises
    RepeatedId (DuplicateJobError or UnknownParent from a batch that went a job at a time)."""
    from concurrent.futures import ThreadPoolExecutor  # here: not on every command's start

    taken: list[Sequence[JobSpec]] = []
    counted = _Counted(conn)
    created = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="queuectl-insert") as pool:
        running: Future[int] | None = None
        try:
            for batch in batches:
                taken.append(batch)
                if any(spec.after for spec in batch):
                    if running is not None:
                        counted.inserted(running.result())
                        running = None
                    created += counted.count()
                    for spec in batch:
                        created += insert_one(conn, spec, default_max_retries, now).created
                    counted = _Counted(conn)
                    continue
                sql, payload, names_queues = _statement(batch)  # while the last one inserts
                counted.named_queues = counted.named_queues or names_queues
                if running is not None:
                    counted.inserted(running.result())
                running = pool.submit(_insert, conn, sql, payload, now, default_max_retries)
            if running is not None:
                counted.inserted(running.result())
                running = None
        except sqlite3.IntegrityError:
            raise RepeatedId(taken) from None
        finally:
            if running is not None:  # the input failed: let the insert end first
                running.exception()
    created += counted.count()
    offered = sum(len(batch) for batch in taken)
    return BulkEnqueueResult(created=created, existing=offered - created)


class _Counted:
    """The per-queue counts of the jobs inserted by whole batches since it was made, added
    once (a per-row trigger would cost a third of the insert)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._before = conn.execute(SQL["last_seq"]).fetchone()[0]
        self._created = 0
        self.named_queues = False  # whether some job names a queue other than the default

    def inserted(self, created: int) -> None:
        self._created += created

    def count(self) -> int:
        """Add the counts; how many jobs that was."""
        created, self._created = self._created, 0
        if created and self.named_queues:
            self._conn.execute(SQL["count_inserted_since"], {"after_seq": self._before})
        elif created:
            self._conn.execute(SQL["count_inserted"], {"queue": _DEFAULTS[_QUEUE], "n": created})
        return created


def _insert(conn: sqlite3.Connection, sql: str, payload: str, now: int, max_retries: int) -> int:
    return conn.execute(sql, (payload, now, max_retries)).rowcount


def _statement(batch: Sequence[JobSpec]) -> tuple[str, str, bool]:
    """The INSERT statement and the JSON payload for one batch, and whether some job of it
    names a queue (other than the default)."""
    set_fields = [
        (name, index, default)
        for name, index, default in _COLUMNS
        if any(spec[index] != _DEFAULTS[index] for spec in batch)
    ]
    # Put together here rather than named in queries.sql: which fields travel depends on the
    # batch. Every part comes from _COLUMNS; the values themselves travel in the payload.
    values = ["json_extract(value, '$[0]')", "json_extract(value, '$[1]')"]
    position = {index: place for place, (_, index, _) in enumerate(set_fields, start=2)}
    for _, index, default in _COLUMNS:
        if index in position:
            values.append(f"coalesce(json_extract(value, '$[{position[index]}]'), {default})")
        else:
            values.append(default)
    names = ", ".join(name for name, _, _ in _COLUMNS)
    sql = (
        f"INSERT INTO jobs (id, command, {names}, state, created_at, updated_at) "
        f"SELECT {', '.join(values)}, 'pending', ?2, ?2 FROM json_each(?1) WHERE true "
        "ON CONFLICT (idempotency_key) DO NOTHING"
    )
    if not set_fields:
        rows: Sequence[Any] = [spec[:2] for spec in batch]
    elif [index for _, index, _ in set_fields] == list(range(2, 2 + len(set_fields))):
        rows = [spec[: 2 + len(set_fields)] for spec in batch]
    else:
        pick = operator.itemgetter(0, 1, *(index for _, index, _ in set_fields))
        rows = [pick(spec) for spec in batch]
    names_queues = _QUEUE in position
    return sql, json.dumps(rows, ensure_ascii=False), names_queues
