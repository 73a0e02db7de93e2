"""Rows as the models' dataclasses, matched to their fields by column name."""

from __future__ import annotations

import dataclasses
import enum
import sqlite3
import typing
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...models import Attempt, Job, Worker

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")
Row = Sequence[Any]
Description = Sequence[Sequence[Any]]  # a cursor's: the name of each column first

_NAME = itemgetter(0)


class RowMap(Generic[D]):
    """Makes `cls` objects of rows that have a column named like each of its fields, in any
    order (other columns are left out). A field of an enum type gets the enum of its value."""

    def __init__(self, cls: type[D]) -> None:
        self._cls = cls
        self._fields = tuple(field.name for field in dataclasses.fields(cls))
        hints = typing.get_type_hints(cls)
        self._enums = tuple(
            (place, hints[name])
            for place, name in enumerate(self._fields)
            if isinstance(hints[name], type) and issubclass(hints[name], enum.Enum)
        )
        self._makers: dict[tuple[str, ...], Callable[[Row], D]] = {}

    def first(self, cursor: sqlite3.Cursor) -> D | None:
        """The next row of `cursor` as an object, or None when there is none."""
        row = cursor.fetchone()
        return None if row is None else self._maker(cursor.description)(row)

    def all(self, cursor: sqlite3.Cursor) -> list[D]:
        """The remaining rows of `cursor`, fetched before anything else runs."""
        return self.from_rows(cursor.fetchall(), cursor.description)

    def from_rows(self, rows: Iterable[Row], description: Description) -> list[D]:
        make = self._maker(description)
        return [make(row) for row in rows]

    def _maker(self, description: Description) -> Callable[[Row], D]:
        """How rows with these columns become objects: worked out the first time a statement
        with them is read, then looked up by the names (a few hundred ns a statement)."""
        names = tuple(map(_NAME, description))
        make = self._makers.get(names)
        if make is None:
            make = self._makers[names] = self._build(names)
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
