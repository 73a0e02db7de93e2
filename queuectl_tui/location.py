"""Where a queue lives: a path (`queue.db`, `~/jobs/queue.db`) or a URL naming its backend
(`sqlite:////var/lib/queuectl/queue.db`, `postgresql://host/db`).

A SQLite URL becomes its path as soon as it is read, so that everything that works beside the
database file (its WAL, its lock file, the workers log) sees a path."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from .errors import ConfigurationError

BACKENDS = ("sqlite", "postgresql")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ALIASES = {"postgres": "postgresql"}
_ROOTS = re.compile(r"^/{2,}")


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
    kind, rest = _split(location)
    if kind is None:
        return _path(location)
    if kind == "sqlite":
        return _path(_sqlite_path(location, rest))
    if kind not in BACKENDS:
        known = ", ".join(f"{name}://" for name in BACKENDS)
        raise ConfigurationError(f"unknown database URL scheme {kind!r} (known: {known})")
    return location


def _sqlite_path(url: str, rest: str) -> str:
    """The path of a SQLite URL in SQLAlchemy's form: `sqlite:///relative.db`,
    `sqlite:////absolute.db`, percent escapes decoded (`%3F` for a `?` in a name)."""
    host, _, path = rest.partition("/")
    forms = "sqlite:///relative/path.db or sqlite:////absolute/path.db"
    if host:
        raise ConfigurationError(f"the database URL {url!r} names a host; write {forms}")
    path, parameters, _ = path.partition("?")
    if parameters:
        raise ConfigurationError(
            f"the database URL {url!r} takes no parameters (write a ? in a file name as %3F)"
        )
    if not path:
        raise ConfigurationError(f"the database URL {url!r} names no file; write {forms}")
    return unquote(path)


def _path(path: str) -> str:
    if "\0" in path:  # no file has one; os calls would raise ValueError
        raise ConfigurationError(f"the database path {path!r} contains a NUL character")
    # One root: `//x` is `/x` on Linux, but a SQLite URI (file://x) would read `x` as a host.
    return _ROOTS.sub("/", str(Path(path).expanduser()))


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
