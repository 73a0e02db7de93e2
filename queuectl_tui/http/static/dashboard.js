// The queuectl web dashboard: reads the JSON API whenever the server's events (GET /events)
// say the queue changed, and redraws the page the server rendered (queuectl_tui/http/page.py
// makes the same markup from the same JSON). Where the events cannot reach it, it polls.
// Read-only: it only ever sends GET requests. Untrusted text (ids, commands, queue names,
// errors, output) goes in through text nodes and attributes, never as HTML.
"use strict";

(() => {
  const root = document.getElementById("dashboard");
  if (!root) return;

  const PAGE = Number(root.dataset.pageSize) || 15;
  const DEAD_PAGE = Number(root.dataset.deadPageSize) || 8;
  const POLL_MS = 750; // without events: a job enqueued now shows within a second
  const SLOW_MS = 15000; // with events: read now and then all the same (stale heartbeats)
  const STATS_EVERY_MS = 5000; // per-minute rates move slowly and cost the most to read
  const REQUEST_TIMEOUT_MS = 5000;
  const MAX_BACK = 100;
  const TABS = ["", "pending", "processing", "failed", "dead", "completed", "cancelled", "waiting"];
  const ACTIVE = new Set(["idle", "busy", "stopping"]);
  const CHART = { w: 450, h: 96, top: 16, axis: 16 };
  const SVG_NS = "http://www.w3.org/2000/svg";
  // As display.printable: C0/C1 controls but newline and tab, DEL, bidi marks and overrides.
  const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  const $ = (id) => document.getElementById(id);
  const parts = {
    counts: $("counts"), tabs: $("tabs"), jobs: $("jobs"), dlq: $("dlq"),
    dlqCount: $("dlq-count"), throughput: $("throughput"), workers: $("workers"),
    queues: $("queues"), schedules: $("schedules"),
    detail: $("detail"), live: $("live"), note: $("note"),
  };
  const signIn = {
    section: $("sign-in"), form: $("sign-in-form"), input: $("sign-in-token"),
    error: $("sign-in-error"), out: $("sign-out"),
  };

  // -- the view: what the URL asks to see ---------------------------------------------------
  const digits = (text) => typeof text === "string" && /^[0-9]{1,18}$/.test(text);

  function viewFrom(search) {
    const params = new URLSearchParams(search);
    const state = params.get("state") || "";
    const cursor = params.get("cursor");
    const back = (params.get("back") || "").split(",").filter(digits);
    return {
      state: TABS.includes(state) ? state : "",
      cursor: digits(cursor) && cursor !== "0" ? cursor : null,
      back: digits(cursor) ? back.slice(-MAX_BACK) : [],
      job: params.get("job") || null,
    };
  }

  function href(view, changes = {}) {
    const next = { ...view, ...changes };
    const params = new URLSearchParams();
    if (next.state) params.set("state", next.state);
    if (next.cursor) {
      params.set("cursor", next.cursor);
      if (next.back.length) params.set("back", next.back.join(","));
    }
    if (next.job !== null) params.set("job", next.job);
    const query = params.toString();
    return query ? "/?" + query : "/";
  }

  const jobsKey = (view) => `${view.state}|${view.cursor || ""}`;
  let view = viewFrom(location.search);

  // -- text and time -----------------------------------------------------------------------
  function printable(text, singleLine = true) {
    if (text === null || text === undefined) return "";
    let safe = String(text).replace(CONTROL, (char) => {
      if (char === "\r") return "\\r";
      const code = char.charCodeAt(0);
      return code < 0x100
        ? "\\x" + code.toString(16).padStart(2, "0")
        : "\\u" + code.toString(16).padStart(4, "0");
    });
    if (singleLine) safe = safe.replace(/\n/g, "\\n").replace(/\t/g, "\\t");
    return safe;
  }

  const number = (n) => Number(n || 0).toLocaleString("en-US");

  function humanSeconds(value) {
    const s = Math.floor(value);
    const pad = (n) => String(n).padStart(2, "0");
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
    return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
  }

  // The server's clock, as read from the last heartbeat it reported (or its Date header), so
  // that ages agree with the server's even when this machine's clock is off.
  let clockOffset = 0;
  let heartbeatClock = false; // a heartbeat's age is exact; the Date header counts seconds
  const serverNow = () => Date.now() + clockOffset;

  function timeText(kind, iso) {
    const at = Date.parse(iso);
    if (Number.isNaN(at)) return iso;
    const now = serverNow();
    if (kind === "until") return at <= now ? "due" : "in " + humanSeconds((at - now + 999) / 1000);
    return humanSeconds(Math.max(0, now - at) / 1000) + " ago";
  }

  // -- building DOM ------------------------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === "") continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }

  function svg(tag, attrs, ...kids) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    for (const kid of kids) node.append(kid instanceof Node ? kid : document.createTextNode(kid));
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }

  // Redraws patch the nodes in place rather than replacing them: a link pressed while a poll
  // lands is still the same element when the button comes up (else the click is lost), and
  // scroll positions and text selections survive.
  function show(container, ...kids) {
    const want = kids.flat().filter((kid) => kid instanceof Node);
    const have = [...container.childNodes];
    want.forEach((node, index) => {
      const old = have[index];
      if (old === node) return; // a node that lives across draws (live output) stays as it is
      if (!old) container.append(node);
      else if (old.nodeName !== node.nodeName || node.dataset?.keep) {
        container.replaceChild(node, old);
      }
      else if (node.nodeType === Node.TEXT_NODE) {
        if (old.nodeValue !== node.nodeValue) old.nodeValue = node.nodeValue;
      } else {
        patch(old, node);
      }
    });
    for (const extra of have.slice(want.length)) if (!want.includes(extra)) extra.remove();
  }

  function patch(old, node) {
    for (const { name } of [...old.attributes]) {
      if (!node.hasAttribute(name)) old.removeAttribute(name);
    }
    for (const { name, value } of [...node.attributes]) {
      if (old.getAttribute(name) !== value) old.setAttribute(name, value);
    }
    show(old, ...node.childNodes);
  }

  const dim = (text) => el("span", { class: "dim" }, text);
  const mono = (text, attrs = {}) => el("span", { class: "mono", ...attrs }, printable(text));
  const nav = (url, attrs, ...kids) => el("a", { href: url, "data-nav": true, ...attrs }, ...kids);
  const state = (name) => el("span", { class: `state st-${name}` }, printable(name));

  function time(iso) {
    if (!iso) return dim("\u2013");
    return el("time", { "data-kind": "ago", datetime: iso, title: iso }, timeText("ago", iso));
  }

  function nextRun(job) {
    if (!["pending", "failed"].includes(job.state) || !job.run_at) return "";
    return el("time", { "data-kind": "until", datetime: job.run_at, title: job.run_at },
      timeText("until", job.run_at));
  }

  function tries(job) {
    const text = `${job.attempts}/${job.max_retries + 1}`;
    return job.attempts > job.max_retries ? el("span", { class: "spent" }, text) : text;
  }

  const jobLink = (job) =>
    nav(href(view, { job: job.id }), { class: "job-link mono" }, printable(job.id));

  function table(cls, head, rows, empty) {
    if (!rows.length) return el("p", { class: "empty" }, empty);
    return el("table", { class: cls },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
  }

  const td = (attrs, ...kids) => el("td", attrs, ...kids);

  // -- the parts of the page ---------------------------------------------------------------
  function drawCounts(counts) {
    const tiles = TABS.slice(1).map((name) => {
      const n = counts[name] || 0;
      const cls = `tile st-${name}` + (n ? "" : " zero") + (view.state === name ? " selected" : "");
      const url = href(view, { state: name, cursor: null, back: [], job: null });
      return nav(url, { class: cls }, el("span", { class: "n" }, number(n)),
        el("span", { class: "label" }, name));
    });
    const workers = counts.active_workers || 0;
    tiles.push(el("div", { class: "tile total" }, el("span", { class: "n" }, number(counts.total)),
      el("span", { class: "label" }, "jobs in all")));
    tiles.push(el("div", { class: "tile workers" + (workers ? "" : " zero") },
      el("span", { class: "n" }, number(workers)), el("span", { class: "label" }, "active workers")));
    show(parts.counts, tiles);

    show(parts.tabs, TABS.map((name) => {
      const n = counts[name || "total"] || 0;
      const selected = view.state === name;
      const url = href(view, { state: name, cursor: null, back: [], job: null });
      return nav(url, { class: "tab" + (selected ? " selected" : ""),
        "aria-current": selected ? "page" : null },
        (name || "all") + " ", el("span", { class: "tab-n" }, number(n)));
    }));
  }

  function command(job) {
    const text = printable(job.command);
    return [job.type ? el("span", { class: "type" }, printable(job.type)) : null,
      job.type ? " " : null, el("span", { class: "mono", title: text }, text)];
  }

  function errorCell(job) {
    const error = printable(job.last_error);
    return td({ class: "error", title: error }, error);
  }

  function drawJobs(page) {
    const rows = view.state === "dead" ? deadRows(page) : page.jobs.map((job) =>
      el("tr", { class: `row st-${job.state}` },
        td({ class: "id" }, jobLink(job)), td({}, state(job.state)),
        td({ class: "mono" }, printable(job.queue)), td({ class: "num" }, tries(job)),
        td({ class: "num" }, String(job.priority)), td({ class: "next" }, nextRun(job)),
        td({}, time(job.updated_at)), td({ class: "cmd" }, command(job))));
    const [head, cls] = view.state === "dead"
      ? [["ID", "QUEUE", "TRIES", "DIED", "LAST ERROR"], "jobs dead"]
      : [["ID", "STATE", "QUEUE", "TRIES", "PRI", "NEXT", "UPDATED", "COMMAND"], "jobs"];
    const empty = view.state ? `No ${view.state} jobs.` : "No jobs yet.";
    parts.jobs.classList.remove("loading");
    show(parts.jobs, table(cls, head, rows, empty), pager(page));
  }

  // The dead tab: dead jobs are there for their error, which takes the command's place.
  const deadRows = (page) => page.jobs.map((job) =>
    el("tr", { class: "row st-dead" }, td({ class: "id" }, jobLink(job)),
      td({ class: "mono" }, printable(job.queue)), td({ class: "num" }, tries(job)),
      td({}, time(job.finished_at)), errorCell(job)));

  function pager(page) {
    const shown = page.jobs.length;
    const first = view.cursor ? view.back.length * PAGE + 1 : 1;
    const where = shown
      ? `${number(first)}\u2013${number(first + shown - 1)} of ${number(page.total)}`
      : `0 of ${number(page.total)}`;
    const off = (label) => el("span", { class: "disabled" }, label);
    const links = [];
    if (view.cursor) {
      const previous = view.back.length ? view.back[view.back.length - 1] : null;
      links.push(nav(href(view, { cursor: null, back: [], job: null }), { class: "page-first" },
        "First"));
      links.push(nav(href(view, { cursor: previous === "0" ? null : previous,
        back: view.back.slice(0, -1), job: null }), { class: "page-prev" }, "\u2039 Previous"));
    } else {
      links.push(off("First"), off("\u2039 Previous"));
    }
    if (page.next_cursor) {
      const back = [...view.back, view.cursor || "0"].slice(-MAX_BACK);
      links.push(nav(href(view, { cursor: page.next_cursor, back, job: null }),
        { class: "page-next" }, "Next \u203a"));
    } else {
      links.push(off("Next \u203a"));
    }
    return el("div", { class: "pager" }, el("span", { class: "where" }, where), links);
  }

  function drawDead(page) {
    const rows = page.jobs.map((job) =>
      el("tr", {},
        td({ class: "id" }, jobLink(job), el("span", { class: "sub" }, printable(job.queue),
          " \u00b7 ", tries(job), " tries")),
        td({}, time(job.finished_at)), errorCell(job)));
    const kids = [table("dlq", ["ID", "DIED", "LAST ERROR"], rows, "No dead jobs.")];
    const more = page.total - page.jobs.length;
    if (more > 0) {
      const url = href(view, { state: "dead", cursor: null, back: [], job: null });
      kids.push(el("p", { class: "more" }, nav(url, {}, `${number(more)} more in the dead tab \u203a`)));
    }
    show(parts.dlq, kids);
    parts.dlqCount.textContent = number(page.total);
  }

  function chart(done, failed) {
    const slots = Math.max(done.length, 1);
    const slot = CHART.w / slots;
    const peak = Math.max(...done, ...failed, 1);
    const height = CHART.h - CHART.top - CHART.axis;
    const base = CHART.h - CHART.axis;
    const node = svg("svg", { class: "chart", viewBox: `0 0 ${CHART.w} ${CHART.h}`, role: "img",
      "aria-label": `Completed and failed runs per minute, last ${slots} minutes` });
    node.append(svg("line", { class: "axis", x1: 0, y1: base, x2: CHART.w, y2: base }));
    node.append(svg("line", { class: "grid", x1: 0, y1: CHART.top, x2: CHART.w, y2: CHART.top }));
    node.append(svg("text", { class: "peak", x: 2, y: CHART.top - 4 }, `${number(peak)}/min`));
    done.forEach((ok, index) => {
      const x = index * slot;
      for (const [offset, value, cls] of [[0.18, ok, "bar-ok"], [0.52, failed[index] || 0, "bar-bad"]]) {
        const h = Math.round((value / peak) * height * 10) / 10;
        node.append(svg("rect", { class: cls, x: (x + slot * offset).toFixed(1),
          y: (base - h).toFixed(1), width: (slot * 0.3).toFixed(1), height: h },
          svg("title", {}, `${value} ${cls.slice(4)}`)));
      }
    });
    const half = Math.floor(slots / 2);
    for (const [index, label] of [[0, `-${slots - 1}m`], [half, `-${slots - 1 - half}m`]]) {
      node.append(svg("text", { class: "tick", x: (index * slot + 2).toFixed(1), y: CHART.h - 3 },
        label));
    }
    node.append(svg("text", { class: "tick end", x: CHART.w - 2, y: CHART.h - 3 }, "now"));
    return node;
  }

  const ms = (value) =>
    value === null || value === undefined ? "\u2013"
      : value >= 1000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;

  function drawThroughput(stats) {
    const rates = stats.throughput;
    const latency = stats.latency_ms || {};
    const wait = latency.queue_wait || {};
    const run = latency.run_time || {};
    show(parts.throughput,
      el("p", { class: "rates" },
        el("span", { class: "rate ok" }, el("b", {}, number(rates.completed_last_minute)), " done/min"),
        el("span", { class: "rate bad" }, el("b", {}, number(rates.failed_last_minute)), " failed/min")),
      chart(rates.completed_per_minute || [], rates.failed_per_minute || []),
      el("p", { class: "latency", title: `the latest ${number(latency.sample_size)} runs` },
        el("span", {}, "wait p50 ", el("b", {}, ms(wait.p50)), " p95 ", el("b", {}, ms(wait.p95))),
        el("span", {}, "run p50 ", el("b", {}, ms(run.p50)), " p95 ", el("b", {}, ms(run.p95)))));
  }

  function workerMark(worker, staleAfter) {
    if (ACTIVE.has(worker.status) && worker.heartbeat_age_s > staleAfter) {
      return [`${worker.status} STALE`, "ws-stale"];
    }
    return [worker.status, `ws-${worker.status}`];
  }

  function drawWorkers(data) {
    const rows = data.workers.map((worker) => {
      const [word, cls] = workerMark(worker, data.stale_after_s);
      const silent = ["ws-stale", "ws-hung", "ws-lost"].includes(cls);
      const job = worker.current_job ? jobLink({ id: worker.current_job }) : null;
      return el("tr", { class: cls },
        td({}, mono(worker.id), el("span", { class: "sub" },
          `pid ${worker.pid} @ ${printable(worker.host)}`)),
        td({}, el("span", { class: `wstatus ${cls}` }, printable(word)),
          el("span", { class: "sub" }, job)),
        td({ class: silent ? "beat stale" : "beat" }, time(worker.last_heartbeat)),
        td({ class: "num" }, number(worker.jobs_done)),
        td({ class: "num" + (worker.jobs_failed ? " bad" : "") }, number(worker.jobs_failed)));
    });
    show(parts.workers, table("workers",
      ["WORKER", "STATUS / JOB", "HEARTBEAT", "DONE", "FAILED"], rows,
      "No workers. Start a pool: queuectl worker start"));
  }

  function drawQueues(data) {
    const rows = data.queues.map((queue) => {
      const limit = queue.max_running === null ? "" : ` / ${number(queue.max_running)}`;
      const waited = queue.oldest_waiting_s === null ? "" : humanSeconds(queue.oldest_waiting_s);
      return el("tr", { class: queue.paused ? "q-paused" : "q-open" },
        td({}, mono(queue.name)),
        td({}, el("span", { class: "qstate" }, queue.paused ? "paused" : "open")),
        td({ class: "num" }, number(queue.waiting)),
        td({ class: "num" }, number(queue.running) + limit),
        td({ class: "num" }, waited));
    });
    show(parts.queues, table("queues", ["QUEUE", "STATE", "WAITING", "RUN / LIMIT", "WAITED"],
      rows, "No queues yet."));
  }

  function drawSchedules(data) {
    const rows = data.schedules.map((schedule) => {
      let when;
      if (schedule.paused) when = el("span", { class: "scstate" }, "paused");
      else if (schedule.next_at) {
        when = el("time", { "data-kind": "until", datetime: schedule.next_at,
          title: schedule.next_at }, timeText("until", schedule.next_at));
      } else when = dim("never");
      const last = schedule.last_job;
      let lastCell;
      if (last) lastCell = [jobLink(last), el("span", { class: "sub" }, state(last.state))];
      else if (schedule.last_job_id) {
        lastCell = [mono(schedule.last_job_id), el("span", { class: "sub" }, "gone")];
      } else lastCell = [dim("\u2013")];
      return el("tr", { class: schedule.paused ? "sc-paused" : "sc-active" },
        td({}, mono(schedule.name), el("span", { class: "sub" },
          `${printable(schedule.description)} \u00b7 ${printable(schedule.timezone)}`)),
        td({ class: "next" }, when),
        td({}, ...lastCell));
    });
    show(parts.schedules, table("schedules", ["SCHEDULE", "NEXT JOB", "LAST JOB"], rows,
      "No schedules. Add one: queuectl schedule add"));
  }

  // -- a job's detail ----------------------------------------------------------------------
  function field(name, ...value) {
    return [el("dt", {}, name), el("dd", {}, ...value)];
  }

  // Jobs a job runs after, or that run after it: each a link to its page, with its state.
  function linked(jobs) {
    return el("span", { class: "linked" }, ...jobs.flatMap((job, n) => [
      n ? ", " : "",
      nav(href(view, { job: job.id }), { class: "job-link mono" }, printable(job.id)),
      " ",
      job.state ? state(job.state) : dim("deleted"),
    ]));
  }

  function attempt(a) {
    const code = a.exit_code;
    const exitCls = code === null || code === undefined ? "exit" : code === 0 ? "exit ok" : "exit bad";
    let took = "";
    if (a.started_at && a.finished_at) {
      took = `${((Date.parse(a.finished_at) - Date.parse(a.started_at)) / 1000).toFixed(1)} s`;
    }
    let output;
    if (a.output === null || a.output === undefined) {
      output = el("p", { class: "dim" }, "Output hidden: this server needs a token to show it.");
    } else if (a.output) {
      output = el("pre", { class: "output" }, printable(a.output, false));
    } else {
      output = el("p", { class: "dim" }, "No output.");
    }
    return el("li", { class: "attempt" },
      el("div", { class: "attempt-head" }, el("b", {}, `#${a.number}`), " ",
        el("span", { class: `outcome oc-${a.outcome}` }, printable(a.outcome)), " ",
        el("span", { class: exitCls }, `exit ${code === null || code === undefined ? "\u2013" : code}`),
        " ", dim("worker"), " ", mono(a.worker_id), " ", dim("started"), " ", time(a.started_at),
        " ", dim(took)),
      a.error ? el("div", { class: "error" }, printable(a.error, false)) : null,
      output);
  }

  // -- live output: the running attempt's, streamed as the pool stores it -------------------
  // One stream at a time (GET /output/ID?follow=1); the browser resumes a dropped one where
  // it was (Last-Event-ID). Its <pre> outlives the detail's redraws, and stays at the end
  // unless the reader scrolled up.
  let live = null;

  function stopLive() {
    if (live) live.stream.close();
    live = null;
  }

  function liveOutput(job) {
    if (live && live.id === job.id) return live.node;
    stopLive();
    const node = el("pre", { class: "output live", tabindex: "0", "data-keep": "1" });
    const stream = openStream("/output/" + encodeURIComponent(job.id) + "?follow=1", {
      output(text) {
        const data = JSON.parse(text);
        const atEnd = node.scrollHeight - node.scrollTop - node.clientHeight < 4;
        if (data.started) node.replaceChildren();
        if (data.skipped) {
          node.append(el("span", { class: "dim" }, `[${data.skipped} bytes not kept]\n`));
        }
        for (const piece of data.chunks) {
          const shown = printable(piece.text, false);
          node.append(piece.stream === "stderr" ? el("span", { class: "stderr" }, shown)
            : document.createTextNode(shown));
        }
        if (atEnd) node.scrollTop = node.scrollHeight;
      },
      end() {
        // Its last pieces are in: the stored attempt may take its place now.
        stream.close();
        if (live && live.stream === stream) live.ended = true;
        if (cache.job && cache.job.id === job.id) drawDetail(cache.job, false);
      },
      down() {
        // No end is coming over a stream that broke: once the job reads as finished, its
        // stored attempt is what there is.
        if (!cache.job || cache.job.id !== job.id || cache.job.state === "processing") return;
        if (live && live.stream === stream) live.ended = true;
        drawDetail(cache.job, false);
      },
    });
    live = { id: job.id, node, stream, ended: false };
    return node;
  }

  // A running job's output is followed until its stream has told the end, even once the job
  // reads as finished: the last lines printed are seen where the others were.
  const following = (job) =>
    job.state === "processing" || (live !== null && live.id === job.id && !live.ended);

  function drawDetail(job, missing) {
    const layer = parts.detail;
    if (view.job === null) {
      stopLive();
      layer.hidden = true;
      layer.replaceChildren();
      return;
    }
    if (!job || !following(job)) stopLive();
    const closeUrl = href(view, { job: null });
    const close = nav(closeUrl, { class: "close" }, "Close \u00d7");
    const backdrop = nav(closeUrl, { class: "backdrop", "aria-label": "Close" });
    let body;
    if (missing) {
      body = [el("p", { class: "empty" }, "No job with the id ", el("code", {}, printable(view.job)), ".")];
    } else if (!job) {
      body = [el("p", { class: "empty" }, "Loading\u2026")];
    } else {
      const fields = [
        field("state", state(job.state)),
        field("queue", mono(job.queue)),
        field("command", el("code", { class: "wrap" }, printable(job.command, false))),
      ];
      if (job.type) {
        fields.push(field("type", mono(job.type)));
        fields.push(field("payload", el("code", { class: "wrap" },
          printable(JSON.stringify(job.payload), false))));
      }
      if (job.cwd) fields.push(field("directory", mono(job.cwd)));
      if (job.env) { // masked as the API gives it
        const shown = Object.entries(job.env).map(([name, value]) => `${name}=${value}`);
        fields.push(field("environment", el("code", { class: "wrap" },
          printable(shown.join(" "), false))));
      }
      fields.push(
        field("tries", tries(job), ` (max retries ${job.max_retries})`),
        field("priority", String(job.priority)),
        field("run at", time(job.run_at), " ", nextRun(job)),
        field("created", time(job.created_at)),
        field("updated", time(job.updated_at)));
      if (job.worker_id) fields.push(field("worker", mono(job.worker_id)));
      if (job.state === "processing") { // its attempt is recorded when it ends
        fields.push(field("running", "since ", time(job.claimed_at)));
      }
      if (job.exit_code !== null && job.exit_code !== undefined) {
        fields.push(field("exit code", String(job.exit_code)));
      }
      if (job.last_error) {
        fields.push(field("last error", el("span", { class: "error" }, printable(job.last_error))));
      }
      if (job.after && job.after.length) {
        fields.push(field(job.after_any_end ? "after (any end)" : "after", linked(job.after)));
      }
      if (job.dependents && job.dependents.length) {
        fields.push(field("dependents", linked(job.dependents)));
      }
      const attempts = [...job.attempt_history].reverse().map(attempt);
      body = [
        el("dl", { class: "fields" }, fields.flat()),
        following(job) ? el("h3", {}, `Output of attempt ${job.runs} `,
          dim("as it is printed")) : null,
        following(job) ? liveOutput(job) : null,
        el("h3", {}, "Attempts ", dim("newest first")),
        el("ol", { class: "attempts" },
          attempts.length ? attempts : el("p", { class: "empty" },
            job.state === "processing" ? "None has ended yet." : "Not run yet.")),
      ];
    }
    const title = job ? ["Job ", mono(job.id)] : ["Job"];
    const opened = layer.hidden;
    show(layer, backdrop, el("aside", { class: "panel", "aria-label": "Job detail" },
      el("div", { class: "panel-head" }, el("h2", {}, ...title), close), ...body));
    layer.hidden = false;
    if (opened) layer.querySelector(".close").focus({ preventScroll: true });
  }

  // -- reading the API ---------------------------------------------------------------------
  class Failure extends Error {
    constructor(message, status) {
      super(message);
      this.status = status;
    }
  }

  // -- signing in: a token kept for this tab -------------------------------------------------
  // Where reads need a token, the server sends this page with a sign-in form and no figures.
  // The token typed there is kept in the tab's sessionStorage (gone when the tab is closed)
  // and sent in the Authorization header of every request, streams included: it never goes
  // into an address, so no history, log or Referer holds it.
  const TOKEN_KEY = "queuectl-token";
  const needsSignIn = root.dataset.signIn === "1";
  let token = null;
  if (needsSignIn) {
    try {
      token = sessionStorage.getItem(TOKEN_KEY);
    } catch {
      token = null; // storage refused (a private mode): signing in lasts until a reload
    }
  }

  function withToken(headers) {
    return token ? { ...headers, Authorization: "Bearer " + token } : headers;
  }

  function showSignIn(message) {
    root.dataset.signIn = "1";
    signIn.section.hidden = false;
    signIn.out.hidden = true;
    signIn.error.hidden = !message;
    signIn.error.textContent = message || "";
    parts.live.className = "live offline";
    parts.live.textContent = "\u25cf signed out";
    signIn.input.focus();
  }

  function forgetToken(message) {
    token = null;
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // nothing was kept
    }
    stopStreams();
    showSignIn(message);
  }

  if (signIn.form) {
    signIn.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const given = signIn.input.value.trim();
      if (!given) return;
      token = given;
      try {
        await getJSON("/status");
      } catch (error) {
        token = null;
        showSignIn(error.status === 401 ? "That token is not known here."
          : `Could not sign in: ${error.message}.`);
        return;
      }
      try {
        sessionStorage.setItem(TOKEN_KEY, given);
      } catch {
        // kept in memory only: a reload asks again
      }
      signIn.input.value = "";
      signIn.section.hidden = true;
      delete root.dataset.signIn;
      begin();
    });
  }
  if (signIn.out) {
    signIn.out.addEventListener("click", () => {
      forgetToken("");
      location.replace(href(view, { job: null }));
    });
  }

  async function getJSON(path) {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
    let response;
    try {
      response = await fetch(path, { cache: "no-store", signal: abort.signal,
        headers: withToken({ Accept: "application/json" }) });
    } catch (error) {
      const why = error.name === "AbortError" ? "no answer in 5 s" : "cannot reach the server";
      throw new Failure(why, 0);
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      const said = body && typeof body.error === "string" ? body.error : response.statusText;
      if (response.status === 401 && token) forgetToken("The server no longer takes that token.");
      throw new Failure(`the server answered ${response.status}: ${said}`, response.status);
    }
    const date = Date.parse(response.headers.get("date") || "");
    if (!Number.isNaN(date) && !heartbeatClock) {
      const skew = date - Date.now();
      clockOffset = Math.abs(skew) > 1500 ? skew : 0; // the header counts whole seconds
    }
    return body;
  }

  // -- server-sent events, read with fetch so that a token can go in a header ----------------
  // `handlers` has a function per event name (given the data), and `open` and `down`. A
  // stream the server ends (its five minutes are up) or that drops is opened again after the
  // server's `retry`, from the last event id (Last-Event-ID), until it is closed.
  const streams = new Set();

  function openStream(path, handlers) {
    const stream = { closed: false, abort: null, lastId: null, retryMs: 1000 };
    stream.close = () => {
      stream.closed = true;
      streams.delete(stream);
      if (stream.abort) stream.abort.abort();
    };
    streams.add(stream);
    (async () => {
      while (!stream.closed) {
        stream.abort = new AbortController();
        try {
          const headers = withToken({ Accept: "text/event-stream" });
          if (stream.lastId !== null) headers["Last-Event-ID"] = stream.lastId;
          const response = await fetch(path, { cache: "no-store", headers,
            signal: stream.abort.signal });
          if (!response.ok || !response.body) {
            if (response.status === 401 && token) {
              forgetToken("The server no longer takes that token.");
            }
            if (response.status === 503) { // too many streams: as long as it says, at least
              const after = Number(response.headers.get("retry-after"));
              stream.retryMs = Math.max(stream.retryMs, (after > 0 ? after : 5) * 1000);
            }
            throw new Failure(`the server answered ${response.status}`, response.status);
          }
          if (handlers.open) handlers.open();
          await readEvents(response.body, stream, handlers);
          if (handlers.down && !stream.closed) handlers.down(new Failure("stream ended", 0));
        } catch (error) {
          if (stream.closed) return;
          if (handlers.down) handlers.down(error);
          // A refusal that asking again will not change (a 404, a 401): no more tries.
          if (error.status >= 400 && error.status < 500) {
            stream.close();
            return;
          }
        }
        await new Promise((resolve) => setTimeout(resolve, stream.retryMs));
      }
    })();
    return stream;
  }

  function stopStreams() {
    for (const stream of [...streams]) stream.close();
    live = null;
    events = null;
    eventsUp = false;
  }

  async function readEvents(body, stream, handlers) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let name = "message";
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done || stream.closed) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line === "") { // the end of an event
          const handler = handlers[name];
          if (data.length && handler) handler(data.join("\n"));
          name = "message";
          data = [];
          if (stream.closed) return;
          continue;
        }
        if (line.startsWith(":")) continue; // a comment: the server keeping the line open
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = text;
        else if (field === "data") data.push(text);
        else if (field === "id") stream.lastId = text;
        else if (field === "retry" && /^[0-9]+$/.test(text)) stream.retryMs = Number(text);
      }
    }
  }

  const jobsPath = (state, cursor, limit) => {
    const order = state === "dead" ? "ended" : "newest"; // dead letters by time of death
    const params = new URLSearchParams({ limit: String(limit), order });
    if (state) params.set("state", state);
    if (cursor) params.set("cursor", cursor);
    return "/jobs?" + params.toString();
  };

  function noteClock(workers) {
    const worker = workers.find((w) => !Number.isNaN(Date.parse(w.last_heartbeat)));
    if (!worker) return;
    clockOffset = Date.parse(worker.last_heartbeat) + worker.heartbeat_age_s * 1000 - Date.now();
    heartbeatClock = true;
  }

  const cache = { counts: null, stats: null, statsAt: 0, jobs: null, jobsFor: null, job: null };
  const drawn = {}; // the JSON each part was last drawn from: unchanged parts are left alone
  function changed(part, data) {
    const text = JSON.stringify([data, href({ ...view, job: null })]);
    if (drawn[part] === text) return false;
    drawn[part] = text;
    return true;
  }

  let lastGood = null;
  function setLive(error) {
    const clock = lastGood ? new Date(lastGood).toISOString().slice(11, 19) + " UTC" : null;
    if (error) {
      parts.live.className = "live offline";
      parts.live.textContent = `\u25cf offline \u00b7 last update ${clock || "none"}`;
      parts.note.hidden = false;
      parts.note.textContent = `No update: ${error.message}. Still trying; the figures ` +
        `below are from ${clock || "when the page was loaded"}.`;
    } else {
      parts.live.className = "live on";
      parts.live.textContent = `\u25cf live \u00b7 ${clock}`;
      parts.note.hidden = true;
      parts.note.textContent = "";
    }
  }

  let timer = 0;
  let busy = false;
  let rerun = false;

  async function poll() {
    busy = true;
    const started = Date.now();
    const asked = view;
    const wantStats = !cache.stats || started - cache.statsAt >= STATS_EVERY_MS;
    const wantJob = asked.job;
    try {
      const [counts, jobs, dead, workers, stats, job, queues, schedules] = await Promise.all([
        getJSON("/status"),
        getJSON(jobsPath(asked.state, asked.cursor, PAGE)),
        getJSON(jobsPath("dead", null, DEAD_PAGE)),
        getJSON("/workers?history=0"),
        wantStats ? getJSON("/stats") : Promise.resolve(null),
        wantJob === null ? Promise.resolve(null)
          : getJSON("/jobs/" + encodeURIComponent(wantJob)).catch((error) => {
            if (error.status === 404) return { missing: true };
            throw error;
          }),
        getJSON("/queues"),
        getJSON("/schedules"),
      ]);
      noteClock(workers.workers);
      lastGood = serverNow();
      if (stats) {
        cache.stats = stats;
        cache.statsAt = started;
      }
      cache.counts = counts;
      if (asked === view) {
        cache.jobs = jobs;
        cache.jobsFor = jobsKey(asked);
        cache.job = job && !job.missing ? job : null;
        draw(jobs, dead, workers, job, queues, schedules);
      }
      setLive(null);
    } catch (error) {
      setLive(error instanceof Failure ? error : new Failure(String(error), 0));
      if (!(error instanceof Failure)) console.warn(error);
    } finally {
      busy = false;
      const every = eventsUp ? SLOW_MS : POLL_MS;
      const wait = rerun ? 0 : Math.max(100, every - (Date.now() - started));
      rerun = false;
      // A tab out of sight asks nothing of the server; it reads again when shown.
      timer = document.hidden || (needsSignIn && !token) ? 0 : setTimeout(poll, wait);
    }
  }

  function draw(jobs, dead, workers, job, queues, schedules) {
    if (changed("queues", queues)) drawQueues(queues);
    if (changed("schedules", schedules)) drawSchedules(schedules);
    if (changed("counts", cache.counts)) drawCounts(cache.counts);
    if (cache.stats && changed("stats", cache.stats)) drawThroughput(cache.stats);
    if (changed("jobs", jobs)) drawJobs(jobs);
    if (changed("dead", dead)) drawDead(dead);
    drawWorkers(workers); // heartbeats move every time
    if (changed("job", job)) drawDetail(job && !job.missing ? job : null, Boolean(job && job.missing));
  }

  function pollSoon() {
    if (needsSignIn && !token) return;
    if (busy) {
      rerun = true;
      return;
    }
    clearTimeout(timer);
    if (document.hidden) return; // read when shown again
    poll();
  }

  // The queue's changes, as the server hears of them: each one is a read (the server tells
  // at most two a second). While they cannot come, the page polls.
  let eventsUp = false;
  let events = null;

  function listen() {
    if (events || document.hidden) return;
    events = openStream("/events", {
      open() {
        eventsUp = true;
      },
      change() {
        pollSoon();
      },
      down() {
        eventsUp = false;
        pollSoon();
      },
    });
  }

  function begin() {
    if (token) signIn.out.hidden = false;
    listen();
    pollSoon();
  }

  // -- navigation: links carry the view in their URL; with the script they redraw in place ---
  function go(next, push) {
    const sameJob = next.job === view.job;
    view = next;
    if (push) history.pushState(null, "", href(view));
    if (cache.counts) drawCounts(cache.counts);
    if (cache.jobsFor === jobsKey(view)) drawJobs(cache.jobs);
    else parts.jobs.classList.add("loading");
    if (!sameJob) {
      cache.job = null;
      delete drawn.job;
    }
    drawDetail(sameJob ? cache.job : null, false);
    pollSoon();
  }

  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("a[data-nav]") : null;
    if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey ||
        event.altKey) return;
    const url = new URL(link.href, location.href);
    if (url.origin !== location.origin || url.pathname !== location.pathname) return;
    event.preventDefault();
    go(viewFrom(url.search), true);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && view.job !== null) go({ ...view, job: null }, true);
  });
  window.addEventListener("popstate", () => go(viewFrom(location.search), false));
  // A tab out of sight keeps no stream open (a browser opens six at most to one server) and
  // reads nothing; shown again, it listens and reads at once.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      if (events) events.close();
      events = null;
      eventsUp = false;
    } else if (!needsSignIn || token) {
      listen();
      pollSoon();
    }
  });

  // Ages and countdowns tick between polls, and on while the server is away.
  setInterval(() => {
    for (const node of document.querySelectorAll("time[data-kind]")) {
      const text = timeText(node.dataset.kind, node.getAttribute("datetime"));
      if (node.textContent !== text) node.textContent = text;
    }
  }, 1000);

  if (needsSignIn && !token) showSignIn("");
  else {
    if (signIn.section) signIn.section.hidden = true;
    delete root.dataset.signIn;
    begin();
  }
})();
