"""Schedules without a store: input checks, ticks in time zones across daylight-saving changes,
and what a round fires under each catch-up policy."""

from __future__ import annotations

import pytest

from queuectl_tui.schedules import (
    MAX_TICKS_PER_ROUND,
    ON_TIME_MS,
    ScheduleError,
    ScheduleSpec,
    parse_every,
    parse_schedule,
    plan_round,
    run_now_job_id,
    schedule_name,
    tick_job,
    tick_job_id,
)
from queuectl_tui.timeutil import parse_iso, to_iso


def cron(expr: str, zone: str = "UTC", catch_up: str = "one") -> ScheduleSpec:
    return parse_schedule(
        {"cron": expr, "timezone": zone, "catch_up": catch_up, "command": "echo tick"}
    )


def every(text: str, catch_up: str = "one") -> ScheduleSpec:
    return parse_schedule({"every": text, "catch_up": catch_up, "command": "echo tick"})


def day_ticks(spec: ScheduleSpec, start: str, end: str) -> list[str]:
    ticks = spec.ticks(parse_iso(start), parse_iso(end), 100)
    return [to_iso(tick) or "" for tick in ticks]


# -- input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "61 * * * *", "command": "x"}, "cron"),
        ({"cron": "* * *", "command": "x"}, "cron"),
        ({"cron": "0 0 0 * * *", "command": "x"}, "cron"),
        ({"cron": "@sometimes", "command": "x"}, "cron"),
        ({"cron": "0 0 30 2 *", "command": "x"}, "cron"),
        ({"every": "0s", "command": "x"}, "every"),
        ({"every": "500ms", "command": "x"}, "every"),
        ({"every": "367d", "command": "x"}, "every"),
        ({"every": "soon", "command": "x"}, "every"),
        ({"every": 5, "command": "x"}, "every"),
        ({"cron": "@hourly", "every": "5m", "command": "x"}, "cron"),
        ({"command": "x"}, "cron"),
        ({"every": "5m", "timezone": "Mars/Olympus", "command": "x"}, "timezone"),
        ({"every": "5m", "timezone": "../../etc/passwd", "command": "x"}, "timezone"),
        ({"every": "5m", "catch_up": "some", "command": "x"}, "catch_up"),
        ({"every": "5m"}, "command"),
        ({"every": "5m", "command": "x", "priority": "high"}, "priority"),
        ({"every": "5m", "command": "x", "run_at": "2030-01-01T00:00:00Z"}, "run_at"),
        ({"every": "5m", "command": "x", "id": "mine"}, "id"),
    ],
)
def test_bad_input_names_its_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(fields)
    assert raised.value.field == field
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("name", ["", "two words", "tab\there", "x" * 101, "bell\x07"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ScheduleError):
        schedule_name(name)


def test_a_name_may_be_any_printable_text_up_to_100_characters() -> None:
    assert schedule_name("nightly-report.v2@eu") == "nightly-report.v2@eu"
    assert schedule_name("ü" * 100) == "ü" * 100


def test_aliases_and_every_are_normalised() -> None:
    assert cron("@DAILY").timing == "@daily" and cron("@daily").cron == "0 0 * * *"
    assert cron("@every 90s").timing == "@every 1m30s"
    assert every("1h30m").every_ms == 90 * 60_000
    assert cron("  0   2 * *   *").timing == "0 2 * * *"
    assert parse_every("1d") == 86_400_000


def test_words() -> None:
    assert cron("0 2 * * *").describe() == "At 02:00 AM"
    assert every("5m").describe() == "Every 5 minutes"
    assert every("30s").describe() == "Every 30 seconds"
    assert every("1h30m").describe() == "Every 1 hour 30 minutes"


def test_a_definition_reads_back_as_it_was() -> None:
    spec = parse_schedule(
        {
            "cron": "0 2 * * 1-5",
            "timezone": "Europe/Berlin",
            "catch_up": "all",
            "command": "make report",
            "queue": "reports",
            "priority": 5,
            "timeout": 60,
            "max_retries": 2,
            "cwd": "/srv",
            "env": {"REGION": "eü"},
        }
    )
    assert ScheduleSpec.from_definition(spec.definition()) == spec


# -- ticks -----------------------------------------------------------------------------------------
def test_every_ticks_on_multiples_since_the_epoch() -> None:
    spec = every("5m")
    assert spec.next_tick(parse_iso("2026-01-01T10:02:10Z")) == parse_iso("2026-01-01T10:05:00Z")
    assert spec.next_tick(parse_iso("2026-01-01T10:05:00Z")) == parse_iso("2026-01-01T10:10:00Z")


def test_the_tick_job_is_named_and_keyed_by_its_tick() -> None:
    spec = parse_schedule({"every": "5m", "command": "echo hi", "queue": "reports"})
    tick = parse_iso("2026-12-06T02:00:00Z")
    job = tick_job("nightly", spec, tick)
    assert job.id == job.idempotency_key == tick_job_id("nightly", tick)
    assert job.id == "nightly@20261206T020000Z"
    assert (job.run_at, job.queue, job.command) == (tick, "reports", "echo hi")
    made = run_now_job_id("nightly", tick + 123)
    assert made.startswith("nightly@run-20261206T020000.123Z-") and len(made) == 39
    assert run_now_job_id("nightly", tick + 123) != made  # two runs in one millisecond: two jobs


@pytest.mark.parametrize(
    ("zone", "day", "expected"),
    [
        # 02:30 does not exist on spring-forward days: it fires once, at the end of the gap.
        ("Europe/Berlin", "2026-03-29", ["2026-03-29T01:00:00.000Z"]),
        ("America/New_York", "2026-03-08", ["2026-03-08T07:00:00.000Z"]),
        # 02:30 (Berlin) and 01:30 (New York) happen twice on fall-back days: they fire once.
        ("Europe/Berlin", "2026-10-25", ["2026-10-25T00:30:00.000Z"]),
    ],
)
def test_a_fixed_time_fires_once_on_daylight_saving_days(
    zone: str, day: str, expected: list[str]
) -> None:
    spec = cron("30 2 * * *", zone)
    assert day_ticks(spec, f"{day}T00:00:00Z", f"{day}T23:59:59Z") == expected


def test_new_york_fall_back_fires_once() -> None:
    spec = cron("30 1 * * *", "America/New_York")
    ticks = day_ticks(spec, "2026-11-01T00:00:00Z", "2026-11-01T23:59:59Z")
    assert ticks == ["2026-11-01T05:30:00.000Z"]


def test_the_second_pass_of_a_fall_back_hour_does_not_fire_again() -> None:
    """After the first 02:30 fired, the next tick is the next day's, even asked from inside
    the repeated hour (cronsim would answer the first 02:30 again)."""
    spec = cron("30 2 * * *", "Europe/Berlin")
    inside_second_pass = parse_iso("2026-10-25T01:15:00Z")  # 02:15 CET, after 02:30 CEST
    assert to_iso(spec.next_tick(inside_second_pass)) == "2026-10-26T01:30:00.000Z"


def test_hourly_ticks_follow_real_hours_across_changes() -> None:
    spec = cron("0 * * * *", "Europe/Berlin")
    fall = day_ticks(spec, "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z")
    assert fall == [f"2026-10-25T0{h}:00:00.000Z" for h in (0, 1, 2)]  # 02:00 twice, local
    spring = day_ticks(spec, "2026-03-29T00:00:00Z", "2026-03-29T02:00:00Z")
    assert spring == [f"2026-03-29T0{h}:00:00.000Z" for h in (0, 1, 2)]


def test_latest_tick_across_a_gap() -> None:
    spec = cron("30 2 * * *", "Europe/Berlin")
    end = parse_iso("2026-03-29T12:00:00Z")
    assert to_iso(spec.latest_tick(parse_iso("2026-03-01T00:00:00Z"), end)) == (
        "2026-03-29T01:00:00.000Z"
    )
    assert spec.latest_tick(parse_iso("2026-03-29T02:00:00Z"), end) is None


# -- rounds ----------------------------------------------------------------------------------------
S = 1000


def test_nothing_before_the_tick() -> None:
    assert plan_round(every("1s"), 10 * S, 9 * S).fire == []


def test_ticks_a_few_seconds_late_fire_whatever_the_policy() -> None:
    for policy in ("none", "one", "all"):
        plan = plan_round(every("1s", policy), 10 * S, 13 * S + 200)
        assert plan.fire == [10 * S, 11 * S, 12 * S, 13 * S]
        assert plan.next_at == 14 * S and not plan.skipped


def test_none_passes_over_missed_ticks() -> None:
    plan = plan_round(every("1m", "none"), 60 * S, 3600 * S + 1)
    assert plan.fire == [3600 * S] and plan.skipped  # the one on time
    plan = plan_round(every("1m", "none"), 60 * S, 3630 * S)
    assert plan.fire == [] and plan.skipped and plan.next_at == 3660 * S


def test_one_fires_the_latest_missed_tick_once() -> None:
    plan = plan_round(every("1m", "one"), 60 * S, 3630 * S)
    assert plan.fire == [3600 * S] and plan.next_at == 3660 * S
    daily = cron("0 2 * * *", catch_up="one")
    now = parse_iso("2026-05-10T12:00:00Z")
    plan = plan_round(daily, parse_iso("2026-05-01T02:00:00Z"), now)
    assert [to_iso(t) for t in plan.fire] == ["2026-05-10T02:00:00.000Z"]
    assert to_iso(plan.next_at) == "2026-05-11T02:00:00.000Z"


def test_all_fires_every_missed_tick_a_capped_round_at_a_time() -> None:
    plan = plan_round(every("1m", "all"), 60 * S, 3630 * S)
    assert plan.fire == [m * 60 * S for m in range(1, 61)] and plan.next_at == 3660 * S
    many = plan_round(every("1s", "all"), S, 5000 * S)
    assert len(many.fire) == MAX_TICKS_PER_ROUND
    assert many.next_at == (MAX_TICKS_PER_ROUND + 1) * S  # the next round goes on from there


def test_a_year_of_missed_minutes_is_not_walked() -> None:
    spec = cron("* * * * *", catch_up="one")
    now = parse_iso("2027-05-10T12:00:30Z")
    plan = plan_round(spec, parse_iso("2026-05-10T12:00:00Z"), now)
    assert [to_iso(t) for t in plan.fire] == ["2027-05-10T12:00:00.000Z"]
    assert ON_TIME_MS < 60 * S
