"""The search language of the console's `/`, `queuectl list --query` and `GET /jobs?q=`:
qualifiers and free text, every part of which a job must match.

    state:dead  state:failed,dead  queue:emails  exit:137  worker:vm-2  error:"disk quota"
    since:10m  since:2026-12-01  deploy "exit 3"

Free text matches a part of the id, the command or the last error; `error:` matches the last
error or the failure group (error_groups.py) of failed and dead jobs; `worker:` a part of the
worker id (of running jobs); `since:` jobs updated in the last 10m / 2h / 3d, or since a date or
time. Text is matched without regard to case. Pure code: each backend turns a JobQuery into
its statement (store/listing.py)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .errors import InvalidInput
from .models import STATES, JobState, queue_name
from .timeutil import parse_iso

QUALIFIERS = ("state", "queue", "exit", "worker", "error", "since")
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_AGO = re.compile(r"(\d{1,9})([smhdw])")
MAX_TERMS = 16  # parts of one query; each is a condition of the statement


@dataclass(frozen=True, slots=True)
class JobQuery:
    states: tuple[JobState, ...] = ()  # any of them
    queues: tuple[str, ...] = ()  # any of them
    exit_codes: tuple[int, ...] = ()  # any of them
    worker: str | None = None
    error: str | None = None
    since: int | None = None  # updated at or after (ms)
    text: tuple[str, ...] = ()  # each a part of the id, command or last error

    @property
    def empty(self) -> bool:
        return self == JobQuery()


# key:"a value", key:value, "quoted text" (never a qualifier), or a word.
_TOKEN = re.compile(r'([A-Za-z]+):"([^"]*)"|"([^"]*)"|(\S+)')


def _split(text: str) -> list[tuple[str | None, str]]:
    """(qualifier, value) pairs; free text has None for its qualifier."""
    if text.count('"') % 2:
        raise InvalidInput("a quote is not closed in the search")
    found: list[tuple[str | None, str]] = []
    for quoted_key, quoted_value, phrase, word in _TOKEN.findall(text):
        if quoted_key:
            found.append((quoted_key, quoted_value))
        elif phrase:
            found.append((None, phrase))
        elif ":" in word:
            key, _, value = word.partition(":")
            found.append((key, value))
        elif word:
            found.append((None, word))
    return found


def parse_query(text: str, now: int) -> JobQuery:
    """A JobQuery of the search text; InvalidInput says which part is wrong."""
    if "\x00" in text:
        raise InvalidInput("the search holds a NUL character")
    states: list[JobState] = []
    queues: list[str] = []
    exits: list[int] = []
    worker = error = None
    since: int | None = None
    words: list[str] = []
    parts = _split(text)
    if len(parts) > MAX_TERMS:
        raise InvalidInput(f"a search takes at most {MAX_TERMS} parts")
    for key, value in parts:
        if key is None or key not in QUALIFIERS:
            # `image:tag` is text to find; `stat:dead` is a qualifier mistyped.
            near = difflib.get_close_matches((key or "").lower(), QUALIFIERS, n=1, cutoff=0.7)
            if key is not None and near:
                raise InvalidInput(
                    f"unknown qualifier '{key}:'; did you mean '{near[0]}:'? (quote it to "
                    "search for the text)"
                )
            words.append(value if key is None else f"{key}:{value}")
            continue
        if not value:
            raise InvalidInput(f"'{key}:' needs a value")
        if key == "state":
            states += [_state(name) for name in value.split(",")]
        elif key == "queue":
            queues += [_queue(name) for name in value.split(",")]
        elif key == "exit":
            exits += [_exit(code) for code in value.split(",")]
        elif key == "worker":
            worker = value
        elif key == "error":
            error = value
        else:
            since = _since(value, now)
    return JobQuery(
        tuple(dict.fromkeys(states)),
        tuple(dict.fromkeys(queues)),
        tuple(dict.fromkeys(exits)),
        worker,
        error,
        since,
        tuple(words),
    )


def _state(name: str) -> JobState:
    try:
        return JobState(name.lower())
    except ValueError:
        known = ", ".join(state.value for state in STATES)
        raise InvalidInput(f"unknown state '{name}' in state:; choose from {known}") from None


def _queue(name: str) -> str:
    try:
        return queue_name(name)
    except InvalidInput as error:
        raise InvalidInput(f"queue: {error}") from None


def _exit(code: str) -> int:
    if not re.fullmatch(r"-?\d{1,4}", code):
        raise InvalidInput(
            f"exit: takes exit codes such as 1 or 137 (-15 for a signal), not {code!r}"
        )
    return int(code)


def _since(value: str, now: int) -> int:
    ago = _AGO.fullmatch(value)
    if ago:
        return now - int(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        return parse_iso(value if "T" in value else value + "T00:00:00Z")
    except ValueError:
        raise InvalidInput(
            "since: takes an age such as 10m, 2h or 3d, or a date such as 2026-12-01, "
            f"not {value!r}"
        ) from None
