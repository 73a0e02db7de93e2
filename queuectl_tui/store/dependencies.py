"""Jobs that run after other jobs, for every backend: linking a new job to its parents, and
what a parent's end, deletion or retry does to the jobs that wait for it.

Where a job goes is `lifecycle.after_parents`; this module only gathers what it needs and
writes what it says, through a backend's own statements (`LinkStatements`), inside the
caller's transaction. Each link keeps how its parent ended, so the rule never needs the
parent's row (it may have been pruned). A job may only run after jobs made before it, so the
links can never form a cycle, and a cascade always moves to later jobs.

PostgreSQL runs several transactions at once: two parents of one job may end together, each
seeing the other's link still open. So the waiting jobs are locked (`dep_children` takes
their rows FOR UPDATE) before their links are read, by a later statement: the second
transaction then reads the first one's committed end, and one of the two frees the job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..display import printable
from ..lifecycle import DELETED, Readiness, after_parents
from ..models import FINISHED_STATES, JobLink, JobLinks, JobSpecError, JobState

Params = Mapping[str, Any]


class LinkStatements(Protocol):
    """A backend's statements for the rules here, run on the caller's connection. Parameters
    go by name; a list parameter is a list of values (each backend binds it its own way).

    dep_find_parents(ids): the ids among `ids` that name jobs.
    dep_mark_parents(ids): mark the jobs `ids` as having dependents (locking their rows);
        their (id, state).
    dep_link(child, position, parent, parent_state): one link.
    dep_any_end(seq): the job runs after its parents' ends, however they ended.
    dep_end_links(parents, end): every link to these parents gets `end` (NULL: reopened).
    dep_drop_links(parents): the open links to these deleted parents get 'deleted'.
    dep_children(parents, state): (seq, id, after_any_end, blocked_by) of the jobs in
        `state` that run after any of `parents`, by seq, locked.
    dep_links_of(seqs): (job seq, parent id, parent_state) of these jobs, in order given.
    dep_still_waiting(seqs): the seqs among these whose links say they wait on (a parent has
        not ended, and none failed unless they run after any end).
    dep_set_state(seq, state, blocked_by, error, now): a job's new place.
    dep_linked_among(ids): (id, seq, after_any_end) of these jobs that run after others.
    dep_parents_with_children(ids): the ids among `ids` that some job runs after.
    dep_blocked_by(ids): (blocked_by,) of the job `ids` names (one id).
    dep_forget_deleted(seqs): these jobs' links to deleted parents go.
    dep_any(): a row if any job runs after another (else an operator's action skips this).
    dep_stranded(): (seq, id, after_any_end, blocked_by) of the waiting jobs whose links say
        they should run or be cancelled, locked (rows another transaction holds skipped).
    """

    def rows(self, name: str, params: Params) -> list[tuple[Any, ...]]: ...

    def run_many(self, name: str, rows: Sequence[Params]) -> None: ...


class UnknownParent(JobSpecError):
    def __init__(self, job_id: str, parent_id: str) -> None:
        self.job_id = job_id
        super().__init__(
            f"job '{printable(job_id, True)}' cannot run after '{printable(parent_id, True)}': "
            "no such job was made before it",
            "after",
        )


def _end_of(state: str) -> str | None:
    """How a parent in `state` counts for its children: its end, or None while it runs."""
    return state if JobState(state) in FINISHED_STATES else None


def check_parents(sql: LinkStatements, child_id: str, after: Sequence[str]) -> None:
    """UnknownParent for an id of `after` that names no job: asked before the new job is
    stored, so that a refusal writes nothing. (Only jobs already there can be named: a job
    runs after jobs made before it, and the links can never form a cycle.)"""
    found = {job_id for (job_id,) in sql.rows("dep_find_parents", {"ids": list(after)})}
    for parent_id in after:
        if parent_id not in found:
            raise UnknownParent(child_id, parent_id)


def link(
    sql: LinkStatements,
    child_seq: int,
    child_id: str,
    after: Sequence[str],
    any_end: bool,
    now: int,
) -> JobState:
    """Link the new job `child_seq` (stored as pending, after check_parents) to the jobs it
    runs after, and put it where they say: the state it ends up in. The parents' rows are
    locked as they are marked, so a parent that ends meanwhile either ends before (its end is
    read here) or after this commits (and then sees the link)."""
    found = {job_id: state for job_id, state in sql.rows("dep_mark_parents", {"ids": list(after)})}
    for parent_id in after:
        if parent_id not in found:
            raise UnknownParent(child_id, parent_id)
    ends = [(parent_id, _end_of(found[parent_id])) for parent_id in after]
    sql.run_many(
        "dep_link",
        [
            {"child": child_seq, "position": n, "parent": parent_id, "parent_state": end}
            for n, (parent_id, end) in enumerate(ends)
        ],
    )
    if any_end:
        sql.run_many("dep_any_end", [{"seq": child_seq}])
    readiness = after_parents(ends, any_end)
    if readiness.state is not JobState.PENDING:
        sql.run_many("dep_set_state", [_place(child_seq, readiness, now)])
    return readiness.state


def _place(seq: int, readiness: Readiness, now: int) -> dict[str, Any]:
    return {
        "seq": seq,
        "state": readiness.state.value,
        "blocked_by": readiness.blocked_by,
        "error": readiness.reason,
        "now": now,
    }


@dataclass(frozen=True, slots=True)
class _Waiting:
    seq: int
    id: str
    any_end: bool
    blocked_by: str | None


def _children(sql: LinkStatements, parents: Sequence[str], state: JobState) -> list[_Waiting]:
    rows = sql.rows("dep_children", {"parents": list(parents), "state": state.value})
    return [_Waiting(seq, job_id, bool(any_end), blocked) for seq, job_id, any_end, blocked in rows]


def _links(sql: LinkStatements, seqs: Sequence[int]) -> dict[int, list[tuple[str, str | None]]]:
    links: dict[int, list[tuple[str, str | None]]] = {seq: [] for seq in seqs}
    for seq, parent_id, end in sql.rows("dep_links_of", {"seqs": list(seqs)}):
        links[seq].append((parent_id, end))
    return links


def parents_ended(
    sql: LinkStatements,
    ended: Sequence[tuple[str, str]],
    now: int,
    deleted: bool = False,
    links_ended: bool = False,
) -> None:
    """Jobs `ended` (id, how: a finished state) have ended, or were `deleted`: free, or
    cancel, the jobs waiting for them, and the jobs waiting for those, and so on.
    `links_ended`: the statement that ended them wrote their links' ends already."""
    while ended:
        parents = [job_id for job_id, _ in ended]
        if deleted:
            sql.run_many("dep_drop_links", [{"parents": parents}])
        elif not links_ended:
            sql.run_many("dep_end_links", [{"parents": [p], "end": end} for p, end in ended])
        deleted = links_ended = False  # what it cancels in turn has ended, nothing more
        ended = _move(sql, _children(sql, parents, JobState.WAITING), now)


def _move(sql: LinkStatements, waiting: Sequence[_Waiting], now: int) -> list[tuple[str, str]]:
    """Put waiting jobs (locked) where their links say; those cancelled, as ended."""
    if not waiting:
        return []
    # A job after a thousand others is looked at as each of them ends: first, by two probes
    # of partial indexes, whether it must go on waiting (a parent still runs, none failed);
    # its links are read only when it will move.
    staying = {seq for (seq,) in sql.rows("dep_still_waiting", {"seqs": [j.seq for j in waiting]})}
    waiting = [job for job in waiting if job.seq not in staying]
    if not waiting:
        return []
    links = _links(sql, [job.seq for job in waiting])
    changes = []
    cancelled = []
    for job in waiting:
        readiness = after_parents(links[job.seq], job.any_end)
        if readiness.state is JobState.WAITING:
            continue
        changes.append(_place(job.seq, readiness, now))
        if readiness.state is JobState.CANCELLED:
            cancelled.append((job.id, JobState.CANCELLED.value))
    sql.run_many("dep_set_state", changes)
    return cancelled


def sweep(sql: LinkStatements, now: int) -> int:
    """Move the waiting jobs whose parents have all ended, or one of which failed, but which
    still wait: left so by a pool that died between ending a parent and moving its
    children (on PostgreSQL a pool's hot path does the two in turn). How many moved."""
    if not sql.rows("dep_any", {}):
        return 0
    rows = sql.rows("dep_stranded", {})
    stranded = [_Waiting(seq, job_id, bool(any_end), by) for seq, job_id, any_end, by in rows]
    parents_ended(sql, _move(sql, stranded, now), now)
    return len(stranded)


def parents_retried(sql: LinkStatements, retried: Sequence[str], now: int) -> None:
    """Jobs `retried` run again (an operator's retry): the jobs their end had cancelled wait
    for them again (or run, or stay cancelled by another parent), and so on down."""
    while retried:
        sql.run_many("dep_end_links", [{"parents": list(retried), "end": None}])
        by = set(retried)
        cancelled = [
            job
            for job in _children(sql, retried, JobState.CANCELLED)
            if job.blocked_by in by  # cancelled by an operator, or by another parent: stays
        ]
        if not cancelled:
            return
        links = _links(sql, [job.seq for job in cancelled])
        changes = []
        retried = []
        for job in cancelled:
            readiness = after_parents(links[job.seq], job.any_end)
            if readiness.state is JobState.CANCELLED and readiness.blocked_by == job.blocked_by:
                continue
            changes.append(_place(job.seq, readiness, now))
            if readiness.state is not JobState.CANCELLED:
                retried.append(job.id)
        sql.run_many("dep_set_state", changes)


def blocked_among(sql: LinkStatements, ids: Sequence[str]) -> dict[str, str]:
    """Of jobs an operator wants to retry, those that may not run: a job they run after
    ended dead or cancelled (retry that one, or the one whose end cancelled it, first). Their
    ids, each with the reason. A parent that was deleted does not block: the retry forgets
    it (jobs_retried), as nothing could ever bring it back."""
    if not ids or not sql.rows("dep_any", {}):
        return {}
    linked = sql.rows("dep_linked_among", {"ids": list(ids)})
    if not linked:
        return {}
    links = _links(sql, [seq for _, seq, _ in linked])
    blocked = {}
    for job_id, seq, any_end in linked:
        kept = [(parent, end) for parent, end in links[seq] if end != DELETED]
        readiness = after_parents(kept, bool(any_end))
        if readiness.state is JobState.CANCELLED and readiness.blocked_by is not None:
            root = _first_cause(sql, readiness.blocked_by)
            blocked[job_id] = f"{readiness.reason}: retry '{root}' first"
    return blocked


def _first_cause(sql: LinkStatements, job_id: str) -> str:
    """The job at the start of a cascade: `job_id`, or the job whose end cancelled it, and so
    on up (a job after a job after a dead one names the dead one)."""
    seen = {job_id}
    while True:
        rows = sql.rows("dep_blocked_by", {"ids": [job_id]})
        above = rows[0][0] if rows else None
        if above is None or above in seen:
            return job_id
        seen.add(above)
        job_id = above


def jobs_retried(sql: LinkStatements, retried: Sequence[str], now: int) -> None:
    """Jobs `retried` are pending again: those that run after others wait for them if they
    have not all ended (a parent that was retried meanwhile), and the jobs waiting for the
    retried ones follow (parents_retried)."""
    if not retried or not sql.rows("dep_any", {}):
        return
    cancelled: set[str] = set()
    linked = sql.rows("dep_linked_among", {"ids": list(retried)})
    if linked:
        # Parents deleted since: retried, the job no longer waits for them.
        sql.run_many("dep_forget_deleted", [{"seqs": [seq for _, seq, _ in linked]}])
        links = _links(sql, [seq for _, seq, _ in linked])
        changes = []
        for job_id, seq, any_end in linked:
            readiness = after_parents(links[seq], bool(any_end))
            if readiness.state is JobState.CANCELLED:
                cancelled.add(job_id)  # only a retry that did not ask blocked_among first
            if readiness.state is not JobState.PENDING:
                changes.append(_place(seq, readiness, now))
        sql.run_many("dep_set_state", changes)
    again = [job_id for job_id in retried if job_id not in cancelled]
    parents = sql.rows("dep_parents_with_children", {"ids": again}) if again else []
    if parents:
        parents_retried(sql, [job_id for (job_id,) in parents], now)


def jobs_ended(sql: LinkStatements, ended: Sequence[tuple[str, str]], now: int) -> None:
    """Jobs `ended` (id, how) by an operator (cancelled): those that some job runs after are
    looked at (parents_ended)."""
    if not ended or not sql.rows("dep_any", {}):
        return
    have = {job_id for (job_id,) in sql.rows("dep_parents_with_children", _ids_of(ended))}
    if have:
        parents_ended(sql, [(job_id, end) for job_id, end in ended if job_id in have], now)


def jobs_deleted(sql: LinkStatements, deleted: Sequence[str], now: int) -> None:
    """Jobs `deleted` by an operator: the jobs waiting for them are cancelled."""
    if not deleted or not sql.rows("dep_any", {}):
        return
    have = [row[0] for row in sql.rows("dep_parents_with_children", {"ids": list(deleted)})]
    if have:
        parents_ended(sql, [(job_id, DELETED) for job_id in have], now, deleted=True)


def _ids_of(ended: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {"ids": [job_id for job_id, _ in ended]}


def links_from_rows(
    parents: Sequence[tuple[str, str | None, str | None]],
    children: Sequence[tuple[str, str]],
) -> JobLinks:
    """JobLinks from a backend's job_parents_of rows (id, state now or None, end) and
    job_children_of rows (id, state)."""
    return JobLinks(
        tuple(
            JobLink(job_id, None if state is None else JobState(state), end)
            for job_id, state, end in parents
        ),
        tuple(JobLink(job_id, JobState(state)) for job_id, state in children),
    )
