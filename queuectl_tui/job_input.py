"""Enqueue input as text: one job as JSON, or a document of many (JSON Lines, a JSON array, or
JSON objects one after another, pretty-printed as `jq` prints them) a batch at a time, each
job held to `models.parse_job_spec`, the one validator of a job. Refusals name the line (or
index) and the field; nothing here writes."""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

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
    return parse_job_object(decode_json(text), job_types)


def decode_json(text: str, what: str = "") -> object:
    """One JSON value (InputError saying where the text, `what` if named, stops being
    JSON)."""
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        named = f" in {what}" if what else ""
        raise InputError(f"invalid JSON{named}: {error.msg} ({where})") from None
    except RecursionError:
        raise InputError("invalid JSON: values nested too deeply") from None


def parse_job_object(obj: object, job_types: Mapping[str, JobType] | None = None) -> JobSpec:
    """One decoded job, validated (InputError names the field)."""
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(str(error), error.field) from None


@dataclass(frozen=True)
class JobDocument:
    """Many jobs as text: one JSON value per entry, and how a refusal names an entry."""

    entries: list[str]
    unit: str | None = "line"  # "line", "index", "object", or None for one lone object
    first: int = 1  # the number of the first entry

    @classmethod
    def of(cls, lines: Iterable[str] | JobDocument) -> JobDocument:
        """A document as it is, or JSON Lines as one."""
        return lines if isinstance(lines, JobDocument) else cls(list(lines))

    def where(self, number: int) -> str:
        return f"{self.unit} {number}: " if self.unit else ""


def read_document(text: str) -> JobDocument:
    """The jobs of an input, its form told from its content: a JSON array (entries named by
    index from 0), JSON Lines (by line, blank lines counted), or JSON objects written across
    lines (by object from 1, or unnamed when there is one)."""
    start = text.lstrip()
    if start.startswith("["):
        values = decode_json(text, "a JSON array")
        if not isinstance(values, list):  # '[1] [2]' reads as one array then extra data
            raise InputError("invalid JSON array")
        if not values:
            raise InputError("no jobs in the input (an empty array)")
        return JobDocument([json.dumps(value) for value in values], "index", 0)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    first_line = next((line for line in lines if line.strip()), "")
    if not _continues_on_the_next_line(first_line):
        return JobDocument(lines)
    values = _decode_stream(text)
    return JobDocument(
        [json.dumps(value) for value in values], "object" if len(values) > 1 else None
    )


def _continues_on_the_next_line(line: str) -> bool:
    """True if the line starts a JSON object that it does not finish: the input is objects
    written across lines, not JSON Lines."""
    text = line.strip()
    if not text.startswith("{"):
        return False
    try:
        json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        return error.pos >= len(text)  # ran out of text, not into a mistake
    except RecursionError:
        return False
    return False


def is_json_job_text(word: str) -> bool:
    """A word on the command line meant as JSON: an object, even a broken one, or a JSON
    array (never a shell command: `[ -f x ] && make` is not JSON, so it stays a command)."""
    start = word.lstrip()
    if start.startswith("{"):
        return True
    if not start.startswith("["):
        return False
    try:
        json.loads(word, parse_int=_bounded_int)
    except RecursionError:  # JSON, nested too deeply: the decoder says so
        return True
    except ValueError:
        return False
    return True


def _decode_stream(text: str) -> list[object]:
    """JSON values one after another, with white space around and between them."""
    decoder = json.JSONDecoder(parse_int=_bounded_int)
    values: list[object] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            where = f"line {error.lineno} column {error.colno}"
            raise InputError(
                f"invalid JSON in object {len(values) + 1}: {error.msg} ({where})"
            ) from None
        except RecursionError:
            raise InputError("invalid JSON: values nested too deeply") from None
        values.append(value)


# Jobs validated per step of a bulk enqueue; the store inserts one step while the next is
# being validated.
BULK_BATCH = 20_000


def parse_job_batches(
    lines: Iterable[str] | JobDocument,
    batch_size: int = BULK_BATCH,
    job_types: Mapping[str, JobType] | None = None,
) -> Iterator[list[JobSpec]]:
    """JSON Lines (or a document's entries), one job per non-blank line, validated and
    yielded a batch at a time.

    Raises InputError naming the line at the first bad one, or at an id that appeared on an
    earlier line; a consumer that writes inside one transaction then writes nothing."""
    form = JobDocument.of(lines)
    numbered = [(n, line) for n, line in enumerate(form.entries, start=form.first) if line.strip()]
    seen: set[str] = set()
    for start in range(0, len(numbered), batch_size):
        chunk = numbered[start : start + batch_size]
        objects = _decode(chunk, form)
        try:
            specs = [parse_job_spec(obj, job_types) for obj in objects]
        except JobSpecError:  # find the first bad line again, to name it
            specs = [
                _validate(form.where(number), obj, job_types)
                for (number, _), obj in zip(chunk, objects, strict=True)
            ]
        before = len(seen)
        seen.update(spec.id for spec in specs)
        if len(seen) - before != len(specs):
            _repeated_id(numbered[: start + len(chunk)], specs, start, job_types, form)
        yield specs


def _repeated_id(
    numbered: list[tuple[int, str]],
    specs: list[JobSpec],
    start: int,
    job_types: Mapping[str, JobType] | None,
    form: JobDocument,
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
            place = f"on line {earlier}" if form.unit == "line" else f"at {form.unit} {earlier}"
            raise InputError(f"{form.where(number)}id '{spec.id}' already appears {place}")


_decode_json = json.JSONDecoder().decode
# The decoder's own scanner (C where available), called directly: one value from the start of
# a line, without decode()'s whitespace handling, which costs half the time of a short line.
# (typeshed types make_scanner's argument as the private scanner context, not a decoder)
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _decode(chunk: list[tuple[int, str]], form: JobDocument) -> list[object]:
    # Each line parsed on its own: joining lines into one array would let a value that spans
    # two lines, or two values on one line, pass. A line that does not hold exactly one value
    # with nothing around it (white space included) takes the careful pass, which accepts
    # white space and words the error.
    try:
        scanned = [_scan_json(line, 0) for _, line in chunk]
    except (ValueError, RecursionError, StopIteration):  # also a number too long to convert
        return [_decode_line(form.where(number), line) for number, line in chunk]
    if all(end == len(line) for (_, end), (_, line) in zip(scanned, chunk, strict=True)):
        return [value for value, _ in scanned]
    return [_decode_line(form.where(number), line) for number, line in chunk]


def _decode_line(where: str, line: str) -> object:
    try:
        objects = json.loads("[" + line + "]", parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}invalid JSON: {error.msg}") from None
    except RecursionError:
        raise InputError(f"{where}invalid JSON: values nested too deeply") from None
    if len(objects) != 1:
        raise InputError(f"{where}one JSON object per line, found {len(objects)} values")
    return objects[0]


def _validate(where: str, obj: object, job_types: Mapping[str, JobType] | None) -> JobSpec:
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(f"{where}{error}", error.field) from None


def line_of_id(lines: Iterable[str], job_id: str, first: int = 1) -> int | None:
    """The number of the (non-blank) line whose job has id `job_id`, for an error found once
    the lines were stored (the rare path: lines are parsed again)."""
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("id") == job_id:
            return number
    return None
