"""The API's OpenAPI 3.0 document, served at /openapi.json: what each route takes and gives."""

from __future__ import annotations

from typing import Any

from ..models import (
    MAX_AFTER,
    MAX_CWD_LENGTH,
    MAX_ID_LENGTH,
    MAX_KEY_LENGTH,
    MAX_PRIORITY,
    MAX_RETRIES_LIMIT,
    STATES,
)
from ..schedules import CATCH_UP, MAX_NAME_LENGTH
from ..version import __version__
from .requests import MAX_PAGE

_REF = "#/components/schemas/"


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF + name}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_QUEUE = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
_STATE = {"type": "string", "enum": [state.value for state in STATES]}
_JOB_ID = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
}
_QUEUE_FILTER = {"name": "queue", "in": "query", "required": False, "schema": _QUEUE}
_TOKEN_ERRORS = {
    "401": _error("a token is needed (to read: when tokens are configured), or it is unknown"),
    "429": _error("too many requests with tokens from this address wait: not looked at"),
}
_WRITE_ERRORS = {**_TOKEN_ERRORS, "403": _error("the token may only read")}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "field"],
        "properties": {"error": {"type": "string"}, "field": {"type": "string", "nullable": True}},
    },
    "JobInput": {
        "type": "object",
        "description": "A job with a 'command' (needs --allow-commands), or a typed job "
        "('type' from config.json job_types, and its 'payload').",
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
            "command": {"type": "string", "minLength": 1},
            "type": {"type": "string"},
            "payload": {},
            "queue": _QUEUE,
            "priority": {"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY},
            "run_at": {"type": "string", "format": "date-time"},
            "delay": {  # instead of run_at: from now
                "oneOf": [
                    {"type": "string", "pattern": "^\\s*[0-9]{1,9}\\s*[smhdwSMHDW]\\s*$"},
                    {"type": "number", "minimum": 0, "maximum": 3_153_600_000},
                ]
            },
            "max_retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES_LIMIT},
            "timeout": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
            "cwd": {"type": "string", "pattern": "^/", "maxLength": MAX_CWD_LENGTH},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "after": {  # jobs it runs after: ids, as a list or separated by commas
                "oneOf": [
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_AFTER,
                        "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
                    },
                    {"type": "string", "minLength": 1},
                ]
            },
            "after_any_end": {"type": "boolean"},
        },
    },
    "Job": {
        "type": "object",
        "required": ["id", "command", "queue", "state", "attempts", "max_retries", "priority"],
        "properties": {
            "id": {"type": "string"},
            "command": {"type": "string"},
            "queue": {"type": "string"},
            "state": _STATE,
            "type": {"type": "string", "nullable": True},
            "payload": {},
            "attempts": {"type": "integer"},
            "max_retries": {"type": "integer"},
            "priority": {"type": "integer"},
            "run_at": {"type": "string"},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "last_error": {"type": "string", "nullable": True},
            "after_any_end": {"type": "boolean"},
            "blocked_by": {"type": "string", "nullable": True},
        },
    },
    "JobPage": {
        "type": "object",
        "required": ["jobs", "next_cursor", "total"],
        "properties": {
            "jobs": {"type": "array", "items": _ref("Job")},
            "next_cursor": {"type": "string", "nullable": True},
            "total": {"type": "integer"},
        },
    },
    "Result": {
        "type": "object",
        "required": ["id", "result"],
        "properties": {"id": {"type": "string"}, "result": {"type": "string"}},
    },
    "ScheduleInput": {
        "type": "object",
        "description": "A schedule: 'cron' (five fields, an alias such as @daily, or "
        "'@every 5m') or 'every' ('30s', '5m', '1h30m'), and its job: a 'command' (needs "
        "--allow-commands) or a 'type' and its 'payload'.",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "pattern": f"^\\S{{1,{MAX_NAME_LENGTH}}}$"},
            "cron": {"type": "string", "minLength": 1},
            "every": {"type": "string", "minLength": 2},
            "timezone": {"type": "string", "minLength": 1, "maxLength": 100},
            "catch_up": {"type": "string", "enum": list(CATCH_UP)},
            "command": {"type": "string", "minLength": 1},
            "type": {"type": "string"},
            "payload": {},
            "queue": _QUEUE,
            "priority": {"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY},
            "timeout": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "max_retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES_LIMIT},
            "cwd": {"type": "string", "pattern": "^/"},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "Schedule": {
        "type": "object",
        "required": ["name", "schedule", "timezone", "catch_up", "paused", "origin", "job"],
        "properties": {
            "name": {"type": "string"},
            "schedule": {"type": "string"},
            "description": {"type": "string"},
            "timezone": {"type": "string"},
            "catch_up": {"type": "string", "enum": list(CATCH_UP)},
            "paused": {"type": "boolean"},
            "next_at": {"type": "string", "nullable": True},
            "last_job_id": {"type": "string", "nullable": True},
            "last_fired_at": {"type": "string", "nullable": True},
            "origin": {"type": "string"},
            "job": {"type": "object"},
            "last_job": {"type": "object", "nullable": True},
        },
    },
    "Schedules": {
        "type": "object",
        "required": ["schedules"],
        "properties": {"schedules": {"type": "array", "items": _ref("Schedule")}},
    },
    "Anything": {"type": "object"},
}
_SCHEDULE_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": f"^\\S{{1,{MAX_NAME_LENGTH}}}$"},
}


def _submit(summary: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("JobInput")}},
            },
            "responses": {
                "201": _json(_ref("Job"), "created, and durable on disk"),
                "200": _json(_ref("Job"), "its idempotency key was known: that job"),
                "400": _error("the body is not JSON"),
                "403": _error("a raw command, or a token that may only read"),
                **_TOKEN_ERRORS,
                "409": _error("another job has this id"),
                "413": _error("the body is too large"),
                "415": _error("the body is not JSON"),
                "422": _error("a field is invalid: 'field' names it"),
                "429": _error("the queue is full (max-queue-depth): nothing was created"),
            },
        }
    }


def _action(summary: str, params: list[dict[str, Any]], body: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": params,
        "responses": {
            "200": _json(_ref("Anything"), "done"),
            "202": _json(_ref("Result"), "a running job: its pool stops it now"),
            "404": _error("no such job"),
            "409": _error("the job is in a state the action leaves alone"),
            "422": _error("invalid input"),
            **_WRITE_ERRORS,
        },
    }
    if body:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object", "nullable": True}}},
        }
        operation["responses"]["400"] = _error("the body is not JSON")
        operation["responses"]["413"] = _error("the body is too large")
        operation["responses"]["415"] = _error("the body is not JSON")
    return operation


def _read(summary: str, schema: dict[str, Any], params: list[Any] | None = None) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "parameters": params or [],
            "responses": {
                "200": _json(schema, "found"),
                "422": _error("invalid parameter"),
                **_TOKEN_ERRORS,
            },
        }
    }


def _sse_event(names: list[str]) -> dict[str, Any]:
    """One server-sent event: its name, its data (JSON text) and, where it has one, its id."""
    return {
        "type": "object",
        "properties": {
            "event": {"enum": names},
            "data": {"type": "string"},
            "id": {"type": "string"},
        },
        "required": ["event", "data"],
    }


def _schedule_writes(paths: dict[str, Any]) -> None:
    """POST /schedules, and pause, resume, run and remove one: each needs the write token."""
    body_errors = {
        "400": _error("the body is not JSON"),
        "413": _error("the body is too large"),
        "415": _error("the body is not JSON"),
    }
    paths["/schedules"]["post"] = {
        "summary": "Add a schedule (needs the write token)",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("ScheduleInput")}},
        },
        "responses": {
            "201": _json(_ref("Schedule"), "added, durable on disk"),
            **body_errors,
            "403": _error("a raw command without --allow-commands, or a token that may only read"),
            **_TOKEN_ERRORS,
            "409": _error("a schedule of that name exists"),
            "422": _error("a field is invalid: 'field' names it"),
        },
    }
    for verb, summary, answer in (
        ("pause", "Pause a schedule: no pool fires it", "Schedule"),
        ("resume", "Resume a schedule from its next tick", "Schedule"),
        ("run", "Make one job of the schedule now", "Job"),
    ):
        responses = {
            "201" if verb == "run" else "200": _json(_ref(answer), "done"),
            **body_errors,
            "404": _error("no such schedule"),
            "422": _error("invalid name, or a body that is not {}"),
            **_WRITE_ERRORS,
        }
        paths[f"/schedules/{{name}}/{verb}"] = {
            "post": {
                "summary": summary,
                "parameters": [_SCHEDULE_NAME],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": responses,
            }
        }
    paths["/schedules/{name}"]["delete"] = {
        "summary": "Remove a schedule (its jobs stay)",
        "parameters": [_SCHEDULE_NAME],
        "responses": {
            "200": _json(_ref("Anything"), "removed"),
            "404": _error("no such schedule"),
            "422": _error("invalid name"),
            **_WRITE_ERRORS,
        },
    }


def document(read_only: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/jobs": _read(
            "Jobs, one keyset page at a time",
            _ref("JobPage"),
            [
                {"name": "state", "in": "query", "required": False, "schema": _STATE},
                _QUEUE_FILTER,
                {
                    "name": "q",
                    "in": "query",
                    "required": False,
                    "description": 'a search: state:dead error:"disk quota" since:10m text',
                    "schema": {"type": "string", "minLength": 1, "maxLength": 1000},
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
                },
                {
                    "name": "cursor",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
                },
                {
                    "name": "order",
                    "in": "query",
                    "required": False,
                    "description": "ended: the jobs that ended, the latest to end first",
                    "schema": {"type": "string", "enum": ["oldest", "newest", "ended"]},
                },
            ],
        ),
        "/jobs/{job_id}": _read("A job with its attempts", _ref("Job"), [_JOB_ID]),
        "/status": _read("Jobs per state", _ref("Anything"), [_QUEUE_FILTER]),
        "/stats": _read("Throughput, attempts and latencies", _ref("Anything"), [_QUEUE_FILTER]),
        "/queues": _read("Every queue: depth, pause, limit", _ref("Anything")),
        "/workers": _read(
            "Workers with their heartbeat age (history=0: running and ended in the last hour)",
            _ref("Anything"),
            [
                {
                    "name": "active",
                    "in": "query",
                    "required": False,
                    "schema": {"enum": ["1", "true", "0", "false"]},
                },
                {
                    "name": "history",
                    "in": "query",
                    "required": False,
                    "schema": {"enum": ["1", "true", "0", "false"]},
                },
            ],
        ),
        "/dlq/groups": _read(
            "Dead (or failed) jobs grouped by how they failed, largest first",
            _ref("Anything"),
            [
                {
                    "name": "state",
                    "in": "query",
                    "required": False,
                    "schema": {"enum": ["dead", "failed"]},
                }
            ],
        ),
        "/healthz": _read("Whether the database answers", _ref("Anything")),
        "/metrics.json": _read("The reference queue's metrics keys", _ref("Anything")),
        "/metrics": {
            "get": {
                "summary": "Prometheus text (the JSON keys with Accept: application/json)",
                "responses": {"200": {"description": "the metrics"}, **_TOKEN_ERRORS},
            }
        },
    }
    paths["/jobs/{job_id}"]["get"]["responses"]["404"] = _error("no such job")
    paths["/schedules"] = _read("Every schedule, with its last job", _ref("Schedules"))
    paths["/schedules/{name}"] = _read(
        "A schedule, with its last job", _ref("Schedule"), [_SCHEDULE_NAME]
    )
    paths["/schedules/{name}"]["get"]["responses"]["404"] = _error("no such schedule")
    paths["/output/{job_id}"] = _read(
        "A job's output from a cursor; with follow=1, server-sent events until it is finished",
        _ref("Anything"),
        [
            _JOB_ID,
            {
                "name": "cursor",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "pattern": "^[0-9]+[.]-?[0-9]+[.][0-9]+[.][01]$"},
            },
            {"name": "follow", "in": "query", "required": False, "schema": {"enum": ["1"]}},
        ],
    )
    paths["/events"] = _read(
        "Server-sent events: `change` each time the queue changes (at most twice a second)",
        {"type": "string"},
    )
    changes = paths["/events"]["get"]["responses"]
    changes["200"]["content"] = {"text/event-stream": {"schema": _sse_event(["change"])}}
    changes["503"] = _error("too many streams open")
    output = paths["/output/{job_id}"]["get"]["responses"]
    output["200"]["content"]["text/event-stream"] = {"schema": _sse_event(["output", "end"])}
    output["404"] = _error("no such job")
    output["503"] = _error("too many streams open")
    if not read_only:
        paths["/jobs"].update(_submit("Submit a job"))
        paths["/createJob"] = _submit("Submit a job (the reference queue's route)")
        paths["/jobs/{job_id}"]["delete"] = _action("Delete a finished or waiting job", [_JOB_ID])
        paths["/jobs/{job_id}/cancel"] = {"post": _action("Cancel a job", [_JOB_ID])}
        paths["/jobs/{job_id}/retry"] = {"post": _action("Retry now or again", [_JOB_ID])}
        paths["/dlq/retry"] = {"post": _action("Retry dead jobs: all, or ids", [], body=True)}
        paths["/dlq/groups/retry"] = {
            "post": _action("Retry an error group's dead jobs", [], body=True)
        }
        paths["/dlq/groups/delete"] = {
            "post": _action("Delete an error group's dead jobs", [], body=True)
        }
        name = {"name": "name", "in": "path", "required": True, "schema": _QUEUE}
        paths["/queues/{name}/pause"] = {"post": _action("Pause a queue", [name])}
        paths["/queues/{name}/resume"] = {"post": _action("Resume a queue", [name])}
        paths["/prune"] = {"post": _action("Remove old finished jobs", [], body=True)}
        stop = _action("Stop every pool, or one; gracefully or forced", [], body=True)
        stop["responses"]["202"] = _json(_ref("Anything"), "the pools asked, and their workers")
        stop["responses"]["404"] = _error("no running pool has that id")
        del stop["responses"]["200"], stop["responses"]["409"]
        paths["/pools/stop"] = {"post": stop}
        _schedule_writes(paths)
    return {
        "openapi": "3.0.3",
        "info": {"title": "queuectl", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        # A token, or none where the server lets anonymous clients in (see the 401s).
        "security": [{"bearer": []}, {}],
    }
