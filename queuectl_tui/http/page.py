"""The dashboard's page, rendered on the server from the JSON shapes of the API so that its
first view is complete without JavaScript (markup.py says how text is escaped; panels.py
has the side column and the job detail)."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import JobState
from ..presentation import STATE_ORDER
from ..timeutil import to_iso_seconds
from . import panels
from .markup import (
    Data,
    View,
    error_cell,
    job_link,
    next_run,
    number,
    state_badge,
    table,
    text,
    time_ago,
    tries,
)

JOBS_PAGE = 15  # jobs per page of the jobs list (the script reads it from the page)
DEAD_PAGE = 8  # dead jobs in the dead letters card; the dead tab pages through them all
LINKS_SHOWN = 50  # jobs that run after the job a page shows, at most
TABS: tuple[JobState | None, ...] = (None, *STATE_ORDER)


@dataclass(frozen=True, slots=True)
class Snapshot:
    stats: Data  # GET /stats
    jobs: Data  # GET /jobs?state=&cursor=&order=newest
    dead: Data  # GET /jobs?state=dead&order=ended
    workers: Data  # GET /workers
    job: Data | None  # GET /jobs/{id}, when the view names a job that exists
    now: int  # epoch ms the figures were read at
    queues: Data  # GET /queues
    schedules: Data  # GET /schedules


def _counts(counts: Data, view: View) -> str:
    tiles = []
    for state in TABS[1:]:
        assert state is not None
        n = int(counts.get(state.value, 0))
        cls = f"tile st-{state.value}" + (" zero" if n == 0 else "")
        cls += " selected" if view.state is state else ""
        tiles.append(
            f'<a class="{cls}" href="{text(view.tab(state))}" data-nav>'
            f'<span class="n">{number(n)}</span><span class="label">{state.value}</span></a>'
        )
    workers = int(counts.get("active_workers", 0))
    tiles.append(
        f'<div class="tile total"><span class="n">{number(int(counts.get("total", 0)))}</span>'
        '<span class="label">jobs in all</span></div>'
        f'<div class="tile workers{"" if workers else " zero"}"><span class="n">'
        f'{number(workers)}</span><span class="label">active workers</span></div>'
    )
    return "".join(tiles)


def _tabs(counts: Data, view: View) -> str:
    links = []
    for state in TABS:
        n = int(counts.get(state.value if state else "total", 0))
        selected = view.state is state
        links.append(
            f'<a class="tab{" selected" if selected else ""}" href="{text(view.tab(state))}" '
            f"data-nav{' aria-current=page' if selected else ''}>"
            f'{state.value if state else "all"} <span class="tab-n">{number(n)}</span></a>'
        )
    return "".join(links)


def _command(job: Data) -> str:
    kind = f'<span class="type">{text(job["type"])}</span> ' if job.get("type") else ""
    command = text(job["command"])
    return f'<td class="cmd">{kind}<span class="mono" title="{command}">{command}</span></td>'


def _jobs(page: Data, view: View, now: int) -> str:
    if view.state is JobState.DEAD:
        return _dead_jobs(page, view, now)
    rows = (
        f'<tr class="row st-{text(job["state"])}"><td class="id">{job_link(view, job["id"])}</td>'
        f'<td>{state_badge(job["state"])}</td><td class="mono">{text(job["queue"])}</td>'
        f'<td class="num">{tries(job)}</td><td class="num">{job["priority"]}</td>'
        f'<td class="next">{next_run(job, now)}</td><td>{time_ago(job["updated_at"], now)}</td>'
        f"{_command(job)}</tr>"
        for job in page["jobs"]
    )
    head = ("ID", "STATE", "QUEUE", "TRIES", "PRI", "NEXT", "UPDATED", "COMMAND")
    empty = f"No {view.state.value} jobs." if view.state else "No jobs yet."
    return table(head, rows, empty, "jobs") + _pager(page, view)


def _dead_jobs(page: Data, view: View, now: int) -> str:
    """The dead tab: dead jobs are there for their error, which takes the command's place."""
    rows = (
        f'<tr class="row st-dead"><td class="id">{job_link(view, job["id"])}</td>'
        f'<td class="mono">{text(job["queue"])}</td><td class="num">{tries(job)}</td>'
        f"<td>{time_ago(job['finished_at'], now)}</td>{error_cell(job)}</tr>"
        for job in page["jobs"]
    )
    head = ("ID", "QUEUE", "TRIES", "DIED", "LAST ERROR")
    return table(head, rows, "No dead jobs.", "jobs dead") + _pager(page, view)


def _nav(name: str, href: str, label: str) -> str:
    return f'<a class="page-{name}" href="{text(href)}" data-nav>{label}</a>'


def _pager(page: Data, view: View) -> str:
    """Keyset paging: "next" from the page's next_cursor; "previous" from the cursors of the
    pages before, which the URL carries (`back`)."""
    shown, total = len(page["jobs"]), number(page["total"])
    first = len(view.back) * JOBS_PAGE + 1 if view.cursor else 1
    where = f"{number(first)}&ndash;{number(first + shown - 1)} of {total}" if shown else ""
    where = where or f"0 of {total}"
    off = '<span class="disabled">{}</span>'.format
    links = [off("First"), off("&lsaquo; Previous")]
    if view.cursor:
        previous = view.back[-1] if view.back else None
        links = [
            _nav("first", view.tab(view.state), "First"),
            _nav(
                "prev",
                view.href(cursor=previous, back=view.back[:-1], job=None),
                "&lsaquo; Previous",
            ),
        ]
    if page["next_cursor"]:
        later = (*view.back, view.cursor or 0)
        href = view.href(cursor=int(page["next_cursor"]), back=later, job=None)
        links.append(_nav("next", href, "Next &rsaquo;"))
    else:
        links.append(off("Next &rsaquo;"))
    return f'<div class="pager"><span class="where">{where}</span>{"".join(links)}</div>'


def _dead(page: Data, view: View, now: int) -> str:
    rows = (
        f'<tr><td class="id">{job_link(view, job["id"])}<span class="sub">'
        f"{text(job['queue'])} &middot; {tries(job)} tries</span></td>"
        f"<td>{time_ago(job['finished_at'], now)}</td>{error_cell(job)}</tr>"
        for job in page["jobs"]
    )
    html = table(("ID", "DIED", "LAST ERROR"), rows, "No dead jobs.", "dlq")
    more = page["total"] - len(page["jobs"])
    if more > 0:
        html += (
            f'<p class="more"><a href="{text(view.tab(JobState.DEAD))}" data-nav>'
            f"{number(more)} more in the dead tab &rsaquo;</a></p>"
        )
    return html


# Where reads need a token: the page without figures, and this form. The script keeps the token
# in the tab's sessionStorage and sends it in a header; it never goes into an address.
SIGN_IN = """<section id="sign-in" class="card sign-in" aria-label="Sign in">
<h2>Sign in</h2>
<p>This server needs a token to show its queue (a read token is enough).</p>
<form id="sign-in-form" autocomplete="off">
<label for="sign-in-token">Token</label>
<input id="sign-in-token" name="token" type="password" spellcheck="false" required>
<button type="submit">Sign in</button>
</form>
<p id="sign-in-error" class="error" role="alert" hidden></p>
<p class="dim">Kept in this tab only, until it is closed or you sign out; sent in a header,
never in an address.</p>
<noscript><p class="error">Signing in takes JavaScript.</p></noscript>
</section>
"""


def render(view: View, snap: Snapshot, sign_in: bool = False) -> str:
    counts = snap.stats["counts"]
    # Signed out, the job the address names is not looked up: the detail opens once signed in.
    with_detail = view.job is not None and not sign_in
    detail = panels.detail(snap.job, view, snap.now) if with_detail else ""
    hidden = "" if with_detail else " hidden"
    stale = f"stale after {snap.workers['stale_after_s']:g} s"
    live = "&#9679; signed out" if sign_in else f"&#9679; as of {to_iso_seconds(snap.now)} UTC"
    signed_out = ' data-sign-in="1"' if sign_in else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>queuectl dashboard</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/dashboard.css">
<script src="/static/dashboard.js" defer></script>
</head>
<body>
<header class="top">
<h1><span class="brand">queuectl</span> <span class="sub">dashboard</span></h1>
<span class="badge">read-only</span>
<span id="live" class="live">{live}</span>
<button id="sign-out" type="button" hidden>Sign out</button>
</header>
<div id="note" class="note" role="alert" hidden></div>
<main id="dashboard" data-page-size="{JOBS_PAGE}" data-dead-page-size="{DEAD_PAGE}"{signed_out}>
{SIGN_IN if sign_in else ""}<section id="counts" class="tiles" aria-label="Jobs per state">
{_counts(counts, view)}</section>
<div class="grid">
<div class="col-main">
<section class="card" id="jobs-card">
<div class="card-head"><h2>Jobs <span class="dim">newest first</span></h2>
<nav id="tabs" class="tabs">{_tabs(counts, view)}</nav></div>
<div id="jobs">{_jobs(snap.jobs, view, snap.now)}</div>
</section>
</div>
<div class="col-side">
<section class="card" id="throughput-card">
<div class="card-head"><h2>Throughput</h2><span class="legend">per minute, last 15 min
<i class="key ok"></i>completed <i class="key bad"></i>failed</span></div>
<div id="throughput">{panels.throughput(snap.stats)}</div>
</section>
<section class="card" id="queues-card">
<div class="card-head"><h2>Queues</h2><span class="dim">paused, limits, depth, age</span></div>
<div id="queues">{panels.queues(snap.queues)}</div>
</section>
<section class="card" id="schedules-card">
<div class="card-head"><h2>Schedules</h2><span class="dim">next job, last job</span></div>
<div id="schedules">{panels.schedules(snap.schedules, view, snap.now)}</div>
</section>
<section class="card" id="workers-card">
<div class="card-head"><h2>Workers</h2><span class="dim">{stale}</span></div>
<div id="workers">{panels.workers(snap.workers, view, snap.now)}</div>
</section>
<section class="card" id="dlq-card">
<div class="card-head"><h2>Dead letters <span class="dim">latest death first</span></h2>
<span id="dlq-count" class="count st-dead">{number(snap.dead["total"])}</span></div>
<div id="dlq">{_dead(snap.dead, view, snap.now)}</div>
</section>
</div>
</div>
</main>
<div id="detail" class="overlay"{hidden}>{detail}</div>
</body>
</html>
"""
