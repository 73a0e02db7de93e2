"""A worker pool in its own process, as users run it, for the benchmarks to drive."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from types import TracebackType

from ..engine import procfs
from ..engine.detach import PoolOptions, pool_command
from ..store import open_store


def cpu_seconds(pid: int | str) -> float:
    """User plus system CPU time a process (or `PID/task/TID`: one thread) has used so far
    (Linux /proc). ProcessLookupError once it is gone."""
    fields = procfs.stat_fields(pid)
    if fields is None:
        raise ProcessLookupError(f"no process {pid}")
    return procfs.ticks_to_seconds(procfs.cpu_ticks(fields))


def machine_ticks() -> tuple[int, int]:
    """All CPU ticks so far and the idle ones (idle plus iowait), summed over the cores."""
    with open("/proc/stat", encoding="ascii") as handle:
        values = [int(field) for field in handle.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class PoolProcess:
    """`queuectl worker start --count N --log-format json` on a queue (a path or a URL), with
    its log kept."""

    def __init__(self, database: str, workers: int, log_path: Path) -> None:
        self.database = database
        self.workers = workers
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PoolProcess:
        command = pool_command(self.database, PoolOptions(self.workers, "json"))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL
            )
        self._wait_until_ready()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _wait_until_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with open_store(self.database) as store:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    raise RuntimeError(f"the worker pool exited early; see {self.log_path}")
                mine = [w for w in store.list_workers(active_only=True) if w.pid == self.pid]
                if len(mine) >= self.workers:
                    return
                time.sleep(0.02)
        raise RuntimeError(f"the worker pool did not start within {timeout:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def claim_times(self) -> dict[str, float]:
        """When each job was first claimed (epoch seconds), from the pool's JSON log."""
        claimed: dict[str, float] = {}
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("event") == "claimed" and "job" in record:
                claimed.setdefault(record["job"], _epoch(record["ts"]))
        return claimed

    def count_events(self, name: str) -> int:
        """How many times the pool has logged the event `name` so far."""
        needle = json.dumps(name)
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return sum(1 for line in text.splitlines() if f'"event": {needle}' in line)
