"""`queuectl bench --only schedule`: an @every 1s schedule firing into a busy pool makes one
job per tick and reports how late their claims were."""

from __future__ import annotations

import json

import pytest

from helpers import RunCli

pytestmark = pytest.mark.slow


def test_the_schedule_bench_reports_lateness_and_one_job_per_tick(run_cli: RunCli) -> None:
    result = run_cli("bench", "--quick", "--json", "--only", "schedule", "--workers", "2", db=False)
    assert result.returncode == 0, result.stderr
    measures = {m["name"]: m for m in json.loads(result.stdout)["results"]}
    per_tick = measures["schedule jobs per tick"]
    assert per_tick["value"] == 1.0
    assert per_tick["details"] == {"missing": 0, "duplicates": 0}
    p50 = measures["schedule tick to claim p50 (busy pool)"]
    assert p50["unit"] == "ms" and p50["value"] >= 0 and p50["details"]["ticks"] >= 3
    assert measures["schedule tick to claim p95"]["value"] >= p50["value"]
