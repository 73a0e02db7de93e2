"""Small builders shared by tests (importable as `helpers`)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from queuectl_tui.models import JobSpec, parse_job_spec

# The `run_cli` fixture: run `queuectl ARGS...` in a subprocess and return its result.
RunCli = Callable[..., subprocess.CompletedProcess[str]]


def spec(**fields: object) -> JobSpec:
    """A validated job spec; the command defaults to `true`."""
    fields.setdefault("command", "true")
    return parse_job_spec(fields)
