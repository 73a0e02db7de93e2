"""Rows as the models' dataclasses, matched to their fields by column name."""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..models import Action, Attempt, AuditEntry, Job, OutputChunk, Worker

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")
Row = Sequence[Any]
Params = Sequence[Any] | Mapping[str, Any]  # positional, or by name (psycopg)
Description = Sequence[Any]  # a cursor's: the name of each column first in each entry

_NAME = itemgetter(0)


class Cursor(Protocol):
    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What a row map needs of a connection: sqlite3's and psycopg's both have it."""

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


class RowMap(Generic[D]):
    """Makes `cls` objects of the rows of statements that have a column named like each of its
    fields, in any order (other columns are left out). A field of an enum type gets the enum
    of its value, a bool field True or False. Which column goes where is worked out from
    `cursor.description` the first time a statement is run, and kept under the statement's
    text."""

    def __init__(self, cls: type[D]) -> None:
        self._cls = cls
        self._fields = tuple(field.name for field in dataclasses.fields(cls))
        self._enums: tuple[tuple[int, type[enum.Enum] | type[bool]], ...] | None = (
            None  # at first use
        )
        self._makers: dict[str, Callable[[Row], D]] = {}  # by statement

    def first(self, conn: Connection, sql: str, params: Params = ()) -> D | None:
        """The first row of statement `sql` as an object, or None when there is none."""
        cursor = conn.execute(sql, params)
        row = cursor.fetchone()
        return None if row is None else self._maker(sql, cursor.description)(row)

    def all(self, conn: Connection, sql: str, params: Params = ()) -> list[D]:
        """Every row of statement `sql`, fetched before anything else runs."""
        cursor = conn.execute(sql, params)
        return self.from_rows(sql, cursor.fetchall(), cursor.description)

    def from_rows(self, sql: str, rows: Iterable[Row], description: Description) -> list[D]:
        """The rows statement `sql` gave, its cursor's `description` beside them."""
        make = self._maker(sql, description)
        return [make(row) for row in rows]

    def _maker(self, sql: str, description: Description) -> Callable[[Row], D]:
        make = self._makers.get(sql)
        if make is None:
            make = self._makers[sql] = self._build(tuple(map(_NAME, description)))
        return make

    def _build(self, names: tuple[str, ...]) -> Callable[[Row], D]:
        missing = [name for name in self._fields if name not in names]
        if missing:
            raise LookupError(f"no column for {self._cls.__name__}.{', '.join(missing)}")
        order = tuple(names.index(name) for name in self._fields)
        values: Callable[[Row], list[Any]]
        if order == tuple(range(len(names))):
            values = list  # the columns are the fields, in their order: the row as it is
        else:
            pick = itemgetter(*order)

            def values(row: Row) -> list[Any]:
                return list(pick(row))

        if self._enums is None:  # read on first use: a command that maps no rows never pays
            hints = typing.get_type_hints(self._cls)
            self._enums = tuple(
                (place, hints[name])
                for place, name in enumerate(self._fields)
                if isinstance(hints[name], type)
                # SQLite keeps a flag as 0 or 1: a bool field gets True or False
                and (issubclass(hints[name], enum.Enum) or hints[name] is bool)
            )
        cls, enums = self._cls, self._enums

        def make(row: Row) -> D:
            fields = values(row)
            for place, kind in enums:
                fields[place] = kind(fields[place])
            return cls(*fields)

        return make


JOBS = RowMap(Job)
WORKERS = RowMap(Worker)
ATTEMPTS = RowMap(Attempt)
AUDIT = RowMap(AuditEntry)
OUTPUT_CHUNKS = RowMap(OutputChunk)


def worker_values(worker: Worker) -> dict[str, object]:
    """A worker's row: the parameters of each backend's register_worker statement."""
    values = {field.name: getattr(worker, field.name) for field in dataclasses.fields(worker)}
    values["status"] = worker.status.value
    return values


def audit_row(action: Action, touched: int, at: int) -> dict[str, object]:
    """The parameters of each backend's record_action statement."""
    return {
        "at": at,
        "face": action.face,
        "actor": action.actor,
        "host": action.host,
        "action": action.action,
        "subject": action.subject,
        "touched": touched,
    }
