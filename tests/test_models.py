from __future__ import annotations

import json

import pytest

from queuectl_tui.models import (
    MASK,
    JobDefaults,
    JobSpecError,
    JobType,
    masked_environment,
    parse_job_spec,
    with_run_at,
)
from queuectl_tui.timeutil import parse_iso, to_iso


def test_minimal_job_gets_defaults_and_a_generated_id() -> None:
    spec = parse_job_spec({"command": "echo hi"})
    assert spec.command == "echo hi"
    assert spec.priority == 0 and spec.run_at is None and spec.max_retries is None
    assert len(spec.id) == 16
    assert parse_job_spec({"command": "x"}).id != spec.id


def test_all_fields_are_read() -> None:
    spec = parse_job_spec(
        {
            "id": "job1",
            "command": "echo hi",
            "priority": 10,
            "run_at": "2026-07-24T10:00:00Z",
            "max_retries": 0,
            "timeout": 1.5,
            "idempotency_key": "k1",
        }
    )
    assert spec.id == "job1" and spec.priority == 10 and spec.max_retries == 0
    assert spec.timeout == 1.5 and spec.idempotency_key == "k1"
    assert to_iso(spec.run_at) == "2026-07-24T10:00:00.000Z"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"command": "x", "prio": 1}, "prio"),
        ({}, "command"),
        ({"command": ""}, "command"),
        ({"command": "   "}, "command"),
        ({"command": 5}, "command"),
        ({"command": "x", "id": ""}, "id"),
        ({"command": "x", "id": "a" * 201}, "id"),
        ({"command": "x", "id": "a\nb"}, "id"),
        ({"command": "x", "id": 7}, "id"),
        ({"command": "x", "priority": "high"}, "priority"),
        ({"command": "x", "priority": 1.5}, "priority"),
        ({"command": "x", "priority": True}, "priority"),
        ({"command": "x", "priority": 2**40}, "priority"),
        ({"command": "x", "max_retries": -1}, "max_retries"),
        ({"command": "x", "max_retries": "3"}, "max_retries"),
        ({"command": "x", "timeout": 0}, "timeout"),
        ({"command": "x", "timeout": -2}, "timeout"),
        ({"command": "x", "timeout": "5"}, "timeout"),
        ({"command": "x", "run_at": "tomorrow"}, "run_at"),
        ({"command": "x", "run_at": 12345}, "run_at"),
        ({"command": "x", "idempotency_key": ""}, "idempotency_key"),
    ],
)
def test_bad_input_names_the_field(payload: dict[str, object], field: str) -> None:
    with pytest.raises(JobSpecError) as raised:
        parse_job_spec(payload)
    assert raised.value.field == field
    assert f"'{field}'" in str(raised.value)


@pytest.mark.parametrize("payload", [[], "job", 3, None])
def test_input_must_be_an_object(payload: object) -> None:
    with pytest.raises(JobSpecError, match="JSON object"):
        parse_job_spec(payload)


def test_run_at_without_offset_is_utc_and_offsets_are_honoured() -> None:
    assert parse_iso("2026-01-01T00:00:00") == parse_iso("2026-01-01T00:00:00Z")
    assert parse_iso("2026-01-01T02:00:00+02:00") == parse_iso("2026-01-01T00:00:00Z")
    assert to_iso(parse_iso("2026-01-01T00:00:00.250Z")) == "2026-01-01T00:00:00.250Z"


@pytest.mark.parametrize(
    ("run_at", "accepted"),
    [
        ("0001-01-02T00:00:00Z", True),
        ("9999-12-30T23:59:59.999Z", True),
        ("0001-01-02T05:00:00+05:00", True),
        ("0001-01-01T23:59:59.999Z", False),
        ("9999-12-31T00:00:00Z", False),
        ("9999-12-31T23:59:59-14:00", False),  # year 10000 in UTC
        ("0001-01-01T00:00:00+14:00", False),  # year 0 in UTC
    ],
)
def test_run_at_must_lie_in_the_supported_range(run_at: str, accepted: bool) -> None:
    if accepted:
        spec = parse_job_spec({"command": "x", "run_at": run_at})
        assert spec.run_at == parse_iso(run_at)
        return
    with pytest.raises(JobSpecError, match="'run_at' must be between 0001-01-02 and 9999-12-30"):
        parse_job_spec({"command": "x", "run_at": run_at})


def test_run_at_keeps_every_millisecond() -> None:
    assert parse_iso("9999-12-30T23:59:59.999Z") % 1000 == 999
    assert to_iso(parse_iso("0001-01-02T00:00:00.001Z")) == "0001-01-02T00:00:00.001Z"


@pytest.mark.parametrize("command", ["echo \ud800", "echo \udcff"])
def test_a_command_with_a_lone_surrogate_is_refused(command: str) -> None:
    with pytest.raises(JobSpecError, match="'command' is not valid UTF-8") as caught:
        parse_job_spec({"command": command})
    assert caught.value.field == "command"


def test_an_unknown_field_is_named_on_one_line() -> None:
    with pytest.raises(JobSpecError) as caught:
        parse_job_spec({"command": "x", "a\nb\x1b": 1})
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert "unknown field 'a\\nb\\x1b'" in str(caught.value)


class _Mapping(dict):
    """Not a plain dict: parse_job_spec takes the long way for it."""


@pytest.mark.parametrize(
    "obj",
    [
        {"id": "a", "command": "true"},
        {"id": "é", "command": "true"},
        {"id": "a", "command": "echo é"},
        {"id": "a\tb", "command": "true"},
        {"id": "", "command": "true"},
        {"id": "   ", "command": "true"},
        {"id": " a", "command": "true"},
        {"id": "a ", "command": "true"},
        {"id": "a b", "command": "true"},
        {"id": "x" * 300, "command": "true"},
        {"id": "a", "command": ""},
        {"id": "a", "command": " \n"},
        {"id": "a", "command": "a\x00b"},
        {"id": "a", "command": "\ud800"},
        {"id": 7, "command": "true"},
        {"id": "a", "command": 7},
        {"id": None, "command": "true"},
        {"idx": "a", "command": "true"},
        {"command": "true", "priority": 1},
    ],
)
def test_the_quick_path_for_plain_lines_agrees_with_the_full_validation(obj: dict) -> None:
    def outcome(value: dict[str, object]) -> object:
        try:
            spec = parse_job_spec(value)
        except JobSpecError as error:
            return ("error", str(error))
        return spec if value.get("id") is not None else ("generated id", spec[1:])

    assert outcome(obj) == outcome(_Mapping(obj))


@pytest.mark.parametrize(
    ("delay", "ms"),
    [("90s", 90_000), ("10m", 600_000), ("2h", 7_200_000), (30, 30_000), (0.5, 500), (0, 0)],
)
def test_a_delay_is_a_duration_or_seconds_and_becomes_a_run_at(delay: object, ms: int) -> None:
    spec = parse_job_spec({"command": "true", "delay": delay})
    assert (spec.run_at, spec.delay) == (None, ms)
    timed = with_run_at(spec, 1_000_000)
    assert (timed.run_at, timed.delay) == (1_000_000 + ms, None)
    assert with_run_at(timed, 5) is timed  # a job without a delay is left alone


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"delay": "soon"}, "is not a duration"),
        ({"delay": -5}, "a duration such as '10m' or a number of seconds"),
        ({"delay": True}, "a duration such as '10m'"),
        ({"delay": 10**12}, "at most a hundred years"),
        ({"delay": "1m", "run_at": "2027-01-01T00:00:00Z"}, "either 'run_at' or 'delay'"),
    ],
)
def test_a_bad_delay_is_refused_naming_it(fields: dict[str, object], message: str) -> None:
    with pytest.raises(JobSpecError, match=message) as refused:
        parse_job_spec({"command": "true", **fields})
    assert refused.value.field == "delay"


def test_a_job_s_own_directory_and_environment_are_read_and_secrets_masked() -> None:
    spec = parse_job_spec(
        {"command": "make", "cwd": "/srv/reports", "env": {"K": "V", "DB_PASSWORD": "hunter2"}}
    )
    assert spec.cwd == "/srv/reports"
    assert json.loads(spec.env or "") == {"K": "V", "DB_PASSWORD": "hunter2"}
    assert masked_environment({"K": "V", "DB_PASSWORD": "x", "api_token": "y"}) == {
        "K": "V",
        "DB_PASSWORD": MASK,
        "api_token": MASK,
    }
    shown = masked_environment(
        {
            "MYSQL_PWD": "x",
            "SENTRY_DSN": "https://k@o1.ingest/1",
            "DATABASE_URL": "postgres://app:hunter2@db:5432/shop",
            "HTTPS_PROXY": "http://u:p@proxy:3128",
            "HOME": "/root",
        }
    )
    assert shown == {
        "MYSQL_PWD": MASK,
        "SENTRY_DSN": MASK,
        "DATABASE_URL": f"postgres://{MASK}@db:5432/shop",
        "HTTPS_PROXY": f"http://{MASK}@proxy:3128",
        "HOME": "/root",
    }


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"cwd": "reports"}, "cwd", "absolute path"),
        ({"cwd": 7}, "cwd", "absolute path"),
        ({"cwd": "/a\x00b"}, "cwd", "without NUL"),
        ({"env": ["K=V"]}, "env", "must be an object"),
        ({"env": {"1X": "v"}}, "env", "is not a name a job may set"),
        ({"env": {"QUEUECTL_JOB_ID": "x"}}, "env", "is not a name a job may set"),
        ({"env": {"K": 5}}, "env", "must be text without NUL"),
        ({"env": {"K": "x" * 70_000}}, "env", "at most 64 KiB"),
    ],
)
def test_a_bad_directory_or_environment_is_refused(
    fields: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(JobSpecError, match=message) as refused:
        parse_job_spec({"command": "true", **fields})
    assert refused.value.field == field


def test_a_typed_job_may_not_set_its_directory_or_environment() -> None:
    types = {"email": JobType("email", "send-mail")}
    for fields in ({"cwd": "/tmp"}, {"env": {"LD_PRELOAD": "/tmp/x.so"}}):
        with pytest.raises(JobSpecError, match="not for typed jobs"):
            parse_job_spec({"type": "email", "payload": {}, **fields}, types)
    typed = parse_job_spec({"type": "email", "payload": {}}, types)
    with pytest.raises(JobSpecError, match="not for typed jobs"):
        JobDefaults.of(env={"K": "V"}).apply(typed)
    assert JobDefaults.of(delay="1m").apply(typed).delay == 60_000


@pytest.mark.parametrize(
    ("job_id", "error"),
    [
        ("   ", "field 'id' must not be blank"),
        (" nightly", "field 'id' must not begin or end with whitespace"),
        ("nightly ", "field 'id' must not begin or end with whitespace"),
    ],
)
def test_an_id_that_would_look_like_another_is_refused(job_id: str, error: str) -> None:
    for fields in ({}, {"priority": 1}):  # the quick path and the long one
        with pytest.raises(JobSpecError, match=f"^{error}$"):
            parse_job_spec({"id": job_id, "command": "true", **fields})
    assert parse_job_spec({"id": "nightly report", "command": "true"}).id == "nightly report"
