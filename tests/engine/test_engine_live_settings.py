"""Live settings: a running pool applies a `config set` of job-timeout, output-limit and
kill-grace to its next run, and of backoff-base and max-backoff to its next failure.

Each scenario runs a real `queuectl worker start` process on each backend and changes the
setting with the real `queuectl config set` while the pool runs."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import PoolProcess, Queue

from queuectl_tui.config import LIVE_KEYS, Settings, SettingsSource
from queuectl_tui.engine import events
from queuectl_tui.engine.live_settings import LiveSettings
from queuectl_tui.models import JobState, Outcome

NOT_APPLIED = "config file not applied, settings unchanged"


def _pool(queue: Queue, **settings: Any) -> PoolProcess:
    """One worker, started on a config file holding `settings`."""
    queue.configure(heartbeat_interval=0.5, **settings)
    return queue.start_pool(count=1)


def _replace(path: Path, settings: Any) -> None:
    """Write the file as `config set` does, by a rename: the pool never sees half of it."""
    temp = path.with_name(f".{path.name}.new")
    temp.write_text(settings if isinstance(settings, str) else json.dumps(settings))
    os.replace(temp, path)


def _finished(queue: Queue, job_id: str, state: JobState, timeout: float = 40.0) -> Any:
    queue.wait_state(job_id, state, timeout=timeout)
    return queue.attempts(job_id)[-1]


def test_job_timeout_reaches_the_next_run(queue: Queue) -> None:
    _pool(queue, job_timeout=300)
    assert "next run" in queue.cli("config", "set", "job-timeout", "2").stdout
    job_id = queue.enqueue("sleep 60", max_retries=0)
    attempt = _finished(queue, job_id, JobState.DEAD)
    assert (attempt.outcome, attempt.error) == (Outcome.TIMEOUT, "timed out after 2 s")


def test_backoff_base_reaches_the_next_failure(queue: Queue) -> None:
    _pool(queue, backoff_base=1.5)
    queue.cli("config", "set", "backoff-base", "30")
    job_id = queue.enqueue("false", max_retries=1)
    attempt = _finished(queue, job_id, JobState.FAILED)
    assert queue.job(job_id).run_at - attempt.finished_at == 30_000  # 30 ** 1 seconds


def test_max_backoff_reaches_the_next_failure(queue: Queue) -> None:
    _pool(queue, backoff_base=60, max_backoff=3600)
    queue.cli("config", "set", "max-backoff", "5")
    job_id = queue.enqueue("false", max_retries=1)
    attempt = _finished(queue, job_id, JobState.FAILED)
    assert queue.job(job_id).run_at - attempt.finished_at == 5_000  # 60 s, capped at 5


def test_output_limit_reaches_the_next_run(queue: Queue) -> None:
    _pool(queue, output_limit=65536)
    queue.cli("config", "set", "output-limit", "8")
    job_id = queue.enqueue("printf 0123456789abcdef")
    attempt = _finished(queue, job_id, JobState.COMPLETED)
    assert attempt.output == "[queuectl: 8 earlier bytes of output dropped]\n89abcdef"


def test_kill_grace_reaches_the_next_run(queue: Queue) -> None:
    _pool(queue, kill_grace=300)
    queue.cli("config", "set", "kill-grace", "0")
    # The command ignores SIGTERM: only the SIGKILL after the grace period stops it.
    job_id = queue.enqueue("trap '' TERM; sleep 120", max_retries=0, timeout=1)
    attempt = _finished(queue, job_id, JobState.DEAD)
    assert (attempt.outcome, attempt.exit_code) == (Outcome.TIMEOUT, -9)


def test_a_broken_config_file_keeps_the_last_good_settings(queue: Queue) -> None:
    pool = _pool(queue, job_timeout=300)
    queue.cli("config", "set", "job-timeout", "2")
    pool.wait_event("settings applied", job_timeout=2.0)
    assert queue.config is not None
    _replace(queue.config, '{"job_timeout": ')  # cut short
    pool.wait_event(NOT_APPLIED)
    job_id = queue.enqueue("sleep 60", max_retries=0)
    attempt = _finished(queue, job_id, JobState.DEAD)
    assert attempt.error == "timed out after 2 s"
    assert pool.proc.poll() is None and len(pool.events(NOT_APPLIED)) == 1
    _replace(queue.config, {"heartbeat_interval": 0.5, "job_timeout": 1})  # mended
    pool.wait_event("settings applied", job_timeout=1.0)


def test_a_setting_that_needs_a_restart_is_logged_and_left_alone(queue: Queue) -> None:
    pool = _pool(queue)
    answer = queue.cli("config", "set", "max-retries", "7").stdout
    assert "running servers and consoles after a restart" in answer
    queue.cli("config", "set", "keep-dead-days", "3")
    pool.wait_event("settings need a restart of the pool", settings="keep-dead-days")
    assert pool.events("settings applied") == []


# -- without a pool ----------------------------------------------------------------------------
@pytest.fixture
def log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    events.configure("json", stream=stream)
    yield stream
    logging.getLogger(events.LOGGER_NAME).handlers.clear()


def _watching(config: Path, **flags: Any) -> LiveSettings:
    source = SettingsSource.capture(str(config), env={}, **flags)
    return LiveSettings(source.load(), source)


def test_only_the_live_settings_change_and_a_flag_keeps_winning(
    tmp_path: Path, log: io.StringIO
) -> None:
    config = tmp_path / "config.json"
    _replace(config, {"database": "file.db", "heartbeat_interval": 1})
    live = _watching(config, db_path=str(tmp_path / "flag.db"))
    started = live.refresh()
    _replace(config, {"database": "other.db", "heartbeat_interval": 3, "job_timeout": 5})
    now = live.refresh()
    assert now.job_timeout == 5 and now.database == str(tmp_path / "flag.db")
    assert now.heartbeat_interval == started.heartbeat_interval == 1
    assert set(LIVE_KEYS) == {
        "job_timeout",
        "output_limit",
        "output_streams",
        "kill_grace",
        "backoff_base",
        "max_backoff",
    }


def test_an_unchanged_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: io.StringIO
) -> None:
    config = tmp_path / "config.json"
    _replace(config, {"job_timeout": 5})
    live = _watching(config)
    loads: list[Settings] = []
    real_load = SettingsSource.load

    def counted(self: SettingsSource) -> Settings:
        loads.append(real_load(self))
        return loads[-1]

    monkeypatch.setattr(SettingsSource, "load", counted)
    for _ in range(5):
        assert live.refresh().job_timeout == 5
    assert len(loads) == 1  # the first look reads it; the others only stat it


def test_a_broken_file_warns_once_per_version(tmp_path: Path, log: io.StringIO) -> None:
    config = tmp_path / "config.json"
    _replace(config, {"backoff_base": 3})
    live = _watching(config)
    live.refresh()
    _replace(config, "[]")
    for _ in range(3):
        assert live.refresh().backoff_base == 3
    warnings = [line for line in log.getvalue().splitlines() if NOT_APPLIED in line]
    assert len(warnings) == 1 and "must hold a JSON object" in warnings[0]
