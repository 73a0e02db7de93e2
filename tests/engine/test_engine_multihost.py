"""Pools on several hosts sharing one PostgreSQL queue: together they run each job once, and a
host that crashes, freezes or loses its connections costs no job, and no job's recorded
history shows two runs where it should show one.

A "host" here is a `queuectl worker start` process in namespaces of its own (unshare): its
own hostname, its own process table (a PID namespace with /proc mounted anew, so that a pool
can neither see nor stop another host's processes, as on separate machines) and, where
cgroup v2 is writable, a cgroup of its own (so that the cgroups its pool makes for its runs
never meet another host's). The pool is the first process of its namespace: a SIGKILL takes
every process of its host down with it, as a crash does. A frozen host has every process on
it stopped, its runs included.

The last two: a host frozen inside a transaction does not hold up the others' recovery for
longer than the server lets an idle transaction live, and a pool that the database held back
does not declare the others lost as soon as it gets through.

PostgreSQL only: these tests skip without the server (or without namespaces), and fail
instead when QUEUECTL_REQUIRE_POSTGRES is set (as in CI)."""

from __future__ import annotations

import calendar
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from engine_helpers import (
    PoolProcess,
    Queue,
    children,
    database_ports,
    remove_cgroup_tree,
    stop_all,
    wait_until,
)

from queuectl_tui.engine.containment import cgroup_parent
from queuectl_tui.engine.detach import PoolOptions, pool_command
from queuectl_tui.models import Attempt, Job, JobState, Outcome, WorkerStatus
from queuectl_tui.timeutil import now_ms

from helpers import POSTGRES_URL, REQUIRE_POSTGRES, drop_test_schemas, postgres_location

pytestmark = pytest.mark.slow

# Small timings for the recovery scenarios: a silent host is lost after 3 s.
FAST_RECOVERY = {"stale_worker_timeout": 3, "heartbeat_interval": 0.5, "backoff_base": 1}
STALE_MS = 3000

# The first process of a host's namespaces: $1 its cgroup ("" for none), $2 its name, then
# the pool's command line, which replaces it.
HOST_INIT = (
    'if [ -n "$1" ]; then echo $$ > "$1/cgroup.procs" || exit 97; fi; '
    'hostname "$2" || exit 98; shift 2; exec "$@"'
)
# -- hosts -----------------------------------------------------------------------------------


def _database_port() -> int:
    return urlsplit(POSTGRES_URL).port or 5432


def _admin() -> psycopg.Connection[Any]:
    return psycopg.connect(POSTGRES_URL, autocommit=True)


class Host:
    """One simulated machine running one pool of `count` workers against the queue."""

    def __init__(self, queue: Queue, name: str, count: int, cgroup: Path | None) -> None:
        self.name = name
        self.cgroup = cgroup
        if cgroup is not None:
            cgroup.mkdir()
        self.log_path = queue.root / f"{name}.log"
        command = pool_command(queue.location, PoolOptions(count, "json"), queue.config)
        argv = ["unshare", "--uts", "--pid", "--mount-proc", "--kill-child"]
        argv += ["sh", "-c", HOST_INIT, "host-init", str(cgroup or ""), name, *command]
        with open(self.log_path, "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=queue.root,
                env=queue.env,
            )
        self.pool = PoolProcess(proc, self.log_path)  # its log, and unshare's exit
        self.pid = 0  # the pool's, as the test's process table numbers it, once known
        self.namespace = ""
        self.pool_id = ""

    def wait_started(self) -> None:
        unshare = self.pool.proc
        self.pid = wait_until(
            lambda: children(unshare.pid)[:1] or (unshare.poll() is not None and [-1]),
            timeout=30,
            what=f"{self.name}'s first process",
        )[0]
        if self.pid < 0:
            raise AssertionError(f"{self.name} did not start:\n{self.pool.log_text()}")
        self.namespace = os.readlink(f"/proc/{self.pid}/ns/pid")
        self.pool_id = self.wait_event("pool started")["pool"]
        assert self.pool_id.startswith(f"{self.name}:"), self.pool_id

    # -- what runs on it
    def processes(self) -> list[int]:
        """Every process of the host (the pool, its runs and whatever they started)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/ns/pid") == self.namespace:
                        found.append(int(entry))
        return found

    def alive(self) -> bool:
        return self.pool.proc.poll() is None

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.pool.events(name)

    def wait_event(self, name: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        return self.pool.wait_event(name, timeout, **fields)

    def worker_ids(self) -> list[str]:
        return [record["worker"] for record in self.events("worker started")]

    # -- what happens to it
    def freeze(self) -> None:
        """Stop every process of the host: the pool first, so that it starts nothing more."""
        os.kill(self.pid, signal.SIGSTOP)
        stop_all(self.processes, what=f"every process of {self.name} to stop")

    def freeze_between_transactions(self) -> None:
        """Freeze the host at a moment none of its connections is inside a transaction: one
        frozen inside a transaction holds its locks (see the test of that case)."""
        for _ in range(200):
            self.freeze()
            if not self.open_transactions():
                return
            self.thaw()
            time.sleep(0.01)
        raise AssertionError(f"{self.name} was always inside a transaction")

    def freeze_inside_a_transaction(self, queue: Queue) -> None:
        """Freeze the host while one of its transactions holds its workers' rows: the test
        locks the rows, the pool's next heartbeat waits for them, the host is frozen, the
        rows are let go; the heartbeat's UPDATE then goes through and its transaction stays
        open, waiting for a COMMIT the frozen pool cannot send."""
        with lock_worker_rows(queue, self.pool_id):
            wait_until(
                lambda: any(row["wait_event_type"] == "Lock" for row in self.backends().values()),
                timeout=30,
                what=f"{self.name} to wait for its workers' rows",
            )
            self.freeze()
        wait_until(
            lambda: [r for r in self.backends().values() if r["state"] == "idle in transaction"],
            timeout=30,
            what=f"{self.name}'s update to go through, its transaction left open",
        )

    def thaw(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def crash(self) -> None:
        """SIGKILL the pool, the first process of the host: the kernel kills every other."""
        os.kill(self.pid, signal.SIGKILL)
        self.pool.proc.wait(timeout=30)
        wait_until(lambda: not self.processes(), timeout=30, what=f"{self.name} to be gone")

    def stop(self) -> int:
        """A graceful stop (SIGTERM); unshare passes on the pool's exit status."""
        os.kill(self.pid, signal.SIGTERM)
        return self.pool.proc.wait(timeout=60)

    def close(self) -> None:
        """Whatever state it is in, end every process of the host (a stopped process is
        continued first) and remove its cgroup."""
        if self.alive():
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            for pid in [self.pid] if self.pid > 0 else children(self.pool.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.pool.proc.wait(timeout=30)
            self.pool.kill()  # unshare, if it is still there: --kill-child ends the rest
        if self.cgroup is not None:
            remove_cgroup_tree(self.cgroup)

    # -- its connections to the database
    def database_ports(self) -> set[int]:
        return database_ports(self.pid, _database_port())

    def backends(self) -> dict[int, dict[str, Any]]:
        """The server processes of the pool's connections: pid -> pg_stat_activity's row."""
        ports = sorted(self.database_ports())
        with _admin() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
            rows = cursor.execute(
                "SELECT pid, application_name, state, xact_start, wait_event_type"
                "  FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name LIKE 'queuectl%%'"
                "   AND client_port = ANY(%s)",
                (ports,),
            ).fetchall()
        return {row["pid"]: row for row in rows}

    def open_transactions(self) -> list[int]:
        return [pid for pid, row in self.backends().items() if row["xact_start"] is not None]


def schema_of(queue: Queue) -> str:
    return parse_qs(urlsplit(queue.location).query)["schema"][0]


@contextlib.contextmanager
def lock_worker_rows(queue: Queue, pool_id: str) -> Iterator[None]:
    """Hold the rows of one pool's workers locked (as a long write would) for the block."""
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute(
            f"SELECT 1 FROM {schema_of(queue)}.workers WHERE pool_id = %s FOR UPDATE", (pool_id,)
        )
        yield
        conn.commit()


class Cluster:
    """Hosts sharing one queue in a schema of its own."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.hosts: list[Host] = []
        self._tag = uuid.uuid4().hex[:12]
        self._cgroups = cgroup_parent()  # None: the product runs without cgroups here too

    def start(self, name: str, count: int = 2) -> Host:
        cgroup = None
        if self._cgroups is not None:
            # Not named queuectl-*: the pools of other tests sweep those.
            cgroup = self._cgroups / f"multihost-{self._tag}-{name}"
        host = Host(self.queue, name, count, cgroup)
        self.hosts.append(host)  # ended afterwards, even if it never starts properly
        host.wait_started()
        return host

    def close(self) -> None:
        for host in self.hosts:
            host.close()


@pytest.fixture
def cluster(
    tmp_path: Path, postgres_missing: str | None, namespaces_missing: str | None
) -> Iterator[Cluster]:
    """A new queue in a schema of its own; every host started on it is ended afterwards, and
    the schema dropped."""
    for missing in (postgres_missing, namespaces_missing):
        if missing is not None:
            if REQUIRE_POSTGRES:
                pytest.fail(f"{missing} (QUEUECTL_REQUIRE_POSTGRES is set)")
            pytest.skip(missing)
    queue = Queue(tmp_path, postgres_location(tmp_path))
    hosts = Cluster(queue)
    try:
        yield hosts
    finally:
        try:
            hosts.close()  # first: a frozen host's transaction would hold up the drop
            queue.close()
        finally:
            drop_test_schemas()


# -- jobs and what they leave ------------------------------------------------------------------
READ_HOST = "read host < /proc/sys/kernel/hostname"  # the run's own host, without a fork


def held_first_run(queue: Queue, gate: Path) -> str:
    """A job whose first run waits until `gate` exists and whose later runs finish at once;
    each run appends "<run> <host> start", then "<run> <host> done", to runs/<job id>."""
    runs = queue.root / "runs"
    runs.mkdir(exist_ok=True)
    log = f"{runs}/$QUEUECTL_JOB_ID"
    return (
        f'{READ_HOST}; echo "$QUEUECTL_ATTEMPT $host start" >> {log}; '
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then while [ ! -e {gate} ]; do sleep 0.05; done; fi; '
        f'echo "$QUEUECTL_ATTEMPT $host done" >> {log}'
    )


def runs_of(queue: Queue, job_id: str) -> list[str]:
    path = queue.root / "runs" / job_id
    return path.read_text().splitlines() if path.exists() else []


def marker_command(marks: Path) -> str:
    """Appends "<job id> <host>" to `marks`: one line per run."""
    return f'{READ_HOST}; echo "$QUEUECTL_JOB_ID $host" >> {marks}'


def enqueue_marked(queue: Queue, marks: Path, ids: list[str]) -> None:
    """Enqueue in bulk, as an operator does: `queuectl enqueue --file`."""
    jobs = queue.root / f"jobs-{ids[0]}.jsonl"
    rows = [{"id": i, "command": marker_command(marks), "max_retries": 0} for i in ids]
    jobs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queue.cli("enqueue", "--file", str(jobs), "--quiet")


def history(queue: Queue, ids: list[str]) -> dict[str, tuple[Job, list[Attempt]]]:
    with queue.store() as store:
        found = {}
        for job_id in ids:
            job = store.get(job_id)
            assert job is not None, job_id
            found[job_id] = (job, store.attempts(job_id))
        return found


def assert_each_completed_once(queue: Queue, marks: Path, ids: list[str]) -> dict[str, str]:
    """Each job completed in one run, which left one line; returns job id -> its worker."""
    lines = marks.read_text().splitlines()
    assert Counter(line.split()[0] for line in lines) == Counter(ids)
    ran_on = dict(line.split() for line in lines)
    workers = {}
    for job_id, (job, attempts) in history(queue, ids).items():
        assert job.state is JobState.COMPLETED, job
        assert (job.runs, job.attempts, job.worker_id) == (1, 1, None), job
        [attempt] = attempts
        assert attempt.outcome is Outcome.COMPLETED, attempt
        assert attempt.worker_id is not None
        assert attempt.worker_id.startswith(f"{ran_on[job_id]}:"), (attempt, ran_on[job_id])
        workers[job_id] = attempt.worker_id
    return workers


def pool_of(worker_id: str | None) -> str:
    assert worker_id is not None
    return worker_id.rsplit(":", 1)[0]


def late_results(queue: Queue) -> int:
    """The late-results counter as `queuectl metrics` prints it (and the store agrees)."""
    text = queue.cli("metrics").stdout
    match = re.search(r"^queuectl_late_results(?:_total)? (\S+)$", text, re.MULTILINE)
    assert match, text
    with queue.store() as store:
        assert store.metrics(now_ms()).late_results == float(match[1])
    return int(float(match[1]))


def wait_started(queue: Queue, job_ids: list[str], host: Host) -> None:
    for job_id in job_ids:
        queue.wait_state(job_id, JobState.PROCESSING, timeout=30)

        def started(job_id: str = job_id) -> bool:
            return runs_of(queue, job_id) == [f"1 {host.name} start"]

        wait_until(started, timeout=30, what=f"{job_id} to start on {host.name}")


def assert_healthy(host: Host) -> None:
    assert host.alive(), host.pool.log_text()
    assert "Traceback" not in host.pool.log_text()


# -- the scenarios -------------------------------------------------------------------------
def test_two_hosts_drain_one_queue_each_job_exactly_once(cluster: Cluster) -> None:
    queue = cluster.queue
    hosts = [cluster.start("host-a", count=4), cluster.start("host-b", count=4)]
    marks = queue.root / "ran"
    ids = [f"m{n:03d}" for n in range(240)]
    enqueue_marked(queue, marks, ids)
    queue.wait_all_completed(len(ids), timeout=180)

    workers = assert_each_completed_once(queue, marks, ids)
    by_pool = Counter(pool_of(worker) for worker in workers.values())
    assert set(by_pool) == {host.pool_id for host in hosts}, by_pool  # both did some
    assert queue.counts()[JobState.PROCESSING] == 0
    for host in hosts:
        assert_healthy(host)
        assert not host.events("worker lost")
    assert [host.stop() for host in hosts] == [0, 0]
    assert {w.status for w in queue.workers()} == {WorkerStatus.STOPPED}


def test_a_crashed_hosts_jobs_run_once_more_on_another_host(cluster: Cluster) -> None:
    queue = cluster.queue
    queue.configure(**FAST_RECOVERY)
    gate = queue.root / "gate"  # never opened: the first runs would wait for ever
    doomed = cluster.start("host-a", count=3)
    ids = [queue.enqueue(held_first_run(queue, gate), f"long{n}") for n in range(3)]
    wait_started(queue, ids, doomed)
    survivor = cluster.start("host-b", count=2)
    assert len(doomed.processes()) >= 1 + len(ids)  # the pool and (at least) the runs' shells

    doomed.crash()  # the runs die with it: nothing of host-a is left to finish them
    for job_id in ids:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=60)

    lost = survivor.events("worker lost")
    assert {record["worker"] for record in lost} == set(doomed.worker_ids())
    assert all(record["reason"].startswith("no heartbeat for") for record in lost), lost
    assert {record["job"] for record in survivor.events("recovered")} == set(ids)
    workers = {worker.id: worker for worker in queue.workers()}
    for job_id, (job, attempts) in history(queue, ids).items():
        assert (job.runs, job.attempts, job.exit_code) == (2, 2, 0), job
        first, second = attempts
        assert first.outcome is Outcome.LOST and pool_of(first.worker_id) == doomed.pool_id
        assert "was lost mid-job" in (first.error or "")
        assert second.outcome is Outcome.COMPLETED, second
        assert pool_of(second.worker_id) == survivor.pool_id
        # Recovered only once the host had been silent for the stale timeout.
        assert first.worker_id is not None
        assert first.finished_at - workers[first.worker_id].last_heartbeat >= STALE_MS
        assert runs_of(queue, job_id) == ["1 host-a start", "2 host-b start", "2 host-b done"]
    assert {workers[w].status for w in doomed.worker_ids()} == {WorkerStatus.LOST}
    assert queue.counts()[JobState.PROCESSING] == 0
    assert_healthy(survivor)


def test_a_frozen_hosts_late_results_change_nothing_and_it_carries_on(cluster: Cluster) -> None:
    queue = cluster.queue
    queue.configure(**FAST_RECOVERY)
    gate = queue.root / "gate"
    frozen = cluster.start("host-a", count=2)
    ids = [queue.enqueue(held_first_run(queue, gate), f"held{n}") for n in range(2)]
    wait_started(queue, ids, frozen)
    rescuer = cluster.start("host-b", count=2)

    frozen.freeze_between_transactions()
    for job_id in ids:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    settled = history(queue, ids)
    for job_id, (job, attempts) in settled.items():
        assert [a.outcome for a in attempts] == [Outcome.LOST, Outcome.COMPLETED]
        assert [pool_of(a.worker_id) for a in attempts] == [frozen.pool_id, rescuer.pool_id]
        assert (job.runs, job.attempts) == (2, 2)
        assert runs_of(queue, job_id) == ["1 host-a start", "2 host-b start", "2 host-b done"]
    late_before = late_results(queue)

    # Thawed, the held first runs go on and finish: nobody could stop them (the other host
    # cannot reach them), so their effect happens too. Their results are turned away.
    gate.touch()
    frozen.thaw()
    for job_id in ids:
        discarded = frozen.wait_event("result discarded", timeout=30, job=job_id)
        assert discarded["outcome"] == "completed" and discarded["attempt"] == 1
    wait_until(
        lambda: late_results(queue) == late_before + len(ids),
        timeout=30,
        what="the late results to be counted",
    )
    assert history(queue, ids) == settled  # the jobs and their histories, unchanged
    for job_id in ids:
        assert Counter(runs_of(queue, job_id)) == Counter(
            ["1 host-a start", "1 host-a done", "2 host-b start", "2 host-b done"]
        )

    # ... and host-a carries on: its workers re-register, and with host-b gone it takes the
    # new work, each job once.
    for worker_id in frozen.worker_ids():
        frozen.wait_event(
            "worker declared lost by another pool, re-registering", timeout=30, worker=worker_id
        )
    assert rescuer.stop() == 0
    marks = queue.root / "ran"
    after = [f"after{n:02d}" for n in range(20)]
    enqueue_marked(queue, marks, after)
    queue.wait_all_completed(len(ids) + len(after), timeout=60)
    workers = assert_each_completed_once(queue, marks, after)
    assert {pool_of(worker) for worker in workers.values()} == {frozen.pool_id}
    statuses = {w.id: w.status for w in queue.workers()}
    assert {statuses[w] for w in frozen.worker_ids()} <= {WorkerStatus.IDLE, WorkerStatus.BUSY}
    assert queue.counts()[JobState.PROCESSING] == 0
    assert_healthy(frozen)


@pytest.mark.parametrize("moment", ["between-transactions", "inside-a-transaction"])
def test_a_host_cut_off_from_the_database_reconnects_and_loses_nothing(
    cluster: Cluster, moment: str
) -> None:
    queue = cluster.queue
    # A stale timeout far longer than the cut: nobody recovers host-a's jobs meanwhile, so
    # each job must run exactly once.
    queue.configure(stale_worker_timeout=60, heartbeat_interval=0.5, backoff_base=1)
    gate = queue.root / "gate"
    cut_off = cluster.start("host-a", count=3)
    held = [queue.enqueue(held_first_run(queue, gate), f"held{n}") for n in range(3)]
    wait_started(queue, held, cut_off)
    other = cluster.start("host-b", count=2)
    marks = queue.root / "ran"
    batches = [[f"b{batch}-{n:02d}" for n in range(20)] for batch in range(4)]
    enqueue_marked(queue, marks, batches[0])
    queue.wait_all_completed(len(batches[0]), timeout=60)

    if moment == "inside-a-transaction":
        cut_off.freeze_inside_a_transaction(queue)
    else:
        cut_off.freeze_between_transactions()
    cut = cut_off.backends()
    assert {row["application_name"] for row in cut.values()} == {"queuectl", "queuectl listen"}
    untouched = set(other.backends())
    with _admin() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (list(cut),))
        wait_until(
            lambda: (
                not conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (list(cut),)
                ).fetchall()
            ),
            timeout=30,
            what="host-a's connections to end",
        )
    enqueue_marked(queue, marks, batches[1])  # while host-a is frozen and cut off
    gate.touch()
    cut_off.thaw()
    enqueue_marked(queue, marks, batches[2])
    for job_id in held:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    queue.wait_all_completed(len(held) + 3 * 20, timeout=60)

    # host-a is connected anew (host-b's connections were never touched) ...
    wait_until(
        lambda: (now := set(cut_off.backends())) and not now & set(cut),
        timeout=30,
        what="host-a to reconnect",
    )
    assert untouched <= set(other.backends())
    # ... and serves the queue: with host-b gone, it runs the last batch.
    assert other.stop() == 0
    enqueue_marked(queue, marks, batches[3])
    queue.wait_all_completed(len(held) + 4 * 20, timeout=60)

    workers = assert_each_completed_once(queue, marks, [i for batch in batches for i in batch])
    assert {pool_of(workers[i]) for i in batches[3]} == {cut_off.pool_id}
    for job_id, (job, attempts) in history(queue, held).items():
        assert (job.state, job.runs, job.attempts) == (JobState.COMPLETED, 1, 1), job
        [attempt] = attempts
        assert (
            attempt.outcome is Outcome.COMPLETED and pool_of(attempt.worker_id) == cut_off.pool_id
        )
        assert runs_of(queue, job_id) == ["1 host-a start", "1 host-a done"]
    assert queue.counts()[JobState.PROCESSING] == 0
    assert not cut_off.events("worker lost") and not other.events("worker lost")
    if moment == "inside-a-transaction":
        # The transaction the cut aborted was a heartbeat's: a failure, logged, then the next.
        assert cut_off.events("heartbeat failed")
    assert_healthy(cut_off)


# -- what must not go wrong ----------------------------------------------------------------
def test_a_host_frozen_inside_a_transaction_does_not_hold_up_recovery(cluster: Cluster) -> None:
    queue = cluster.queue
    queue.configure(**FAST_RECOVERY)
    gate = queue.root / "gate"
    frozen = cluster.start("host-a", count=2)
    ids = [queue.enqueue(held_first_run(queue, gate), f"held{n}") for n in range(2)]
    wait_started(queue, ids, frozen)
    rescuer = cluster.start("host-b", count=2)

    frozen.freeze_inside_a_transaction(queue)
    rescuer.wait_event("worker lost", timeout=30)  # it notices after the stale timeout ...
    for job_id in ids:  # ... and recovers the jobs, as from a host frozen at any other moment
        rescuer.wait_event("recovered", timeout=10 * STALE_MS / 1000, job=job_id)
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
    assert_healthy(rescuer)


def test_a_pool_held_back_by_the_database_does_not_declare_the_others_lost(
    cluster: Cluster,
) -> None:
    """The database holds both hosts' heartbeats back for twice the stale timeout (the rows
    they write stay locked, as under a long write; the same happens when the server is
    unreachable from every host for a while), and lets host-b through a second before
    host-a: host-b, itself just back, must not take host-a's silence for a crash."""
    queue = cluster.queue
    queue.configure(**FAST_RECOVERY)
    gate = queue.root / "gate"
    a = cluster.start("host-a", count=2)
    ids_a = [queue.enqueue(held_first_run(queue, gate), f"a{n}") for n in range(2)]
    wait_started(queue, ids_a, a)
    b = cluster.start("host-b", count=2)
    ids_b = [queue.enqueue(held_first_run(queue, gate), f"b{n}") for n in range(2)]
    wait_started(queue, ids_b, b)

    with lock_worker_rows(queue, a.pool_id):
        with lock_worker_rows(queue, b.pool_id):
            for host in (a, b):

                def waits_on_a_lock(host: Host = host) -> bool:
                    rows = host.backends().values()
                    return any(row["wait_event_type"] == "Lock" for row in rows)

                wait_until(waits_on_a_lock, timeout=30, what=f"{host.name}'s heartbeat to wait")
            time.sleep(2 * STALE_MS / 1000)
        time.sleep(1.0)  # host-b is through; host-a a second later
    time.sleep(STALE_MS / 1000 + 2)  # long enough to misjudge, if they would
    gate.touch()
    for job_id in ids_a + ids_b:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    assert not a.events("worker lost"), a.events("worker lost")
    assert not b.events("worker lost"), b.events("worker lost")
    for host, ids in ((a, ids_a), (b, ids_b)):
        for job_id, (_, attempts) in history(queue, ids).items():
            assert [attempt.outcome for attempt in attempts] == [Outcome.COMPLETED], attempts
            assert runs_of(queue, job_id) == [f"1 {host.name} start", f"1 {host.name} done"]


def test_a_chain_runs_in_order_across_hosts_and_a_crash_changes_nothing(
    cluster: Cluster,
) -> None:
    """`a`, then b1..b50 after `a`, then `c` after all of them, on two hosts; one host
    crashes while the b's run."""
    queue = cluster.queue
    queue.configure(**FAST_RECOVERY)
    log = queue.root / "chain"
    step = f'{READ_HOST}; echo "$QUEUECTL_JOB_ID start $host" >> {log}; sleep 0.2; '
    step += f'echo "$QUEUECTL_JOB_ID done $host" >> {log}'
    middle = [f"b{n}" for n in range(1, 51)]
    rows: list[dict[str, object]] = [{"id": "a", "command": step}]
    rows += [{"id": b, "command": step, "after": "a"} for b in middle]
    rows.append({"id": "c", "command": step, "after": middle})
    jobs = queue.root / "chain.jsonl"
    jobs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queue.cli("enqueue", "--file", str(jobs), "--quiet")
    doomed = cluster.start("host-a", count=4)
    survivor = cluster.start("host-b", count=4)

    def lines() -> list[list[str]]:
        return [line.split() for line in log.read_text().splitlines()] if log.exists() else []

    wait_until(lambda: sum(line[1] == "done" for line in lines()) >= 10, 60, what="some b's")
    doomed.crash()
    queue.wait_state("c", JobState.COMPLETED, timeout=120)

    seen = lines()
    order = [(line[0], line[1]) for line in seen]
    assert order.index(("a", "done")) < min(order.index((b, "start")) for b in middle)
    assert max(order.index((b, "done")) for b in middle) < order.index(("c", "start"))
    for job_id in ["a", *middle, "c"]:
        assert queue.job(job_id).state is JobState.COMPLETED, job_id
    assert {line[2] for line in seen} == {"host-a", "host-b"}  # both hosts ran some
    assert_healthy(survivor)


def test_two_hosts_make_exactly_one_job_per_tick_of_a_schedule(cluster: Cluster) -> None:
    queue = cluster.queue
    queue.cli("schedule", "add", "tick", "--every", "2s", "--command", "true")
    hosts = [cluster.start("host-a", count=2), cluster.start("host-b", count=2)]
    wait_until(lambda: queue.counts()[JobState.COMPLETED] >= 8, 60, what="eight ticks")
    assert [host.stop() for host in hosts] == [0, 0]
    with queue.store() as store:
        ticks = sorted(job.id for job in store.list_jobs(limit=1000) if job.id.startswith("tick@"))
    stamps = [calendar.timegm(time.strptime(t[5:], "%Y%m%dT%H%M%SZ")) for t in ticks]
    assert [b - a for a, b in itertools.pairwise(stamps)] == [2] * (len(stamps) - 1), ticks
    made = Counter(
        job_id
        for host in hosts
        for record in host.events("schedule fired")
        for job_id in (record.get("jobs") or "").split(",")
        if job_id
    )
    assert sorted(made) == ticks and set(made.values()) == {1}
