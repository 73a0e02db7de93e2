"""Schedules from Python: `Queue` adds, lists, pauses, resumes, runs and removes them with the
CLI's rules, each change in the audit trail as the face "api"."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuectl_tui import Queue
from queuectl_tui.errors import Conflict, InvalidInput, NotFound
from queuectl_tui.models import JobState


def test_schedules_from_python(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        added = queue.add_schedule(
            "nightly",
            "make report",
            cron="30 2 * * *",
            timezone="America/New_York",
            queue="reports",
            env={"REGION": "eu"},
            catch_up="all",
        )
        assert added.schedule.origin == "api" and added.last_job is None
        assert added.to_dict()["description"] == "At 02:30 AM"
        queue.add_schedule("ping", "true", every="30s")
        assert [view.name for view in queue.schedules()] == ["nightly", "ping"]
        assert queue.pause_schedule("ping").schedule.paused
        assert not queue.resume_schedule("ping").schedule.paused
        job = queue.run_schedule("nightly")
        assert (job.queue, job.command, job.state) == ("reports", "make report", JobState.PENDING)
        assert job.environment == {"REGION": "eu"}
        shown = queue.schedule("nightly")
        assert shown.last_job is not None and shown.last_job.id == job.id
        queue.remove_schedule("ping")
        with pytest.raises(NotFound):
            queue.schedule("ping")
        with pytest.raises(Conflict):
            queue.add_schedule("nightly", "true", every="5m")
        with pytest.raises(InvalidInput) as raised:
            queue.add_schedule("bad", "true", cron="0 25 * * *")
        assert raised.value.field == "cron"
        with pytest.raises(InvalidInput) as raised:
            queue.add_schedule("bad", "true", every="5m", timezone="Atlantis/Capital")
        assert raised.value.field == "timezone"
        assert [view.name for view in queue.schedules()] == ["nightly"]


def test_runs_in_quick_succession_each_make_a_job(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from queuectl_tui import Queue

    with Queue(tmp_path / "q.db") as queue:
        queue.add_schedule("rr", "true", every="1h")
        made = {queue.run_schedule("rr").id for _ in range(50)}
        assert len(made) == 50
        assert len([j for j in queue.list(limit=100) if j.id.startswith("rr@run-")]) == 50
