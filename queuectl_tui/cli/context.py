"""What every command needs: the resolved settings, an open store, and plain error exits."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from ..config import Settings, load_settings
from ..display import printable, safe_json
from ..errors import (
    ConfigurationError,
    Conflict,
    Damaged,
    InvalidInput,
    NotFound,
    QueueError,
    Unavailable,
)
from ..models import queue_name
from ..service import open_queue
from ..store import Store

P = ParamSpec("P")
R = TypeVar("R")

EXIT_FAILURE = 1  # the operation could not be done (unknown id, duplicate id, locked database)
EXIT_USAGE = 2  # the input was wrong (bad JSON, bad field, bad setting)


@dataclass
class CliState:
    config_path: str | None = None
    db_path: str | None = None
    _settings: Settings | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path, self.db_path)
        return self._settings


def state(ctx: typer.Context) -> CliState:
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def queue_option(value: str, flag: str = "--queue") -> str:
    """A queue name given on the command line, or a one-line error (exit 2)."""
    try:
        return queue_name(value, "queue", flag)
    except InvalidInput as error:
        fail(str(error), EXIT_USAGE)


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """One plain sentence on stderr and a non-zero exit; never a traceback."""
    # The message may quote input (an id, a name): its control characters stay visible escapes.
    sys.stderr.write(f"Error: {printable(message, single_line=True)}\n")
    raise typer.Exit(code)


# Each family of QueueError and its exit code; the most specific class listed wins.
EXIT_CODES: dict[type[QueueError], int] = {
    InvalidInput: EXIT_USAGE,
    ConfigurationError: EXIT_USAGE,
    NotFound: EXIT_FAILURE,
    Conflict: EXIT_FAILURE,
    Unavailable: EXIT_FAILURE,
    Damaged: EXIT_FAILURE,
}


def exit_code(error: QueueError) -> int:
    for kind in type(error).__mro__:
        if kind in EXIT_CODES:
            return EXIT_CODES[kind]
    return EXIT_FAILURE


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can cause into one line on stderr and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except QueueError as error:
            fail(str(error), exit_code(error))
        except KeyboardInterrupt:
            sys.stderr.write("Interrupted.\n")
            raise typer.Exit(130) from None

    return wrapper


@contextmanager
def open_store(ctx: typer.Context, note_missing: bool = True) -> Iterator[Store]:
    store = open_queue(state(ctx).settings)
    try:
        yield store
        if note_missing and not store.exists:
            # A read of a path that holds no queue answers from an empty one: say so, or a
            # mistyped --db looks like an empty queue.
            where = printable(store.location, single_line=True)
            sys.stderr.write(
                f"note: there is no queue at {where} yet (the first enqueue or pool makes it)\n"
            )
    finally:
        store.close()


def print_json(data: Any) -> None:
    sys.stdout.write(safe_json(data) + "\n")
