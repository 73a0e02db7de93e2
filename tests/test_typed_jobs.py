"""Typed jobs: a type from config.json names the command and its defaults; the payload is JSON
the command gets on stdin and in QUEUECTL_PAYLOAD, never in a shell string."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from queuectl_tui.config import ConfigError, load_settings, parse_job_types
from queuectl_tui.models import MAX_PAYLOAD_BYTES, JobSpecError, JobType, parse_job_spec

from helpers import RunCli, wait_until

TYPES = {
    "email": JobType(
        "email", "cat >> sent.jsonl", max_retries=5, timeout=30.0, queue="mail", queues=("other",)
    ),
}


def test_a_typed_job_takes_its_type_s_command_and_defaults() -> None:
    spec = parse_job_spec({"type": "email", "payload": {"to": "a@b.c", "n": 1}}, TYPES)
    assert (spec.command, spec.job_type, spec.payload) == (
        "cat >> sent.jsonl",
        "email",
        '{"to":"a@b.c","n":1}',
    )
    assert (spec.max_retries, spec.timeout, spec.queue, spec.priority) == (5, 30.0, "mail", 0)
    own = parse_job_spec(
        {"type": "email", "payload": None, "max_retries": 1, "queue": "other", "priority": -3},
        TYPES,
    )
    assert (own.max_retries, own.queue, own.priority, own.payload) == (1, "other", -3, "null")


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        ({"type": "sms"}, "type", "unknown job type 'sms' (known: email)"),
        ({"type": "email", "command": "x"}, "command", "either a 'command' or a 'type'"),
        ({"payload": {}}, "type", "needs a 'type'"),
        ({"type": 7}, "type", "must be a string"),
        ({"type": "email", "payload": "x" * MAX_PAYLOAD_BYTES}, "payload", "at most 64 KiB"),
        ({"type": "email", "payload": "\ud800"}, "payload", "valid Unicode"),
        ({"type": "email", "queue": "a b"}, "queue", "queue name"),
    ],
)
def test_bad_typed_jobs_name_the_field(job: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(JobSpecError, match=re.escape(words)) as caught:
        parse_job_spec(job, TYPES)
    assert caught.value.field == field


def test_without_job_types_a_type_is_refused_saying_so() -> None:
    with pytest.raises(JobSpecError, match="none are configured"):
        parse_job_spec({"type": "email"})


def test_job_types_are_read_from_the_config_file_and_checked(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"job_types": {"email": {"command": "true", "priority": 2}}}))
    settings = load_settings(str(config), env={})
    assert settings.job_types["email"] == JobType("email", "true", priority=2)
    for bad, words in [
        ({"e mail": {"command": "true"}}, "must be a name"),
        ({"email": {"command": ""}}, "must not be empty"),
        ({"email": {"command": "true", "retries": 1}}, "unknown field 'retries'"),
        ({"email": {"command": "true", "max_queue_depth": 0}}, "max_queue_depth"),
        ({"email": "true"}, "must be an object"),
        ([], "must be an object"),
    ]:
        with pytest.raises(ConfigError, match=words):
            parse_job_types(bad)


def test_a_pool_runs_a_typed_job_with_its_payload_on_stdin_and_in_the_environment(
    run_cli: RunCli, tmp_path: Path
) -> None:
    config = tmp_path / "typed.json"
    recorder = f"{{ cat; echo; printf '%s\\n' \"$QUEUECTL_PAYLOAD\"; }} > {tmp_path}/got"
    config.write_text(json.dumps({"job_types": {"email": {"command": recorder}}}))
    hostile = {"email": "user@example.com", "name": "$(touch pwned); `touch pwned`'\""}
    job = json.dumps({"id": "t1", "type": "email", "payload": hostile})
    assert run_cli("--config", str(config), "enqueue", job).returncode == 0
    shown = json.loads(run_cli("--config", str(config), "show", "t1", "--json").stdout)
    assert shown["type"] == "email" and shown["payload"] == hostile
    started = run_cli("--config", str(config), "worker", "start", "--count", "1", "--detach")
    assert started.returncode == 0, started.stderr
    try:
        wait_until(
            lambda: json.loads(run_cli("show", "t1", "--json").stdout)["state"] == "completed",
            timeout=30,
            what="the typed job completed",
        )
    finally:
        run_cli("worker", "stop", "--wait")
    stdin_line, env_line = (tmp_path / "got").read_text().splitlines()
    assert json.loads(stdin_line) == json.loads(env_line) == hostile
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_typed_jobs_go_in_bulk_too(run_cli: RunCli, tmp_path: Path) -> None:
    config = tmp_path / "typed.json"
    config.write_text(json.dumps({"job_types": {"email": {"command": "cat", "queue": "mail"}}}))
    lines = tmp_path / "jobs.jsonl"
    lines.write_text(
        "\n".join(
            json.dumps({"id": f"b{i}", "type": "email", "payload": {"i": i}}) for i in range(3)
        )
    )
    assert run_cli("--config", str(config), "enqueue", "--file", str(lines)).returncode == 0
    listed = json.loads(run_cli("--config", str(config), "list", "--json").stdout)
    assert [(job["queue"], job["type"], job["payload"]) for job in listed] == [
        ("mail", "email", {"i": i}) for i in range(3)
    ]
    refused = run_cli("enqueue", json.dumps({"type": "email"}))  # without the config
    assert refused.returncode == 2 and "unknown job type 'email'" in refused.stderr
