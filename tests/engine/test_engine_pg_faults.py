"""A pool on PostgreSQL whose database answers go missing: a commit whose answer is lost, and an
outage. The pool talks to the server through a proxy of the test's (pg_proxy.py) that loses
the answer to one chosen commit, or refuses every connection for a while; the test itself
reads the queue directly.

PostgreSQL only: these tests skip without the server, and fail instead when
QUEUECTL_REQUIRE_POSTGRES is set (as in CI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from engine_helpers import Queue, wait_until
from pg_proxy import PgProxy

from queuectl_tui.models import JobState, Outcome

from helpers import POSTGRES_URL, REQUIRE_POSTGRES, drop_test_schemas, postgres_location

pytestmark = pytest.mark.slow

FAST = {"stale_worker_timeout": 3, "heartbeat_interval": 0.5, "backoff_base": 1}


class Faulty:
    """One queue, seen directly by the test (`queue`) and through the proxy by its pools
    (`pooled`)."""

    def __init__(self, root: Path) -> None:
        location = postgres_location(root)
        parts = urlsplit(POSTGRES_URL)
        self.proxy = PgProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        self.queue = Queue(root, location)
        self.pooled = Queue(root, self.proxy.url(location))

    def configure(self, **settings: object) -> None:
        self.queue.configure(**settings)
        self.pooled.config = self.queue.config

    def close(self) -> None:
        self.pooled.close()
        self.queue.close()
        self.proxy.close()


@pytest.fixture
def faulty(tmp_path: Path, postgres_missing: str | None) -> Iterator[Faulty]:
    if postgres_missing is not None:
        if REQUIRE_POSTGRES:
            pytest.fail(f"{postgres_missing} (QUEUECTL_REQUIRE_POSTGRES is set)")
        pytest.skip(postgres_missing)
    made = Faulty(tmp_path)
    try:
        yield made
    finally:
        try:
            made.close()
        finally:
            drop_test_schemas()


def _no_job_processing(queue: Queue, total: int) -> None:
    wait_until(
        lambda: queue.counts()[JobState.COMPLETED] == total,
        timeout=60,
        interval=0.1,
        what=f"{total} completed jobs (now {queue.counts()})",
    )
    assert queue.counts()[JobState.PROCESSING] == 0


def test_claims_whose_answer_was_lost_are_handed_back_and_run(faulty: Faulty) -> None:
    faulty.configure(**FAST)
    pool = faulty.pooled.start_pool(count=4)
    faulty.proxy.arm(b"cut-", in_request=False)  # the answer that hands out a cut-* job
    ids = [faulty.queue.enqueue("echo ran", f"cut-{n}", max_retries=0) for n in range(8)]
    wait_until(lambda: faulty.proxy.cuts == 1, timeout=60, what="the claim's answer to be lost")

    _no_job_processing(faulty.queue, len(ids))
    handed_back = 0
    for job_id in ids:
        job = faulty.queue.job(job_id)
        attempts = faulty.queue.attempts(job_id)
        assert attempts[-1].outcome is Outcome.COMPLETED, attempts
        # A claim that never reached the pool is handed back unrun, its attempt not spent.
        assert job.attempts == 1, (job, attempts)
        assert [a.outcome for a in attempts[:-1]] in ([], [Outcome.INTERRUPTED]), attempts
        handed_back += len(attempts) - 1
    assert handed_back >= 1  # the lost answer did claim jobs
    assert pool.events("result discarded") == []
    assert pool.events("completed") and len(pool.events("completed")) == len(ids)
    assert pool.proc.poll() is None


def test_results_whose_answer_was_lost_are_not_reported_discarded(faulty: Faulty) -> None:
    faulty.configure(**FAST)
    pool = faulty.pooled.start_pool(count=2)
    faulty.proxy.arm(b"result-of-done-1", in_request=True)  # the exchange that records it
    ids = [
        faulty.queue.enqueue(f"echo result-of-{name}", name, max_retries=0)
        for name in ("done-1", "done-2", "done-3")
    ]
    wait_until(lambda: faulty.proxy.cuts == 1, timeout=60, what="the result's answer to be lost")

    _no_job_processing(faulty.queue, len(ids))
    for job_id in ids:
        [attempt] = [a for a in faulty.queue.attempts(job_id) if a.outcome is Outcome.COMPLETED]
        assert faulty.queue.job(job_id).runs >= 1
        assert attempt.output.strip() == f"result-of-{job_id}"
    wait_until(
        lambda: len(pool.events("completed")) == len(ids),
        timeout=30,
        what="every completion reported",
    )
    assert pool.events("result discarded") == []
    text = faulty.queue.cli("metrics").stdout
    assert "queuectl_late_results_total 0" in text or "queuectl_late_results 0" in text, text
