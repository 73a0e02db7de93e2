"""Pools in other PID namespaces (containers, `unshare --pid`) on the same host and hostname.

A pid means nothing across PID namespaces: a pool must neither take another namespace's live
pool for dead (its pid is not in our /proc) nor kill what such a pool runs (its cgroups are
siblings of ours). Each test starts its pools inside a cgroup of its own, so whatever a pool
sweeps is this test's; the cgroup and all in it is removed afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import PoolProcess, Queue, children, remove_cgroup_tree, wait_until

from queuectl_tui.engine import containment
from queuectl_tui.engine.detach import PoolOptions, pool_command
from queuectl_tui.engine.identity import pid_namespace, same_pid_namespace
from queuectl_tui.models import JobState

from helpers import backend_location

pytestmark = pytest.mark.slow

# The first process of a pool's namespace: $1 the test's cgroup ("" for none), $2 "ns" to
# be in a new PID namespace (unshare made it) or "host"; then the pool's command line.
ENTER = 'if [ -n "$1" ]; then echo $$ > "$1/cgroup.procs" || exit 97; fi; shift 2; exec "$@"'
# Small timings: a pool silent for 3 s is lost (were it judged by heartbeats at all).
FAST = {"stale_worker_timeout": 3, "heartbeat_interval": 0.5, "backoff_base": 1}


class Pool:
    """`queuectl worker start` in the test's cgroup, in a PID namespace of its own or not."""

    def __init__(
        self,
        queue: Queue,
        name: str,
        cgroup: Path | None,
        namespace: bool,
        own_proc: bool = True,
    ) -> None:
        self.log_path = queue.root / f"{name}.log"
        command = pool_command(queue.location, PoolOptions(1, "json"), queue.config)
        argv = ["sh", "-c", ENTER, "enter", str(cgroup or ""), "ns" if namespace else "host"]
        if namespace:
            # Without a /proc of its own (own_proc False) the pool cannot tell its namespace,
            # as in a container that sees the host's /proc.
            mount = ["--mount-proc"] if own_proc else []
            argv = ["unshare", "--pid", *mount, "--fork", "--kill-child", *argv]
        with open(self.log_path, "wb") as log:
            proc = subprocess.Popen(
                [*argv, *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=queue.root,
                env=queue.env,
            )
        self.process = PoolProcess(proc, self.log_path)
        self.namespace = namespace
        self.pool_id = self.process.wait_event("pool started", timeout=60)["pool"]
        # The pool's pid as this test's process table numbers it.
        self.pid = children(proc.pid)[0] if namespace else proc.pid

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.process.events(name)

    def stop(self) -> int:
        os.kill(self.pid, signal.SIGTERM)
        return self.process.proc.wait(timeout=60)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.process.proc.wait(timeout=30)

    def close(self) -> None:
        if self.process.proc.poll() is None:
            self.kill()


class Pools:
    """The pools of one test, all in one cgroup made for it (where cgroups are used)."""

    def __init__(self) -> None:
        parent = containment.cgroup_parent()
        # Not named queuectl-*: that prefix is the pools' own.
        self.cgroup = None if parent is None else parent / f"nstest-{uuid.uuid4().hex[:12]}"
        if self.cgroup is not None:
            self.cgroup.mkdir()
        self.started: list[Pool] = []

    def start(self, queue: Queue, name: str, namespace: bool, own_proc: bool = True) -> Pool:
        pool = Pool(queue, name, self.cgroup, namespace, own_proc)
        self.started.append(pool)
        return pool

    def run_cgroups(self) -> list[Path]:
        """The run cgroups that hold a process now."""
        if self.cgroup is None:
            return []
        return [
            run for run in self.cgroup.glob("queuectl-*/run-*") if containment.cgroup_members(run)
        ]

    def close(self) -> None:
        for pool in self.started:
            pool.close()
        if self.cgroup is not None:
            remove_cgroup_tree(self.cgroup)


@pytest.fixture
def pools(namespaces_missing: str | None) -> Iterator[Pools]:
    if namespaces_missing is not None:
        pytest.skip(namespaces_missing)
    started = Pools()
    try:
        yield started
    finally:
        started.close()


def _waiting_for(go: Path) -> str:
    """A job that runs until the test creates `go`, however slow the machine."""
    return f"until [ -e {go} ]; do sleep 0.05; done; echo done"


def _wait_running_in_a_cgroup(pools: Pools, queue: Queue, job_id: str) -> None:
    queue.wait_state(job_id, JobState.PROCESSING, timeout=60)
    if pools.cgroup is not None:  # moved into a cgroup of its own once it runs for a while
        wait_until(pools.run_cgroups, timeout=60, what=f"{job_id} in a cgroup of its own")


def _assert_ran_once_and_completed(queue: Queue, job_id: str) -> None:
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
    attempts = queue.attempts(job_id)
    assert (job.attempts, len(attempts)) == (1, 1), attempts
    assert attempts[0].output.strip().endswith("done")


@pytest.mark.parametrize("layout", ["host and namespace", "two namespaces"])
@pytest.mark.parametrize("databases", ["one database", "two databases"])
def test_pools_in_other_pid_namespaces_leave_each_other_s_runs_alone(
    pools: Pools, backend: str, tmp_path: Path, layout: str, databases: str
) -> None:
    """Pool A runs a long job; pool B starts in another PID namespace (same hostname), runs
    jobs of its own long enough to get cgroups, and stops; A's job is untouched throughout
    and completes once, and neither pool takes the other's workers for lost."""
    first = Queue(tmp_path, backend_location(backend, tmp_path))
    first.configure(**FAST)
    if databases == "one database":
        second = first
    else:
        (tmp_path / "b").mkdir()
        second = Queue(tmp_path / "b", backend_location(backend, tmp_path / "b"))
        second.configure(**FAST)
    go = tmp_path / "go"
    try:
        a = pools.start(first, "a", namespace=layout == "two namespaces")
        victim = first.enqueue(_waiting_for(go), "victim", max_retries=0)
        _wait_running_in_a_cgroup(pools, first, victim)

        b = pools.start(second, "b", namespace=True)
        assert b.pool_id != a.pool_id
        theirs = [second.enqueue("sleep 1; echo done", f"b-{n}", max_retries=0) for n in range(2)]
        for job_id in theirs:
            _assert_ran_once_and_completed(second, job_id)
        # Longer than the stale timeout: a pool judged by its pid would have been lost by now.
        time.sleep(FAST["stale_worker_timeout"] + 2)
        assert first.job(victim).state is JobState.PROCESSING
        assert b.stop() == 0

        go.touch()
        _assert_ran_once_and_completed(first, victim)
        for pool in (a, b):
            assert pool.events("worker lost") == []
            assert pool.events("killed what a dead pool left") == []
            assert pool.events("worker declared lost by another pool, re-registering") == []
        assert a.stop() == 0
    finally:
        go.touch()
        first.close()
        second.close()


def test_two_pools_that_are_both_pid_1_keep_distinct_workers(
    pools: Pools, backend: str, tmp_path: Path
) -> None:
    queue = Queue(tmp_path, backend_location(backend, tmp_path))
    queue.configure(**FAST)
    try:
        a = pools.start(queue, "a", namespace=True)
        b = pools.start(queue, "b", namespace=True)
        assert a.pool_id.split("@")[0] == b.pool_id.split("@")[0]  # same hostname, both pid 1
        assert a.pool_id != b.pool_id
        active = [worker for worker in queue.workers() if worker.status.value != "stopped"]
        assert sorted(worker.pool_id for worker in active) == sorted([a.pool_id, b.pool_id])
        assert len({worker.pid_namespace for worker in active}) == 2
        assert not any(same_pid_namespace(worker.pid_namespace) for worker in active)
    finally:
        queue.close()


def test_pid_1_pools_that_cannot_tell_their_namespaces_apart_keep_distinct_workers(
    pools: Pools, backend: str, tmp_path: Path
) -> None:
    """Two pools that are both pid 1 on one hostname, neither with a /proc of its own (so no
    namespace tells them apart): each keeps workers of its own, and when one is SIGKILLed the
    other recovers its running job and runs it again."""
    queue = Queue(tmp_path, backend_location(backend, tmp_path))
    queue.configure(**FAST)
    go = tmp_path / "go"
    try:
        a = pools.start(queue, "a", namespace=True, own_proc=False)
        held = queue.enqueue(
            f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then {_waiting_for(go)}; else echo done; fi',
            "held",
            max_retries=1,
        )
        queue.wait_state(held, JobState.PROCESSING, timeout=60)
        b = pools.start(queue, "b", namespace=True, own_proc=False)
        host = socket.gethostname()
        assert a.pool_id.startswith(f"{host}:1") and b.pool_id.startswith(f"{host}:1")
        assert a.pool_id != b.pool_id
        workers = {worker.id: worker for worker in queue.workers()}
        assert len(workers) == 2 and {w.pool_id for w in workers.values()} == {
            a.pool_id,
            b.pool_id,
        }
        assert all(w.status.value in ("idle", "busy") for w in workers.values()), workers
        assert queue.job(held).worker_id is not None
        assert queue.job(held).worker_id.startswith(a.pool_id + ":")  # type: ignore[union-attr]

        a.kill()
        job = queue.wait_state(held, JobState.COMPLETED, timeout=60)
        first, second = queue.attempts(held)
        assert first.outcome.value == "lost" and first.worker_id is not None
        assert first.worker_id.startswith(a.pool_id + ":")
        assert second.worker_id is not None and second.worker_id.startswith(b.pool_id + ":")
        assert job.runs == 2
        assert b.events("worker declared lost by another pool, re-registering") == []
        assert b.stop() == 0
    finally:
        go.touch()
        queue.close()


def test_a_killed_pool_s_leftovers_are_swept_from_another_pid_namespace(
    pools: Pools, backend: str, tmp_path: Path
) -> None:
    """Proof of death holds across namespaces: a pool killed with SIGKILL leaves a process
    in its run's cgroup (one that cleared its environment, so only the cgroup knows it); a
    pool in another PID namespace, on another database, kills it once it runs a job."""
    if pools.cgroup is None:
        pytest.skip("no writable cgroup v2 hierarchy on this machine")
    first = Queue(tmp_path, backend_location(backend, tmp_path))
    (tmp_path / "b").mkdir()
    second = Queue(tmp_path / "b", backend_location(backend, tmp_path / "b"))
    marker = tmp_path / "left.pid"
    left = f"env -i setsid sh -c 'echo $$ > {marker}; exec sleep 3313' </dev/null >/dev/null 2>&1 &"
    try:
        doomed = pools.start(first, "doomed", namespace=False)
        job_id = first.enqueue(f"{left} sleep 300", "leaves-a-child", max_retries=0)
        _wait_running_in_a_cgroup(pools, first, job_id)
        child = int(wait_until(lambda: marker.exists() and marker.read_text().strip(), 30))
        wait_until(
            lambda: any(child in containment.cgroup_members(run) for run in pools.run_cgroups()),
            timeout=30,
            what="the child in the run's cgroup",
        )
        doomed.kill()
        assert _alive(child)

        sweeper = pools.start(second, "sweeper", namespace=True)
        _assert_ran_once_and_completed(second, second.enqueue("sleep 1; echo done", "sweeps"))
        wait_until(lambda: not _alive(child), timeout=30, what="the left process to be killed")
        assert sweeper.events("killed what a dead pool left")
        assert not pools.run_cgroups()
    finally:
        first.close()
        second.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def test_this_process_knows_its_pid_namespace() -> None:
    key = pid_namespace()
    boot, _, inode = key.rpartition(":")
    assert boot and inode.isdigit()
    assert int(inode) == os.stat("/proc/self/ns/pid").st_ino
    assert same_pid_namespace(key)
    assert not same_pid_namespace("")
    assert not same_pid_namespace(f"{boot}:1")
