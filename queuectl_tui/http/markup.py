"""The pieces the dashboard's HTML is made of, and the view its URL names.

Every text that came from a job, a worker or a queue goes through `text` (control characters
shown as escapes, then `html.escape`), in attributes too. static/dashboard.js builds the same
markup from the same JSON, so the two change together."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from ..display import printable
from ..models import JobState
from ..timeutil import human_seconds, parse_iso

Data = dict[str, Any]  # a JSON object, as the API serves it


@dataclass(frozen=True, slots=True)
class View:
    """What the URL asks to see: a state's jobs from a cursor (and the cursors of the pages
    before it, for "previous"), and perhaps one job's detail."""

    state: JobState | None = None
    cursor: int | None = None
    back: tuple[int, ...] = ()
    job: str | None = None

    def href(self, **changes: Any) -> str:
        view = replace(self, **changes)
        params: list[tuple[str, str]] = []
        if view.state is not None:
            params.append(("state", view.state.value))
        if view.cursor:
            params.append(("cursor", str(view.cursor)))
            if view.back:
                params.append(("back", ",".join(str(c) for c in view.back)))
        if view.job is not None:
            params.append(("job", view.job))
        return "/?" + urlencode(params) if params else "/"

    def tab(self, state: JobState | None) -> str:
        """The first page of a state's jobs, no job open."""
        return self.href(state=state, cursor=None, back=(), job=None)


def text(value: object, single_line: bool = True) -> str:
    """Untrusted text as HTML: control characters shown as escapes, markup as text."""
    return html.escape(printable("" if value is None else str(value), single_line))


def number(n: int) -> str:
    return f"{n:,}"


def _ago(iso: str, now: int) -> str:
    try:
        return human_seconds(max(0, now - parse_iso(iso)) / 1000) + " ago"
    except ValueError:
        return iso


def _until(iso: str, now: int) -> str:
    try:
        at = parse_iso(iso)
    except ValueError:
        return iso
    return "due" if at <= now else "in " + human_seconds((at - now + 999) // 1000)


def time_ago(iso: str | None, now: int) -> str:
    """A relative time, with the instant itself in its title (the script ticks it on)."""
    if not iso:
        return '<span class="dim">&ndash;</span>'
    return (
        f'<time data-kind="ago" datetime="{text(iso)}" title="{text(iso)}">'
        f"{text(_ago(iso, now))}</time>"
    )


def next_run(job: Data, now: int) -> str:
    """When a waiting job may run: "due", or a countdown (a retry's backoff, a schedule)."""
    run_at = job.get("run_at")
    if job["state"] not in ("pending", "failed") or not run_at:
        return ""
    return (
        f'<time data-kind="until" datetime="{text(run_at)}" title="{text(run_at)}">'
        f"{text(_until(run_at, now))}</time>"
    )


def until(iso: str, now: int) -> str:
    """A countdown to an instant (a schedule's next job), which the script ticks on."""
    return (
        f'<time data-kind="until" datetime="{text(iso)}" title="{text(iso)}">'
        f"{text(_until(iso, now))}</time>"
    )


def state_badge(state: str) -> str:
    return f'<span class="state st-{text(state)}">{text(state)}</span>'


def job_link(view: View, job_id: str) -> str:
    href = view.href(job=job_id)
    return f'<a class="job-link mono" href="{text(href)}" data-nav>{text(job_id)}</a>'


def tries(job: Data) -> str:
    """Attempts used of the budget ("2/4"), red once it is spent, as in the console."""
    used = f"{job['attempts']}/{job['max_retries'] + 1}"
    return f'<span class="spent">{used}</span>' if job["attempts"] > job["max_retries"] else used


def error_cell(job: Data) -> str:
    error = text(job["last_error"])
    return f'<td class="error" title="{error}">{error}</td>'


def table(head: Sequence[str], rows: Iterable[str], empty: str, cls: str) -> str:
    body = "".join(rows)
    if not body:
        return f'<p class="empty">{empty}</p>'
    cells = "".join(f"<th>{h}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'
