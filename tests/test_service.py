"""Bulk input: JSON Lines parsed and validated in batches, errors named by line."""

from __future__ import annotations

import json

import pytest

from queuectl_tui.service import InputError, parse_job_batches


def lines(*jobs: dict[str, object]) -> list[str]:
    return [json.dumps(job) + "\n" for job in jobs]


def test_batches_keep_the_order_and_give_ids_to_jobs_without_one() -> None:
    given = lines({"id": "a", "command": "x"}, {"command": "y"}, {"id": "c", "command": "z"})
    batches = list(parse_job_batches(["\n", *given], batch_size=2))
    assert [len(batch) for batch in batches] == [2, 1]
    specs = [spec for batch in batches for spec in batch]
    assert [spec.command for spec in specs] == ["x", "y", "z"]
    assert specs[0].id == "a" and specs[2].id == "c" and len(specs[1].id) == 16


@pytest.mark.parametrize("batch_size", [1, 2, 10])
def test_a_repeated_id_is_named_with_both_lines(batch_size: int) -> None:
    given = lines(
        {"command": "no id"},
        {"id": "z", "command": "first"},
        {"command": "no id either"},
        {"id": "z", "command": "again"},
    )
    with pytest.raises(InputError, match=r"^line 4: id 'z' already appears on line 2$"):
        list(parse_job_batches(given, batch_size=batch_size))


def test_the_first_bad_line_is_named() -> None:
    given = lines({"id": "a", "command": "x"}, {"id": "b"}, {"id": "c", "command": 3})
    with pytest.raises(InputError, match=r"^line 2: field 'command' is required$"):
        list(parse_job_batches(given, batch_size=10))


def test_a_value_split_over_two_lines_is_rejected_even_when_the_count_matches() -> None:
    given = ['{"command":"a"\n', '"id":"x"}\n', '{"command":"b"},{"command":"c"}\n']
    with pytest.raises(InputError, match=r"^line 1: invalid JSON"):
        list(parse_job_batches(given))


def test_white_space_around_a_line_s_value_is_accepted_and_two_values_are_not() -> None:
    bare = ['{"id":"a","command":"x"}', '{"id":"b","command":"y"}']
    padded = [' {"id":"a","command":"x"}\t', '{"id":"b","command":"y"}  ']
    assert list(parse_job_batches(bare)) == list(parse_job_batches(padded))
    with pytest.raises(InputError, match=r"^line 2: one JSON object per line, found 2 values$"):
        list(parse_job_batches([bare[0], bare[1] + "," + bare[1]]))
    with pytest.raises(InputError, match=r"^line 1: invalid JSON"):
        list(parse_job_batches([bare[0] + " " + bare[1]]))
