"""Where the benchmark's queues live: a fresh, empty queue per scenario, either a SQLite file
in the run's temporary folder or a schema of its own on a PostgreSQL server, all of them
removed when the run ends."""

from __future__ import annotations

import secrets
from pathlib import Path

from ..errors import ConfigurationError
from ..location import normalise, scheme
from ..store import seeding
from ..store.discard import discard_queue


class Places:
    """Queue locations for one benchmark run. `base_url`: a postgresql:// URL whose database
    receives the queues (as schemas bench_NAME_RANDOM), or None for SQLite files in `folder`."""

    def __init__(self, folder: Path, base_url: str | None = None) -> None:
        self.folder = folder
        self.base_url = None if base_url is None else normalise(base_url)
        if self.base_url is not None and scheme(self.base_url) != "postgresql":
            raise ConfigurationError(f"not a PostgreSQL URL: {base_url}")
        self.made: list[str] = []

    @property
    def backend(self) -> str:
        return "sqlite" if self.base_url is None else "postgresql"

    def location(self, name: str) -> str:
        """A new, empty queue's location for the scenario `name` (lower-case letters, _)."""
        if self.base_url is None:
            where = str(self.folder / f"{name}.db")
        else:
            # A random part: runs side by side on one server never share a queue. A schema
            # already in the URL is overridden: the last one given counts (url.parse).
            joiner = "&" if "?" in self.base_url else "?"
            where = f"{self.base_url}{joiner}schema=bench_{name}_{secrets.token_hex(4)}"
        if where in self.made:  # a SQLite name given twice would share a file
            raise ValueError(f"a queue named {name!r} was made already")
        self.made.append(where)
        return where

    def describe(self) -> str:
        """The database measured, in words, for the report."""
        return seeding.describe(self.base_url)

    def close(self) -> None:
        """Remove every queue handed out, trying each even when one fails (the first error
        is raised after)."""
        failed: Exception | None = None
        for where in reversed(self.made):
            try:
                discard_queue(where)
            except Exception as error:  # the others still go
                failed = failed or error
        self.made.clear()
        if failed is not None:
            raise failed
