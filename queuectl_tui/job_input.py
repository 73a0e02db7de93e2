"""Enqueue input as text: one job as JSON, or JSON Lines a batch at a time, each line held to
`models.parse_job_spec`, the one validator of a job. Refusals name the line and the field;
nothing here writes."""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterable, Iterator, Mapping

from .errors import InvalidInput
from .models import JobSpec, JobSpecError, JobType, parse_job_spec


class InputError(InvalidInput):
    """Enqueue input that was refused; nothing was written."""


_MAX_INT_DIGITS = 100


def _bounded_int(digits: str) -> int:
    """JSON integers as Python ints, except that one too long for any field (Python refuses to
    convert more than 4300 digits at all) becomes a value every field's range check refuses,
    so the error still names the field."""
    if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
        return int(-(10**_MAX_INT_DIGITS) if digits.startswith("-") else 10**_MAX_INT_DIGITS)
    return int(digits)


def parse_job_json(text: str, job_types: Mapping[str, JobType] | None = None) -> JobSpec:
    """One job from JSON text, validated (InputError names the field); a typed job's type
    must be one of `job_types`."""
    try:
        obj = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise InputError(f"invalid JSON: {error.msg} ({where})") from None
    except RecursionError:
        raise InputError("invalid JSON: values nested too deeply") from None
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(str(error), error.field) from None


# Jobs validated per step of a bulk enqueue; the store inserts one step while the next is
# being validated.
BULK_BATCH = 20_000


def parse_job_batches(
    lines: Iterable[str],
    batch_size: int = BULK_BATCH,
    job_types: Mapping[str, JobType] | None = None,
) -> Iterator[list[JobSpec]]:
    """JSON Lines, one job per non-blank line, validated and yielded a batch at a time.

    Raises InputError naming the line at the first bad one, or at an id that appeared on an
    earlier line; a consumer that writes inside one transaction then writes nothing."""
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    seen: set[str] = set()
    for start in range(0, len(numbered), batch_size):
        chunk = numbered[start : start + batch_size]
        objects = _decode(chunk)
        try:
            specs = [parse_job_spec(obj, job_types) for obj in objects]
        except JobSpecError:  # find the first bad line again, to name it
            specs = [
                _validate(number, obj, job_types)
                for (number, _), obj in zip(chunk, objects, strict=True)
            ]
        before = len(seen)
        seen.update(spec.id for spec in specs)
        if len(seen) - before != len(specs):
            _repeated_id(numbered[: start + len(chunk)], specs, start, job_types)
        yield specs


def _repeated_id(
    numbered: list[tuple[int, str]],
    specs: list[JobSpec],
    start: int,
    job_types: Mapping[str, JobType] | None,
) -> None:
    """Raise InputError for the first id of this chunk that appeared on an earlier line (the
    rare path: the ids of earlier chunks are read again to find where)."""
    first_line_of: dict[str, int] = {}
    for number, line in numbered[:start]:
        spec = parse_job_spec(_decode_json(line), job_types)
        first_line_of.setdefault(spec.id, number)
    for spec, (number, _) in zip(specs, numbered[start:], strict=True):
        earlier = first_line_of.setdefault(spec.id, number)
        if earlier != number:
            raise InputError(f"line {number}: id '{spec.id}' already appears on line {earlier}")


_decode_json = json.JSONDecoder().decode
# The decoder's own scanner (C where available), called directly: one value from the start of
# a line, without decode()'s whitespace handling, which costs half the time of a short line.
# (typeshed types make_scanner's argument as the private scanner context, not a decoder)
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _decode(chunk: list[tuple[int, str]]) -> list[object]:
    # Each line parsed on its own: joining lines into one array would let a value that spans
    # two lines, or two values on one line, pass. A line that does not hold exactly one value
    # with nothing around it (white space included) takes the careful pass, which accepts
    # white space and words the error.
    try:
        scanned = [_scan_json(line, 0) for _, line in chunk]
    except (ValueError, RecursionError, StopIteration):  # also a number too long to convert
        return [_decode_line(number, line) for number, line in chunk]
    if all(end == len(line) for (_, end), (_, line) in zip(scanned, chunk, strict=True)):
        return [value for value, _ in scanned]
    return [_decode_line(number, line) for number, line in chunk]


def _decode_line(number: int, line: str) -> object:
    try:
        objects = json.loads("[" + line + "]", parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        raise InputError(f"line {number}: invalid JSON: {error.msg}") from None
    except RecursionError:
        raise InputError(f"line {number}: invalid JSON: values nested too deeply") from None
    if len(objects) != 1:
        raise InputError(f"line {number}: one JSON object per line, found {len(objects)} values")
    return objects[0]


def _validate(number: int, obj: object, job_types: Mapping[str, JobType] | None) -> JobSpec:
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(f"line {number}: {error}", error.field) from None


def line_of_id(lines: Iterable[str], job_id: str) -> int | None:
    """The number of the (non-blank) line whose job has id `job_id`, for an error found once
    the lines were stored (the rare path: lines are parsed again)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("id") == job_id:
            return number
    return None
