"""Where a queue lives: a path (`queue.db`, `~/jobs/queue.db`) or a URL naming its backend
(`sqlite:///var/lib/queuectl/queue.db`, `postgresql://host/db`).

A SQLite URL becomes its path as soon as it is read, so that everything that works beside the
database file (its WAL, its lock file, the workers log) sees a path."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ConfigurationError

BACKENDS = ("sqlite", "postgresql")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ALIASES = {"postgres": "postgresql"}


def _split(location: str) -> tuple[str | None, str]:
    """(backend, the rest after `scheme://`), or (None, location) for a path."""
    match = _SCHEME.match(location)
    if match is None:
        return None, location
    name = match.group(1).lower().split("+")[0]  # postgresql+psycopg is PostgreSQL too
    return _ALIASES.get(name, name), location[match.end() :]


def scheme(location: str) -> str | None:
    """The backend a URL names ('sqlite', 'postgresql', ...), or None for a path."""
    return _split(location)[0]


def normalise(location: str) -> str:
    """A path, or a SQLite URL, as the path of the file (with ~ expanded); the URL of another
    backend as given. Raises ConfigurationError for a URL no backend takes."""
    kind, path = _split(location)
    if kind is None:
        return str(Path(location).expanduser())
    if kind == "sqlite":
        if not path:
            raise ConfigurationError(f"the database URL {location!r} names no file")
        return str(Path(path).expanduser())
    if kind not in BACKENDS:
        known = ", ".join(f"{name}://" for name in BACKENDS)
        raise ConfigurationError(f"unknown database URL scheme {kind!r} (known: {known})")
    return location


def is_url(location: str) -> bool:
    """Whether the location is a server's URL rather than a file (after `normalise`)."""
    return _split(location)[0] is not None


def absolute(location: str) -> str:
    """A path made absolute (for another process, in another folder); a URL as it is."""
    # realpath, not Path.resolve: it leaves a symlink loop as it is (for opening the file to
    # refuse it in one sentence) where resolve raises RuntimeError.
    return location if is_url(location) else os.path.realpath(os.path.expanduser(location))


def shown(location: str) -> str:
    """The location for messages, logs and screens: a URL's password hidden."""
    kind, rest = _split(location)
    if kind is None or "@" not in rest.split("/", 1)[0]:
        return location
    credentials, tail = rest.split("@", 1)
    user = credentials.split(":", 1)[0]
    hidden = f"{user}:***" if ":" in credentials else user
    return f"{location[: len(location) - len(rest)]}{hidden}@{tail}"
