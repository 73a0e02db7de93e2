"""Structured pool logging: one event per line on stderr, for people or for machines.

Every line is an event name plus key=value fields. The human format reads well in a terminal
and in `grep`; the JSON format (`--log-format json`) is one object per line for log shippers.
Warnings from the store (a locked database being retried) go through the same formatter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, TextIO

from ..display import printable

LOGGER_NAME = "queuectl"
_root = logging.getLogger(LOGGER_NAME)
log = logging.getLogger(LOGGER_NAME + ".engine")

# Keep lines short: a command or an error is context, not the record (the store has the full
# text in the attempt history).
_MAX_VALUE = 200


_second_text: tuple[int, str] = (-1, "")


def _timestamp(created: float) -> str:
    # Microseconds, so that pickup latency can be measured from the log itself. The part up
    # to the second is formatted once per second: a busy pool logs thousands of lines in it.
    global _second_text
    second = int(created)
    if _second_text[0] != second:
        _second_text = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    micros = min(int((created - second) * 1_000_000), 999_999)
    return f"{_second_text[1]}.{micros:06d}Z"


def _short(value: Any) -> Any:
    """Strings shortened, with control characters (C1 and bidi-unsafe ones included) shown
    as escapes: a command or an error must not drive the terminal that tails the log."""
    if value.__class__ is not str:
        return value
    if len(value) > _MAX_VALUE:
        value = value[: _MAX_VALUE - 1] + "…"
    return printable(value)


# Made once: json.dumps with options builds a new encoder on every call.
_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
_level_names = {
    level: logging.getLevelName(level).lower()
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
}


def _level_name(level: int) -> str:
    return _level_names.get(level) or logging.getLevelName(level).lower()


def _human_value(value: Any) -> str:
    if value is None:
        return "-"
    text = str(_short(value))
    if not text or any(ch.isspace() or ch in "\"'=" for ch in text) or not text.isprintable():
        return json.dumps(text, ensure_ascii=False)
    return text


class EventFormatter(logging.Formatter, ABC):
    """Formats events: from `event()` directly, or from log records of other queuectl loggers."""

    @abstractmethod
    def render(
        self,
        event: str | None,
        level: int,
        created: float,
        fields: dict[str, Any],
        message: str | None = None,
        traceback: str | None = None,
    ) -> str:
        """One line (two or more with a traceback) for one event or message."""

    def format(self, record: logging.LogRecord) -> str:
        return self.render(
            getattr(record, "event", None),
            record.levelno,
            record.created,
            getattr(record, "fields", {}),
            record.getMessage(),
            self.formatException(record.exc_info) if record.exc_info else None,
        )


class HumanFormatter(EventFormatter):
    """`2026-07-24T10:00:00.123456Z claimed job=a1 worker=host:41:1 attempt=1`"""

    def render(
        self,
        event: str | None,
        level: int,
        created: float,
        fields: dict[str, Any],
        message: str | None = None,
        traceback: str | None = None,
    ) -> str:
        head = f"{_timestamp(created)} "
        if event is None:
            head += f"{_level_name(level)} {_human_value(message)}"
        else:
            head += event if level <= logging.INFO else f"{event} [{_level_name(level).upper()}]"
        line = " ".join([head] + [f"{key}={_human_value(value)}" for key, value in fields.items()])
        return line + "\n" + traceback if traceback else line


class JsonFormatter(EventFormatter):
    """One JSON object per line: ts, level, event, then the event's fields."""

    def render(
        self,
        event: str | None,
        level: int,
        created: float,
        fields: dict[str, Any],
        message: str | None = None,
        traceback: str | None = None,
    ) -> str:
        data: dict[str, Any] = {
            "ts": _timestamp(created),
            "level": _level_name(level),
            "event": event or "log",
        }
        if event is None:
            data["message"] = message
        for key, value in fields.items():
            data[key] = _short(value)
        if traceback:
            data["traceback"] = traceback
        return _json(data)


def configure(log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """Send every `queuectl.*` logger to stderr in the chosen format; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else HumanFormatter())
    root = logging.getLogger(LOGGER_NAME)
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    return handler


_held = threading.local()  # lines held back by `held_lines()` in this thread


@contextlib.contextmanager
def held_lines() -> Iterator[None]:
    """Write this thread's event lines in one go when the block ends (a dispatcher turn that
    settles and starts many jobs), rather than one write each."""
    if getattr(_held, "lines", None) is not None:
        yield  # already inside a held block: its end writes everything
        return
    _held.lines = []
    try:
        yield
    finally:
        try:
            _release_held()
        finally:
            _held.lines = None


def _release_held() -> None:
    lines = getattr(_held, "lines", None)
    if lines and _root.handlers:
        _write(_root.handlers[0], "".join(lines))
        lines.clear()


def _write(handler: logging.Handler, text: str) -> None:
    """Write to the handler's stream. A log that cannot be written (a full disk, a closed or
    non-blocking stderr) loses those lines, never a job: the error is not raised."""
    if isinstance(handler, logging.StreamHandler):
        with handler.lock or contextlib.nullcontext():
            try:
                handler.stream.write(text)
                handler.stream.flush()
            except (OSError, ValueError):
                pass


def event(name: str, level: int = logging.INFO, exc_info: bool = False, **fields: Any) -> None:
    """Log one event: `event("claimed", job="a1", worker="host:41:1")`; None fields are left
    out."""
    fields = {key: value for key, value in fields.items() if value is not None}
    handlers = _root.handlers
    if not exc_info and len(handlers) == 1 and _root.isEnabledFor(level):
        handler = handlers[0]
        formatter = handler.formatter
        if isinstance(handler, logging.StreamHandler) and isinstance(formatter, EventFormatter):
            # The common case, written directly: a LogRecord, the caller lookup and the
            # handler chain cost a busy pool as much as running a trivial job.
            line = formatter.render(name, level, time.time(), fields) + "\n"
            held = getattr(_held, "lines", None)
            if held is not None:
                held.append(line)
            else:
                _write(handler, line)
            return
    _release_held()  # keep the order of this thread's lines
    log.log(level, name, extra={"event": name, "fields": fields}, exc_info=exc_info)
