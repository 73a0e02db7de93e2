"""A PostgreSQL location: `postgresql://[user[:password]@]host[:port]/database[?params]`.

Besides libpq's own parameters the URL may carry `schema=NAME`: the schema the queue's tables
live in (default `queuectl`), so that one database can hold several queues apart."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import ConfigurationError
from ...location import shown

DEFAULT_SCHEMA = "queuectl"
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Target:
    conninfo: str  # for libpq: the URL without our own parameters
    schema: str
    shown: str  # the URL without its password, for messages


def parse(location: str) -> Target:
    parts = urlsplit(location)
    if parts.scheme.split("+")[0] in ("postgres", "postgresql"):
        parts = parts._replace(scheme="postgresql")
    params = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA.fullmatch(schema):
        raise ConfigurationError(
            f"schema {schema!r} in the database URL must be 1-63 lower-case letters, digits "
            "or _, not starting with a digit"
        )
    rest = urlencode([(key, value) for key, value in params if key != "schema"])
    conninfo = urlunsplit(parts._replace(query=rest))
    return Target(conninfo, schema, shown(location))
