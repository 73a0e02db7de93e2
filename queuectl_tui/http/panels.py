"""The dashboard's throughput chart, workers table and job detail, as HTML (see markup.py;
static/dashboard.js draws the same)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..timeutil import human_seconds, parse_iso
from .markup import (
    Data,
    View,
    job_link,
    next_run,
    number,
    state_badge,
    table,
    text,
    time_ago,
    until,
)
from .markup import tries as tries_text

ACTIVE = ("idle", "busy", "stopping")
# The chart's geometry, in SVG user units; the script draws it with the same numbers.
CHART_W, CHART_H, CHART_TOP, CHART_AXIS = 450, 96, 16, 16


def throughput(stats: Data) -> str:
    rates = stats["throughput"]
    line = (
        f'<p class="rates"><span class="rate ok"><b>{number(rates["completed_last_minute"])}'
        f'</b> done/min</span><span class="rate bad"><b>{number(rates["failed_last_minute"])}'
        "</b> failed/min</span></p>"
    )
    chart = _chart(rates["completed_per_minute"], rates["failed_per_minute"])
    return line + chart + _latency(stats["latency_ms"])


def _chart(done: Sequence[int], failed: Sequence[int]) -> str:
    """Completed and failed runs per minute as side-by-side bars on one scale, oldest first.
    Plain SVG attributes: the CSP forbids inline styles."""
    slots = max(len(done), 1)
    slot = CHART_W / slots
    peak = max([*done, *failed, 1])
    height = CHART_H - CHART_TOP - CHART_AXIS
    base = CHART_H - CHART_AXIS
    parts = [
        f'<svg class="chart" viewBox="0 0 {CHART_W} {CHART_H}" role="img" '
        f'aria-label="Completed and failed runs per minute, last {slots} minutes">',
        f'<line class="axis" x1="0" y1="{base}" x2="{CHART_W}" y2="{base}"/>',
        f'<line class="grid" x1="0" y1="{CHART_TOP}" x2="{CHART_W}" y2="{CHART_TOP}"/>',
        f'<text class="peak" x="2" y="{CHART_TOP - 4}">{number(peak)}/min</text>',
    ]
    for index, (ok, bad) in enumerate(zip(done, failed, strict=False)):
        for offset, value, cls in ((0.18, ok, "bar-ok"), (0.52, bad, "bar-bad")):
            h = round(value / peak * height, 1)
            parts.append(
                f'<rect class="{cls}" x="{index * slot + slot * offset:.1f}" '
                f'y="{base - h:.1f}" width="{slot * 0.3:.1f}" height="{h}">'
                f"<title>{value} {cls[4:]}</title></rect>"
            )
    half = slots // 2
    for index, label in ((0, f"-{slots - 1}m"), (half, f"-{slots - 1 - half}m")):
        x = index * slot + 2
        parts.append(f'<text class="tick" x="{x:.1f}" y="{CHART_H - 3}">{label}</text>')
    parts.append(f'<text class="tick end" x="{CHART_W - 2}" y="{CHART_H - 3}">now</text>')
    return "".join(parts) + "</svg>"


def _ms(value: float | None) -> str:
    if value is None:
        return "&ndash;"
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def _latency(latency: Data) -> str:
    wait, run = latency.get("queue_wait") or {}, latency.get("run_time") or {}
    sample = f"the latest {number(latency.get('sample_size', 0))} runs"
    return (
        f'<p class="latency" title="{sample}">'
        f"<span>wait p50 <b>{_ms(wait.get('p50'))}</b> p95 <b>{_ms(wait.get('p95'))}</b></span>"
        f"<span>run p50 <b>{_ms(run.get('p50'))}</b> p95 <b>{_ms(run.get('p95'))}</b></span></p>"
    )


def worker_mark(worker: Data, stale_after_s: float) -> tuple[str, str]:
    """The status word and its class: a silent active worker is STALE, as in the console."""
    status = str(worker["status"])
    if status in ACTIVE and worker["heartbeat_age_s"] > stale_after_s:
        return f"{status} STALE", "ws-stale"
    return status, f"ws-{status}"


def workers(data: Data, view: View, now: int) -> str:
    stale_after = float(data["stale_after_s"])
    rows = []
    for worker in data["workers"]:
        word, cls = worker_mark(worker, stale_after)
        beat = "beat stale" if cls in ("ws-stale", "ws-hung", "ws-lost") else "beat"
        job = worker["current_job"]
        failed = worker["jobs_failed"]
        rows.append(
            f'<tr class="{cls}"><td><span class="mono">{text(worker["id"])}</span>'
            f'<span class="sub">pid {worker["pid"]} @ {text(worker["host"])}</span></td>'
            f'<td><span class="wstatus {cls}">{text(word)}</span>'
            f'<span class="sub">{job_link(view, job) if job else ""}</span></td>'
            f'<td class="{beat}">{time_ago(worker["last_heartbeat"], now)}</td>'
            f'<td class="num">{number(worker["jobs_done"])}</td>'
            f'<td class="num{" bad" if failed else ""}">{number(failed)}</td></tr>'
        )
    head = ("WORKER", "STATUS / JOB", "HEARTBEAT", "DONE", "FAILED")
    return table(head, rows, "No workers. Start a pool: queuectl worker start", "workers")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return human_seconds(seconds)


def queues(data: Data) -> str:
    rows = []
    for queue in data["queues"]:
        paused = queue["paused"]
        limit = queue["max_running"]
        rows.append(
            f'<tr class="{"q-paused" if paused else "q-open"}">'
            f'<td><span class="mono">{text(queue["name"])}</span></td>'
            f'<td><span class="qstate">{"paused" if paused else "open"}</span></td>'
            f'<td class="num">{number(queue["waiting"])}</td>'
            f'<td class="num">{number(queue["running"])}'
            f"{'' if limit is None else ' / ' + number(limit)}</td>"
            f'<td class="num">{text(_age(queue["oldest_waiting_s"]))}</td></tr>'
        )
    head = ("QUEUE", "STATE", "WAITING", "RUN / LIMIT", "WAITED")
    return table(head, rows, "No queues yet.", "queues")


def schedules(data: Data, view: View, now: int) -> str:
    """Each schedule: its name, timing in words and zone; its next job (a countdown the
    script ticks on) or paused; its last job and that job's state."""
    rows = []
    for schedule in data["schedules"]:
        paused = schedule["paused"]
        if paused:
            when = '<span class="scstate">paused</span>'
        elif schedule["next_at"]:
            when = until(schedule["next_at"], now)
        else:
            when = '<span class="dim">never</span>'
        last_id, last = schedule["last_job_id"], schedule["last_job"]
        if last is not None:
            badge = state_badge(last["state"])
            last_cell = f'{job_link(view, last["id"])}<span class="sub">{badge}</span>'
        elif last_id:
            last_cell = f'<span class="mono">{text(last_id)}</span><span class="sub">gone</span>'
        else:
            last_cell = '<span class="dim">&ndash;</span>'
        words = f"{text(schedule['description'])} &middot; {text(schedule['timezone'])}"
        rows.append(
            f'<tr class="{"sc-paused" if paused else "sc-active"}">'
            f'<td><span class="mono">{text(schedule["name"])}</span>'
            f'<span class="sub">{words}</span></td>'
            f'<td class="next">{when}</td><td>{last_cell}</td></tr>'
        )
    head = ("SCHEDULE", "NEXT JOB", "LAST JOB")
    return table(head, rows, "No schedules. Add one: queuectl schedule add", "schedules")


def _field(name: str, value: str) -> str:
    return f"<dt>{name}</dt><dd>{value}</dd>"


def _fields(job: Data, now: int) -> str:
    mono = '<span class="mono">{}</span>'.format
    fields = [
        _field("state", state_badge(job["state"])),
        _field("queue", mono(text(job["queue"]))),
        _field("command", f'<code class="wrap">{text(job["command"], False)}</code>'),
    ]
    if job.get("type"):
        payload = json.dumps(job.get("payload"), ensure_ascii=False)
        fields.append(_field("type", mono(text(job["type"]))))
        fields.append(_field("payload", f'<code class="wrap">{text(payload, False)}</code>'))
    if job.get("cwd"):
        fields.append(_field("directory", mono(text(job["cwd"]))))
    if job.get("env"):  # masked as the API gives it
        shown = " ".join(f"{name}={value}" for name, value in job["env"].items())
        fields.append(_field("environment", f'<code class="wrap">{text(shown, False)}</code>'))
    fields += [
        _field("tries", f"{tries_text(job)} (max retries {job['max_retries']})"),
        _field("priority", str(job["priority"])),
        _field("run at", f"{time_ago(job['run_at'], now)} {next_run(job, now)}"),
        _field("created", time_ago(job["created_at"], now)),
        _field("updated", time_ago(job["updated_at"], now)),
    ]
    if job.get("worker_id"):
        fields.append(_field("worker", mono(text(job["worker_id"]))))
    if job["state"] == "processing":  # its attempt is recorded when it ends
        fields.append(_field("running", f"since {time_ago(job.get('claimed_at'), now)}"))
    if job.get("exit_code") is not None:
        fields.append(_field("exit code", text(job["exit_code"])))
    if job.get("last_error"):
        fields.append(_field("last error", f'<span class="error">{text(job["last_error"])}</span>'))
    return f'<dl class="fields">{"".join(fields)}</dl>'


def detail(job: Data | None, view: View, now: int) -> str:
    """A job's detail over the page: its fields, then its attempts, newest first."""
    closed = text(view.href(job=None))
    backdrop = f'<a class="backdrop" href="{closed}" data-nav aria-label="Close"></a>'
    close = f'<a class="close" href="{closed}" data-nav>Close &times;</a>'
    if job is None:
        head = f'<div class="panel-head"><h2>Job</h2>{close}</div>'
        body = f'<p class="empty">No job with the id <code>{text(view.job)}</code>.</p>'
        return f'{backdrop}<aside class="panel" aria-label="Job detail">{head}{body}</aside>'
    attempts = "".join(_attempt(a, now) for a in reversed(job["attempt_history"]))
    # A run is recorded as it ends: a job on its first run has none yet.
    unrun = "None has ended yet." if job["state"] == "processing" else "Not run yet."
    attempts = attempts or f'<p class="empty">{unrun}</p>'
    return (
        f'{backdrop}<aside class="panel" aria-label="Job detail"><div class="panel-head">'
        f'<h2>Job <span class="mono">{text(job["id"])}</span></h2>{close}</div>'
        f"{_fields(job, now)}"
        '<h3>Attempts <span class="dim">newest first</span></h3>'
        f'<ol class="attempts">{attempts}</ol></aside>'
    )


def _attempt(attempt: Data, now: int) -> str:
    started, finished = attempt.get("started_at"), attempt.get("finished_at")
    took = ""
    if started and finished:
        took = f"{(parse_iso(finished) - parse_iso(started)) / 1000:.1f} s"
    code = attempt.get("exit_code")
    exit_cls = "exit" if code is None else "exit ok" if code == 0 else "exit bad"
    output = attempt.get("output")
    if output is None:
        shown = '<p class="dim">Output hidden: this server needs a token to show it.</p>'
    elif output:
        shown = f'<pre class="output">{text(output, False)}</pre>'
    else:
        shown = '<p class="dim">No output.</p>'
    error = attempt.get("error")
    outcome = text(attempt["outcome"])
    return (
        f'<li class="attempt"><div class="attempt-head"><b>#{attempt["number"]}</b> '
        f'<span class="outcome oc-{outcome}">{outcome}</span> '
        f'<span class="{exit_cls}">exit {"&ndash;" if code is None else text(code)}</span> '
        f'<span class="dim">worker</span> <span class="mono">{text(attempt["worker_id"])}</span> '
        f'<span class="dim">started</span> {time_ago(started, now)} '
        f'<span class="dim">{took}</span></div>'
        + (f'<div class="error">{text(error, False)}</div>' if error else "")
        + f"{shown}</li>"
    )
