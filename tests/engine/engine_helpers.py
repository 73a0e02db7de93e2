"""Helpers for engine tests: real pool processes on a temporary database.

A module of its own (not conftest) so that test files import it by an unambiguous name."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

from queuectl_tui.config import Settings
from queuectl_tui.engine import events
from queuectl_tui.engine.detach import PoolOptions, log_path_for, pool_command
from queuectl_tui.engine.pool import Pool
from queuectl_tui.engine.procfs import pid_alive, stat_fields
from queuectl_tui.models import Attempt, Job, JobSpec, JobState, Worker
from queuectl_tui.store import Store, open_store
from queuectl_tui.timeutil import now_ms

from helpers import clean_env, wait_until

# True if a pid is a live process (zombies, which a container's init may never reap, count
# as gone): the pool's own check.
process_alive = pid_alive


def database_ports(pid: int, server_port: int) -> set[int]:
    """The local ports of a process's TCP connections to the database server on
    `server_port`: its sockets (/proc/PID/fd) looked up in the kernel's TCP table
    (/proc/PID/net/tcp*)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if match := re.fullmatch(r"socket:\[(\d+)\]", link):
                    inodes.add(match[1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            for line in lines:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


class PoolProcess:
    """One `queuectl worker start` process, logging JSON to a file."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        found = []
        for line in self.log_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if name is None or record.get("event") == name:
                found.append(record)
        return found

    def wait_event(self, name: str, timeout: float = 10.0, **fields: Any) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            for record in self.events(name):
                if all(record.get(k) == v for k, v in fields.items()):
                    return record
            if self.proc.poll() is not None and not self.events(name):
                raise AssertionError(f"pool exited ({self.proc.returncode}):\n{self.log_text()}")
            return None

        return wait_until(find, timeout, what=f"event {name} {fields}")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Queue:
    """A temporary database with helpers to run the CLI and pools against it."""

    def __init__(self, root: Path, location: str) -> None:
        self.root = root
        # A background pool of a server's queue logs under XDG_STATE_HOME: the test's folder.
        self.env = clean_env(XDG_STATE_HOME=str(root / "state"))
        self.location = location  # a path or a URL
        self.config: Path | None = None
        self.pools: list[PoolProcess] = []
        open_store(location).close()

    @property
    def db(self) -> Path:
        """The database file, for tests of SQLite's files (marked sqlite_only)."""
        return Path(self.location)

    def configure(self, **settings: Any) -> Path:
        self.config = self.root / "config.json"
        self.config.write_text(json.dumps(settings), encoding="utf-8")
        return self.config

    def workers_log(self) -> Path:
        """The log file of this queue's pools that have no terminal (detached, or hung up)."""
        with mock.patch.dict(os.environ, XDG_STATE_HOME=self.env["XDG_STATE_HOME"]):
            return log_path_for(self.location)

    def base_command(self) -> list[str]:
        command = [sys.executable, "-m", "queuectl_tui"]
        if self.config is not None:
            command += ["--config", str(self.config)]
        return [*command, "--db", self.location]

    def cli(
        self, *args: str, check: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*self.base_command(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env=self.env,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"queuectl {' '.join(args)} failed: {result.stderr}")
        return result

    def start_pool(
        self,
        count: int = 2,
        wait: bool = True,
        queues: tuple[str, ...] | None = None,
        under: tuple[str, ...] = (),
    ) -> PoolProcess:
        """A pool process of `count` workers; `under`: the command it runs under (such as
        `unshare --pid ...`, whose --kill-child then ends the rest with it)."""
        # The first free name: queues of one test (one straight, one through a proxy) may
        # share a folder.
        number = len(self.pools) + 1
        while (self.root / f"pool-{number}.log").exists():
            number += 1
        log_path = self.root / f"pool-{number}.log"
        options = PoolOptions(count, "json", queues)
        command = pool_command(self.location, options, self.config)
        with open(log_path, "wb") as log:
            # Its own session: a Ctrl+C in the terminal running pytest does not reach it.
            proc = subprocess.Popen(
                [*under, *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.root,
                env=self.env,
            )
        pool = PoolProcess(proc, log_path)
        self.pools.append(pool)
        if wait:
            pool.wait_event("pool started", timeout=60 if under else 10)
        return pool

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        store = open_store(self.location)
        try:
            yield store
        finally:
            store.close()

    def enqueue(self, command: str, job_id: str | None = None, **fields: Any) -> str:
        job_id = job_id or f"job-{now_ms()}-{os.urandom(3).hex()}"
        with self.store() as store:
            store.enqueue(JobSpec(job_id, command, **fields), 3, now_ms())
        return job_id

    def enqueue_many(self, specs: list[JobSpec]) -> None:
        with self.store() as store:
            store.enqueue_many(specs, 0, now_ms())

    def job(self, job_id: str) -> Job:
        with self.store() as store:
            job = store.get(job_id)
        assert job is not None, job_id
        return job

    def attempts(self, job_id: str) -> list[Attempt]:
        with self.store() as store:
            return store.attempts(job_id)

    def counts(self) -> dict[JobState, int]:
        with self.store() as store:
            return store.counts()

    def workers(self) -> list[Worker]:
        with self.store() as store:
            return store.list_workers()

    def wait_state(self, job_id: str, state: JobState, timeout: float = 10.0) -> Job:
        return wait_until(
            lambda: (job := self.job(job_id)).state is state and job,
            timeout,
            what=f"{job_id} to be {state.value}",
        )

    def wait_all_completed(self, total: int, timeout: float = 30.0) -> None:
        wait_until(
            lambda: self.counts()[JobState.COMPLETED] == total,
            timeout,
            interval=0.05,
            what=f"{total} completed jobs (now {self.counts()})",
        )

    def close(self) -> None:
        for pool in self.pools:
            if pool.proc.poll() is None:
                pool.signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    pool.proc.wait(timeout=10)


class InProcessPool:
    def __init__(
        self, database: str, count: int, log: io.StringIO | None = None, **settings: Any
    ) -> None:
        self.log = log or io.StringIO()
        events.configure("json", stream=self.log)
        chosen = replace(
            Settings(), database=str(database), **{"heartbeat_interval": 0.5, **settings}
        )
        self.pool = Pool(chosen, PoolOptions(count=count, log_format="json"))
        self.exit_code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait_until(lambda: "pool started" in self.log.getvalue(), what="the pool to start")

    def _run(self) -> None:
        self.exit_code = self.pool.run(install_signals=False)

    def events(self, name: str) -> list[dict[str, Any]]:
        records = [json.loads(line) for line in self.log.getvalue().splitlines() if line]
        return [record for record in records if record["event"] == name]

    def stop(self) -> int | None:
        self.pool.request_stop("test")
        self.thread.join(timeout=20)
        return self.exit_code


def children(pid: int) -> list[int]:
    """The children of process `pid`'s main thread."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


_STOPPED_OR_GONE = (b"T", b"t", b"Z", b"X", None)


def process_state(pid: int) -> bytes | None:
    """The one-letter state of /proc/PID/stat (R, S, D, T, Z…), or None when it is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def stop_all(list_processes: Callable[[], list[int]], what: str, timeout: float = 30) -> None:
    """SIGSTOP every process `list_processes` names, until none of them runs.

    A shell waits for the child it spawned with vfork (dash does, for each command) in
    uninterruptible sleep until that child calls exec: caught before its exec, the stopped
    child would hold the shell outside the stopped state for good. Such a child is let go on
    to its exec; the next round stops it again."""

    def all_stopped() -> bool:
        running = [p for p in list_processes() if process_state(p) not in _STOPPED_OR_GONE]
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        for pid in running:
            if process_state(pid) == b"D":
                for child in children(pid):
                    if process_state(child) in (b"T", b"t"):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(child, signal.SIGCONT)
        return not running

    wait_until(all_stopped, timeout=timeout, what=what)


def remove_cgroup_tree(root: Path) -> None:
    """Kill what is left in a test's cgroup and remove it, its descendants first."""
    with contextlib.suppress(OSError), open(root / "cgroup.kill", "w") as handle:
        handle.write("1")
    for _ in range(500):  # cgroup.kill is asynchronous: the cgroups empty soon after
        tree = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for cgroup in [*tree, root]:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        if not root.exists():
            return
        time.sleep(0.01)
