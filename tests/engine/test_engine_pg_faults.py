"""A pool on PostgreSQL whose database answers go missing: a commit whose answer is lost, and an
outage. The pool talks to the server through a proxy of the test's (pg_proxy.py) that loses
the answer to one chosen commit, or refuses every connection for a while; the test itself
reads the queue directly.

PostgreSQL only: these tests skip without the server, and fail instead when
QUEUECTL_REQUIRE_POSTGRES is set (as in CI)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from engine_helpers import PoolProcess, Queue, database_ports, wait_until
from pg_proxy import PgProxy
from store_helpers import NOW, POLICY, claim, register

from queuectl_tui.models import JobSpec, JobState, Outcome
from queuectl_tui.store import Settlement, Store, StoreError, open_store

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
    # Each run's line is logged once its exchange has committed it: a moment after the state.
    wait_until(lambda: len(pool.events("completed")) == len(ids), what="every completed line")
    assert pool.events("result discarded") == []
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


# -- an outage --------------------------------------------------------------------------------
# Long enough for the pool to miss the server and try again many times (its attempts come
# every RECONNECT_EVERY seconds, not backing off: test_attempts_to_connect_again_...).
OUTAGE = 5.0


def test_store_reads_fail_fast_in_an_outage_and_work_again_after(faulty: Faulty) -> None:
    store = open_store(faulty.pooled.location)
    try:
        assert store.counts()[JobState.PENDING] == 0
        faulty.proxy.outage()
        with pytest.raises(StoreError):  # its connection is cut under it
            store.counts()
        # The next says the server is gone: found out by a probe, not waited for the 30 s a
        # call may wait for a connection that is only busy ("no connection within 30 s").
        with pytest.raises(StoreError, match="does not answer"):
            store.counts()
        faulty.proxy.restore()
        wait_until(lambda: _reads(store), timeout=10, what="the store to read again")
    finally:
        store.close()


def _reads(store: Store) -> bool:
    try:
        store.counts()
    except StoreError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_healthz_answers_503_in_an_outage_and_200_once_the_server_is_back(
    faulty: Faulty,
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    log = faulty.queue.root / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            [*faulty.pooled.base_command(), "serve", "--addr", url.removeprefix("http://")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=faulty.queue.root,
            env=faulty.queue.env,
        )
    try:
        wait_until(lambda: _health(url) == 200, timeout=30, what="serve to answer /healthz")
        faulty.proxy.outage()
        # A client that gives up after 5 s still hears the 503 (the store fails fast).
        assert _health(url, timeout=5) == 503
        assert _health(url, timeout=5) == 503
        faulty.proxy.restore()
        wait_until(lambda: _health(url) == 200, timeout=10, what="/healthz to answer 200 again")
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def _health(url: str, timeout: float = 2.0) -> int | None:
    try:
        return httpx.get(url + "/healthz", timeout=timeout).status_code
    except httpx.TransportError:
        return None


def test_a_pool_is_back_at_work_soon_after_an_outage(faulty: Faulty) -> None:
    faulty.configure(**FAST)
    pool = faulty.pooled.start_pool(count=2)
    before = faulty.queue.enqueue("true", "before")
    faulty.queue.wait_state(before, JobState.COMPLETED, timeout=30)
    faulty.proxy.outage()
    wait_until(
        lambda: pool.events("heartbeat failed") or pool.events("database error, retrying"),
        timeout=60,
        what="the pool to miss the server",
    )
    during = [faulty.queue.enqueue("true", f"during-{n}") for n in range(3)]
    time.sleep(OUTAGE)
    faulty.proxy.restore()
    # How soon is a figure (README), not asserted here; that the pool's attempts to connect
    # again do not back off is test_attempts_to_connect_again_do_not_back_off's.
    for job_id in during:
        faulty.queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    assert pool.proc.poll() is None
    assert "Traceback" not in pool.log_text()


# -- a partition ------------------------------------------------------------------------------
def _pool_in_a_pid_namespace(queue: Queue, count: int) -> PoolProcess:
    """A pool in a PID namespace of its own: others judge it by its heartbeats alone, as a
    pool of another host."""
    return queue.start_pool(
        count, under=("unshare", "--pid", "--mount-proc", "--fork", "--kill-child")
    )


def test_claims_answered_after_a_partition_are_not_started_once_recovered(
    faulty: Faulty, namespaces_missing: str | None
) -> None:
    """Host A claims two jobs; the answer is held in a partition (A's heartbeats with it)
    until host B has declared A's workers lost and recovered the jobs. Once the partition
    heals, A must not start those claims: it re-registers, and runs the jobs only anew."""
    if namespaces_missing is not None:
        pytest.skip(namespaces_missing)
    faulty.configure(**FAST)
    # B watches over the queue (it recovers lost workers' jobs) but runs none of them.
    watcher = faulty.queue.start_pool(count=1, queues=("elsewhere",))
    partitioned = _pool_in_a_pid_namespace(faulty.pooled, count=2)
    time.sleep(FAST["stale_worker_timeout"] + 1)  # B's own heartbeats steady: it may judge
    runs = faulty.queue.root / "runs"
    runs.mkdir()
    command = f'echo "$QUEUECTL_ATTEMPT $QUEUECTL_WORKER" >> {runs}/$QUEUECTL_JOB_ID'
    faulty.proxy.arm(b"slow-", in_request=False, partition=True)
    ids = ["slow-1", "slow-2"]
    faulty.queue.enqueue_many([JobSpec(job_id, command, max_retries=2) for job_id in ids])
    wait_until(lambda: faulty.proxy.partitions == 1, timeout=60, what="the partition")
    wait_until(
        lambda: {r["job"] for r in watcher.events("recovered")} == set(ids),
        timeout=60,
        what="B to recover the partitioned claims",
    )
    faulty.proxy.heal()

    for job_id in ids:
        faulty.queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    for job_id in ids:
        # Only the run after recovery ran, under a worker registered again.
        lines = (runs / job_id).read_text().splitlines()
        assert len(lines) == 1, lines
        attempt, worker = lines[0].split()
        assert attempt == "2" and worker.startswith(partitioned.events("pool started")[0]["pool"])
        outcomes = [a.outcome for a in faulty.queue.attempts(job_id)]
        assert outcomes == [Outcome.LOST, Outcome.COMPLETED], outcomes
    not_started = {r["job"] for r in partitioned.events("claim recovered meanwhile, not started")}
    assert not_started == set(ids)
    assert partitioned.events("worker declared lost by another pool, re-registering")
    assert partitioned.events("result discarded") == []


# -- the store's own single-job paths ------------------------------------------------------------
def test_a_store_closed_after_a_lost_claim_hands_the_job_back(faulty: Faulty) -> None:
    """A claim whose answer was lost, and then the store closes (its pool stopping): the
    job goes back unrun, without waiting for another pool's recovery."""
    with faulty.queue.store() as direct:
        direct.enqueue(JobSpec("cut-alone", "true"), 3, NOW)
    store = open_store(faulty.pooled.location)
    try:
        register(store, "w1")
        faulty.proxy.arm(b"cut-alone", in_request=False)
        with pytest.raises(StoreError):
            store.claim("w1", 4242, NOW)
        assert faulty.proxy.cuts == 1
        assert faulty.queue.job("cut-alone").state is JobState.PROCESSING  # committed, unseen
    finally:
        store.close()
    job = faulty.queue.job("cut-alone")
    assert (job.state, job.attempts, job.worker_id) == (JobState.PENDING, 0, None), job
    assert [a.outcome for a in faulty.queue.attempts("cut-alone")] == [Outcome.INTERRUPTED]


def test_a_settle_whose_answer_was_lost_is_reported_as_recorded(faulty: Faulty) -> None:
    with faulty.queue.store() as direct:
        direct.enqueue(JobSpec("once", "true"), 3, NOW)
    store = open_store(faulty.pooled.location)
    try:
        job = claim(store)
        faulty.proxy.arm(b"output-of-once", in_request=True)
        lost = Settlement(job, Outcome.FAILED, 1, "output-of-once", "exit 1", NOW + 1000)
        with pytest.raises(StoreError):
            store.settle(lost, POLICY)
        assert faulty.proxy.cuts == 1
        again = store.settle(lost, POLICY)  # sent again, as the dispatcher does
        assert again.state is JobState.FAILED
    finally:
        store.close()
    assert [a.outcome for a in faulty.queue.attempts("once")] == [Outcome.FAILED]
    with faulty.queue.store() as direct:
        assert direct.metrics(NOW).late_results == 0


def test_attempts_to_connect_again_do_not_back_off() -> None:
    """psycopg_pool's own attempts wait 1 s, then 2, 4, 8...: a server back after 40 s was
    found 15 s later. The store's wait the same short time each (with the pool's jitter)."""
    import psycopg_pool

    from queuectl_tui.store.postgres.database import RECONNECT_EVERY, _QuickAttempt

    # The hook the store's pool overrides to use its own attempts (psycopg_pool is pinned).
    assert "_add_connection" in vars(psycopg_pool.ConnectionPool)
    attempt = _QuickAttempt(timeout=300)
    delays = []
    for step in range(8):
        attempt.update_delay(now=1000.0 + step)
        delays.append(attempt.delay)
    assert all(0 < delay <= RECONNECT_EVERY * 1.5 for delay in delays), delays


def _listening_backends(pool: PoolProcess) -> list[int]:
    """The server processes of the pool's own listening connections."""
    ports = sorted(database_ports(pool.pid, urlsplit(POSTGRES_URL).port or 5432))
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'queuectl listen'"
            " AND client_port = ANY(%s)",
            (ports,),
        ).fetchall()
    return [pid for (pid,) in rows]


def test_a_pool_whose_listening_connection_drops_hears_of_new_work_again(
    faulty: Faulty,
) -> None:
    # The dispatcher waits on that connection beside its commands' pipes: listening again,
    # on whatever descriptor, it must neither lose a ring nor mistake a pipe for the feed.
    queue = faulty.queue
    pool = queue.start_pool(count=2)
    ids: list[str] = []
    for round_ in range(5):
        wait_until(lambda: _listening_backends(pool), timeout=30, what="the pool to listen")
        # A command runs across the drop: its pipes are made after the feed connects again.
        ids.append(queue.enqueue("sleep 0.3", f"across-{round_}", max_retries=0))
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for backend in _listening_backends(pool):
                conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
        ids.append(queue.enqueue("true", f"after-{round_}", max_retries=0))
        _no_job_processing(queue, len(ids))
    assert pool.events("dispatcher error") == []
    assert [job_id for job_id in ids if queue.job(job_id).state is not JobState.COMPLETED] == []
    assert pool.proc.poll() is None


def test_a_feed_listens_again_on_a_thread_of_its_own(faulty: Faulty) -> None:
    # A pool's dispatcher drains its feed between supervising commands: a server that stops
    # answering must hold up only the feed's reconnection, never the dispatcher.
    with open_store(faulty.proxy.url(faulty.queue.location)) as store:
        feed = store.change_feed(work_only=True)
        try:
            feed.drain()  # the first look
            faulty.proxy.outage()  # the connection drops...
            faulty.proxy.restore()
            faulty.proxy.partition()  # ...and new ones are accepted but never answered
            assert feed.drain()  # lost: look at the queue now
            listening = [t for t in threading.enumerate() if t.name == "queuectl-listen"]
            assert [t for t in listening if t.is_alive()], "the drain waited for the connection"
            assert feed.fileno() is None
            faulty.proxy.heal()
            wait_until(
                lambda: feed.drain() and feed.fileno() is not None,
                timeout=30,
                what="the feed to listen again",
            )
            feed.drain()
            faulty.queue.enqueue("true", "heard")
            wait_until(feed.drain, timeout=10, what="the notification of the new job")
        finally:
            feed.close()
