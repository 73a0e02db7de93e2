"""Bulk input: JSON Lines parsed and validated in batches, errors named by line; the store's
clock, which the service stamps and judges by."""

from __future__ import annotations

import json

import pytest

from queuectl_tui import service
from queuectl_tui.config import Settings
from queuectl_tui.models import JobSpec, Worker, WorkerStatus
from queuectl_tui.service import InputError, parse_job_batches
from queuectl_tui.store import Store
from queuectl_tui.timeutil import now_ms


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


def test_jobs_are_stamped_and_workers_judged_by_the_store_s_clock(store: Store) -> None:
    # A store shared by several hosts answers with its database's clock: here ten minutes
    # ahead of this host's.
    store.now = lambda: now_ms() + 600_000  # type: ignore[method-assign]
    before = store.now()
    job = service.enqueue(store, Settings(), JobSpec("j", "true")).job
    assert before <= job.created_at <= store.now()
    assert job.run_at == job.created_at
    # A pool elsewhere whose last heartbeat is a minute old by the store's clock is gone,
    # although by this host's clock that heartbeat is still to come.
    beat = store.now() - 60_000
    far = Worker("far:1:1", "far:1", 1, "far-away", WorkerStatus.IDLE, beat, beat, None, None, 0, 0)
    store.register_workers([far])
    assert service.running_workers(store, stale_after_s=15.0) == []
