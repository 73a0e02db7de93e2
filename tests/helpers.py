"""Small builders shared by tests (importable as `helpers`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from queuectl_tui.models import JobSpec, parse_job_spec

# The `run_cli` fixture: run `queuectl ARGS...` in a subprocess and return its result.
RunCli = Callable[..., subprocess.CompletedProcess[str]]


def spec(**fields: object) -> JobSpec:
    """A validated job spec; the command defaults to `true`."""
    fields.setdefault("command", "true")
    return parse_job_spec(fields)


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without the developer's own queuectl settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
    env.update(NO_COLOR="1", COLUMNS="200", **extra)
    return env
