"""An operator's control of jobs and queues: cancel, retry, delete, prune, pause, resume and
limit, each one call that every face makes (CLI, console, HTTP), and each recorded in the
audit trail with who did it, from which face and host, and what it touched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .errors import InvalidInput, NotFound
from .models import (
    FINISHED_STATES,
    MAX_QUEUE_LIMIT,
    Action,
    AuditEntry,
    JobState,
    Operator,
    QueueInfo,
    queue_name,
)
from .models import local_operator as local_operator  # each face's operator, from here too
from .query import parse_query
from .store import Store
from .timeutil import to_iso

R = TypeVar("R")

PRUNE_BATCH = 500  # jobs per transaction: a claim never waits long behind a prune
# Jobs per transaction of an action on more jobs (a filter over a big queue): each batch
# holds the write lock for tens of milliseconds, so pools go on claiming in between.
ACTION_BATCH = 2000
PRUNABLE_STATES = FINISHED_STATES
SUBJECT_IDS = 20  # an audit line names this many ids, then counts the rest


def describe_ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:SUBJECT_IDS])
    more = len(ids) - SUBJECT_IDS
    return f"{shown} and {more} more" if more > 0 else shown


@dataclass(frozen=True, slots=True)
class Report:
    """What an action did to each job it was given."""

    done: list[str]  # changed as asked
    pending_stop: list[str]  # cancel: running, their pools stop them now
    unchanged: list[tuple[str, JobState]]  # in a state the action leaves alone
    missing: list[str]  # no such job
    # Why some of `unchanged` were left alone, where it is not their state alone.
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every job given was changed (or is being stopped)."""
        return not self.unchanged and not self.missing


def _report(
    store: Store, ids: Sequence[str], done: list[str], pending_stop: list[str] | None = None
) -> Report:
    wanted = list(dict.fromkeys(ids))
    touched = set(done) | set(pending_stop or ())
    rest = [job_id for job_id in wanted if job_id not in touched]
    states = store.job_states(rest) if rest else {}
    return Report(
        done,
        pending_stop or [],
        [(job_id, states[job_id]) for job_id in rest if job_id in states],
        [job_id for job_id in rest if job_id not in states],
    )


def _in_batches(
    store: Store,
    ids: Sequence[str],
    action: Action,
    call: Callable[[Sequence[str], Action | None], R],
    touched: Callable[[R], int],
) -> list[R]:
    """`call` over `ids`: in one transaction with its audit line when they fit in a batch;
    else a batch at a time, the audit line (with the total) after the last batch that ran."""
    wanted = list(dict.fromkeys(ids))
    if len(wanted) <= ACTION_BATCH:
        return [call(wanted, action)]
    results: list[R] = []
    try:
        for start in range(0, len(wanted), ACTION_BATCH):
            results.append(call(wanted[start : start + ACTION_BATCH], None))
    finally:
        if results:
            store.record_action(action, sum(map(touched, results)), store.now())
    return results


def cancel_jobs(
    store: Store, ids: Sequence[str], who: Operator, subject: str | None = None
) -> Report:
    """Waiting jobs end cancelled at once; running ones are stopped by their pools and end
    cancelled (within a second); finished ones are left as they are. `subject` words what
    the operator gave (a filter) for the audit trail; by default, the ids."""
    now = store.now()
    results = _in_batches(
        store,
        ids,
        who.action("cancel", subject or describe_ids(ids), on_named_jobs=subject is None),
        lambda batch, action: store.cancel(batch, now, action),
        lambda result: len(result.cancelled) + len(result.requested),
    )
    cancelled = [job_id for result in results for job_id in result.cancelled]
    requested = [job_id for result in results for job_id in result.requested]
    return _report(store, ids, cancelled, requested)


def retry_jobs(
    store: Store, ids: Sequence[str], who: Operator, subject: str | None = None
) -> Report:
    """Dead and cancelled jobs back to pending with a fresh retry budget; failed ones that
    wait out a backoff ready now, their attempts kept."""
    now = store.now()
    results = _in_batches(
        store,
        ids,
        who.action("retry", subject or describe_ids(ids), on_named_jobs=subject is None),
        lambda batch, action: store.retry(batch, now, action),
        lambda result: len(result.fresh) + len(result.ready),
    )
    done = [job_id for result in results for job_id in [*result.fresh, *result.ready]]
    report = _report(store, ids, done)
    report.reasons.update(why for result in results for why in result.blocked.items())
    return report


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    retried: list[str]
    not_dead: list[str]  # known jobs that are not in the DLQ
    unknown: list[str]


def retry_dead(store: Store, job_ids: Sequence[str] | None, who: Operator) -> RetryOutcome:
    """Return dead jobs to pending with a fresh retry budget (all of them for None)."""
    subject = "every dead job" if job_ids is None else describe_ids(job_ids)
    action = who.action("retry", subject, on_named_jobs=job_ids is not None)
    retried = store.retry_dead(job_ids, store.now(), action)
    if job_ids is None:
        return RetryOutcome(retried, [], [])
    report = _report(store, job_ids, retried)
    return RetryOutcome(retried, [job_id for job_id, _ in report.unchanged], report.missing)


def delete_jobs(
    store: Store,
    ids: Sequence[str],
    who: Operator,
    subject: str | None = None,
    state: JobState | None = None,
) -> Report:
    """Remove jobs with their attempts and output; a running job is refused (cancel it
    first). With `state` (a delete by filter), only jobs still in that state go."""
    now = store.now()
    results = _in_batches(
        store,
        ids,
        who.action("delete", subject or describe_ids(ids), on_named_jobs=subject is None),
        lambda batch, action: store.delete(batch, now, action, state),
        len,
    )
    return _report(store, ids, [job_id for result in results for job_id in result])


def group_ids(store: Store, fingerprint: str, state: JobState = JobState.DEAD) -> list[str]:
    """The jobs of one error group (of dead jobs, or failed ones); NotFound if it has none."""
    ids = store.error_group_ids(state, fingerprint)
    if not ids:
        raise NotFound(f"no {state.value} jobs in the error group '{fingerprint}'")
    return ids


def group_subject(fingerprint: str, count: int) -> str:
    return f"error group '{fingerprint[:80]}' ({count} jobs)"


def retry_group(
    store: Store, fingerprint: str, who: Operator, state: JobState = JobState.DEAD
) -> Report:
    """Retry every job of an error group (dead ones afresh, failed ones now)."""
    ids = group_ids(store, fingerprint, state)
    return retry_jobs(store, ids, who, group_subject(fingerprint, len(ids)))


def delete_group(
    store: Store, fingerprint: str, who: Operator, state: JobState = JobState.DEAD
) -> Report:
    """Delete every job of an error group that is still in that state."""
    ids = group_ids(store, fingerprint, state)
    return delete_jobs(store, ids, who, group_subject(fingerprint, len(ids)), state)


def matching_ids(
    store: Store,
    state: JobState | None = None,
    queue: str | None = None,
    search: str | None = None,
) -> list[str]:
    """Every job id a filter selects, in creation order (for an action by filter): `search`
    in the search language (query.py), as the console's `/` and `list --query` take it;
    InvalidInput for bad text."""
    query = None if not search else parse_query(search, store.now())
    ids: list[str] = []
    after: int | None = None
    while True:
        page = store.list_jobs(state, limit=5000, after_seq=after, queue=queue, query=query)
        ids.extend(job.id for job in page)
        if len(page) < 5000:
            return ids
        after = page[-1].seq


def describe_filter(state: JobState | None, queue: str | None, search: str | None) -> str:
    parts = [f"state={state.value}" if state else "", f"queue={queue}" if queue else ""]
    parts.append(f"matching={search!r}" if search else "")
    return "filter " + " ".join(part for part in parts if part) if any(parts) else "every job"


def check_prunable(states: Sequence[JobState]) -> None:
    """InvalidInput unless every state is one whose jobs are finished."""
    for state in states:
        if state not in PRUNABLE_STATES:
            allowed = ", ".join(s.value for s in PRUNABLE_STATES)
            raise InvalidInput(f"only finished jobs are pruned ({allowed}), not {state.value}")


def prune(
    store: Store,
    states: Sequence[JobState],
    older_than_ms: int,
    who: Operator | None,
    dry_run: bool = False,
    before: int | None = None,
) -> int:
    """Remove the jobs in `states` (finished ones only) that finished more than
    `older_than_ms` ago (or before `before`, epoch ms, when given: a count and the prune it
    announced then agree), in small transactions. With `dry_run`, count them only."""
    check_prunable(states)
    if before is None:
        before = store.now() - older_than_ms
    if dry_run:
        return sum(store.count_prunable(state, before) for state in states)
    removed = sum(store.prune_all(state, before, PRUNE_BATCH) for state in states)
    if who is not None:
        names = ",".join(state.value for state in states)
        subject = f"state={names} finished before {to_iso(before)}"
        store.record_action(who.action("prune", subject), removed, store.now())
    return removed


def queue_overview(store: Store) -> list[QueueInfo]:
    return store.queues(store.now())


def set_paused(store: Store, name: str, paused: bool, who: Operator) -> None:
    name = queue_name(name, "queue", "a queue")
    action = who.action("pause" if paused else "resume", name)
    store.set_queue_paused(name, paused, store.now(), action)


def set_text_index(store: Store, on: bool, who: Operator) -> None:
    """Search free text through a trigram index (fast at any size, dearer inserts), or not."""
    store.set_text_index(on)
    store.record_action(who.action("search-index", "on" if on else "off"), 0, store.now())


def set_limit(store: Store, name: str, limit: int | None, who: Operator) -> None:
    """At most `limit` jobs of the queue run at once over every pool; None lifts the limit."""
    name = queue_name(name, "queue", "a queue")
    if limit is not None and not 1 <= limit <= MAX_QUEUE_LIMIT:
        raise InvalidInput(f"a queue's limit must be 1 to {MAX_QUEUE_LIMIT:,}, or none")
    subject = f"{name} max_running={'none' if limit is None else limit}"
    store.set_queue_limit(name, limit, store.now(), who.action("limit", subject))


def audit_trail(store: Store, limit: int = 50, before_id: int | None = None) -> list[AuditEntry]:
    return store.actions(limit, before_id)
