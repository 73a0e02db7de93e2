"""Small builders shared by tests (importable as `helpers`)."""

from __future__ import annotations

from queuectl_tui.models import JobSpec, parse_job_spec


def spec(**fields: object) -> JobSpec:
    """A validated job spec; the command defaults to `true`."""
    fields.setdefault("command", "true")
    return parse_job_spec(fields)
