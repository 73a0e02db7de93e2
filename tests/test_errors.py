"""One root for every error a user sees, in families each face maps once."""

from __future__ import annotations

import pytest

from queuectl_tui.cli.context import EXIT_FAILURE, EXIT_USAGE, exit_code
from queuectl_tui.config import ConfigError
from queuectl_tui.errors import (
    Conflict,
    Damaged,
    InvalidInput,
    NotFound,
    QueueError,
    Unavailable,
)
from queuectl_tui.files import UnsafeFileError
from queuectl_tui.models import JobSpecError
from queuectl_tui.service import InputError, NotFoundError, parse_job_batches, parse_job_json
from queuectl_tui.store import (
    DuplicateJobError,
    ForeignDatabaseError,
    StoreBusyError,
    StoreCorrupt,
    StoreError,
)


@pytest.mark.parametrize(
    ("error", "family", "code"),
    [
        (JobSpecError("field 'priority' must be an integer", "priority"), InvalidInput, 2),
        (InputError("invalid JSON"), InvalidInput, EXIT_USAGE),
        (ConfigError("bad setting"), QueueError, EXIT_USAGE),
        (NotFoundError("no job with id 'a'"), NotFound, EXIT_FAILURE),
        (DuplicateJobError("a"), Conflict, EXIT_FAILURE),
        (StoreBusyError("locked"), Unavailable, EXIT_FAILURE),
        (ForeignDatabaseError("x.db", "it holds tables"), Unavailable, EXIT_FAILURE),
        (UnsafeFileError("a symlink"), Unavailable, EXIT_FAILURE),
        (StoreCorrupt("q.db", "file is not a database"), Damaged, EXIT_FAILURE),
    ],
)
def test_every_error_has_a_family_and_an_exit_code(
    error: QueueError, family: type[QueueError], code: int
) -> None:
    assert isinstance(error, family)
    assert exit_code(error) == code


def test_a_taken_id_and_a_damaged_file_are_not_worth_retrying() -> None:
    """The engine retries StoreError; neither of these can get better by trying again."""
    assert not isinstance(DuplicateJobError("a"), StoreError)
    assert not isinstance(StoreCorrupt("q.db", "file is not a database"), StoreError)


def test_the_field_a_validation_error_names_survives_to_the_service() -> None:
    with pytest.raises(InputError) as one:
        parse_job_json('{"command": "true", "priority": "high"}')
    assert one.value.field == "priority"
    with pytest.raises(InputError) as bulk:
        list(parse_job_batches(['{"command": "true"}', '{"command": "true", "timeout": -1}']))
    assert bulk.value.field == "timeout"
    assert str(bulk.value).startswith("line 2: ")
