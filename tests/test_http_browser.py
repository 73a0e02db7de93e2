"""The web dashboard in a real browser: `queuectl dashboard --addr` in a subprocess, Debian's
chromium driven by Playwright, jobs enqueued from the CLI while the page is open."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Dialog,
    Page,
    expect,
    sync_playwright,
)

from helpers import RunCli

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000  # generous: a loaded CI machine; the page polls every second
HOSTILE_ID = "<script>alert(1)</script>"
HOSTILE_COMMAND = "echo [red]x[/red]"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class DashboardServer:
    """`queuectl --db DB dashboard --addr 127.0.0.1:PORT`, which a test may stop and start."""

    def __init__(self, db: Path, cwd: Path, env: dict[str, str]) -> None:
        self.db, self.cwd, self.env = db, cwd, env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "queuectl_tui", "--db", str(self.db), "dashboard"]
        self.process = subprocess.Popen(
            [*command, "--addr", f"127.0.0.1:{self.port}"],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as response:
                    if json.load(response) == {"ok": True}:
                        return
            except OSError:
                pass
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode() if self.process.stderr else ""
                pytest.fail(f"the dashboard server exited: {error}")
            if time.monotonic() > deadline:
                pytest.fail("the dashboard server did not answer /healthz in 30 s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                self.process.wait(15)
            if self.process.stderr is not None:
                self.process.stderr.close()
        self.process = None


@pytest.fixture
def server(db_path: Path, tmp_path: Path, cli_env: dict[str, str]) -> Iterator[DashboardServer]:
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    running = DashboardServer(db_path, workdir, cli_env)
    running.start()
    yield running
    running.stop()


def guarded_server(
    db_path: Path, tmp_path: Path, cli_env: dict[str, str], read_token: str
) -> DashboardServer:
    """A dashboard server, started, whose reads need `read_token`."""
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    guarded = DashboardServer(db_path, workdir, cli_env | {"QUEUECTL_READ_TOKEN": read_token})
    guarded.start()
    return guarded


def start_pool(db_path: Path, tmp_path: Path, cli_env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A pool of one worker on the test's database, in a session of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "queuectl_tui", "--db", str(db_path), "worker", "start", "-c", "1"],
        cwd=tmp_path,
        env=cli_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


MISSING = (
    f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); the "
    "browser tests drive it, not Playwright's own browsers"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser | None]:
    """Chromium, or None when it is not installed: each test then fails (not skips) saying so."""
    if not CHROMIUM.exists():
        yield None
        return
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Watched:
    """A page with every dialog and console error it produced."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


@pytest.fixture
def new_page(browser: Browser | None) -> Iterator[Callable[[], Watched]]:
    """Open a page in a fresh browser context (closed after the test)."""
    contexts: list[BrowserContext] = []

    def open_page() -> Watched:
        if browser is None:
            pytest.fail(MISSING)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        return Watched(context.new_page())

    yield open_page
    for context in contexts:
        context.close()


def enqueue(run_cli: RunCli, **job: str) -> None:
    result = run_cli("enqueue", json.dumps(job))
    assert result.returncode == 0, result.stderr


def open_dashboard(watched: Watched, url: str) -> Page:
    page = watched.page
    page.goto(url + "/")
    expect(page.locator("#live")).to_have_class("live on", timeout=WAIT_MS)  # the script polls
    return page


def test_jobs_enqueued_from_the_cli_appear_live_and_literally(
    server: DashboardServer, new_page: Callable[[], Watched], run_cli: RunCli
) -> None:
    watched = new_page()
    page = open_dashboard(watched, server.url)
    expect(page.locator("#jobs")).to_contain_text("No jobs yet.")

    enqueue(run_cli, id="from-cli-1", command="echo hello")
    first = page.locator("#jobs a.job-link", has_text="from-cli-1")
    expect(first).to_be_visible(timeout=WAIT_MS)  # no reload: the page polls
    expect(page.locator("#counts .st-pending .n")).to_have_text("1", timeout=WAIT_MS)

    enqueue(run_cli, id=HOSTILE_ID, command=HOSTILE_COMMAND)
    hostile = page.get_by_role("link", name=HOSTILE_ID, exact=True)
    expect(hostile).to_be_visible(timeout=WAIT_MS)
    row = page.locator("#jobs tr", has=hostile)
    expect(row.locator("td.cmd")).to_have_text(HOSTILE_COMMAND)
    assert page.locator("#dashboard script").count() == 0  # nothing was parsed as markup
    assert page.locator("#jobs [class*='red']").count() == 0  # nor as console markup

    hostile.click()  # its detail, in place
    panel = page.locator("#detail .panel")
    expect(panel.locator("h2")).to_have_text(f"Job {HOSTILE_ID}", timeout=WAIT_MS)
    expect(panel.locator("code.wrap")).to_have_text(HOSTILE_COMMAND)
    assert "job=%3Cscript%3E" in page.url
    page.keyboard.press("Escape")
    expect(page.locator("#detail")).to_be_hidden()

    assert watched.dialogs == []
    assert watched.errors == []


def test_paging_and_a_job_detail_follow_the_queue(
    server: DashboardServer, new_page: Callable[[], Watched], run_cli: RunCli, tmp_path: Path
) -> None:
    watched = new_page()
    lines = [json.dumps({"id": f"bulk-{index:02d}", "command": "true"}) for index in range(20)]
    jobs_file = tmp_path / "jobs.jsonl"
    jobs_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_cli("enqueue", "--file", str(jobs_file)).returncode == 0
    page = open_dashboard(watched, server.url)
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(15)
    expect(rows.first).to_contain_text("bulk-19")  # newest first

    page.locator("#jobs .page-next").click()
    expect(rows).to_have_count(5, timeout=WAIT_MS)
    expect(rows.first).to_contain_text("bulk-04")
    expect(page.locator("#jobs .pager .where")).to_have_text("16\u201320 of 20")
    assert "cursor=" in page.url
    page.locator("#jobs .page-prev").click()
    expect(rows).to_have_count(15, timeout=WAIT_MS)
    expect(rows.first).to_contain_text("bulk-19")

    page.locator("#tabs a", has_text="dead").click()
    expect(page.locator("#jobs")).to_contain_text("No dead jobs.", timeout=WAIT_MS)
    page.go_back()
    expect(rows.first).to_contain_text("bulk-19", timeout=WAIT_MS)

    page.get_by_role("link", name="bulk-07", exact=True).click()
    expect(page.locator("#detail .panel")).to_contain_text("Not run yet.", timeout=WAIT_MS)
    assert watched.errors == []


def test_a_server_that_goes_away_is_noted_and_polling_goes_on(
    server: DashboardServer, new_page: Callable[[], Watched], run_cli: RunCli
) -> None:
    watched = new_page()
    page = open_dashboard(watched, server.url)
    server.stop()
    note = page.locator("#note")
    expect(note).to_be_visible(timeout=WAIT_MS)
    expect(note).to_contain_text("cannot reach the server")
    expect(page.locator("#live")).to_have_class("live offline")

    enqueue(run_cli, id="while-away", command="true")
    server.start()
    expect(note).to_be_hidden(timeout=WAIT_MS)
    expect(page.locator("#jobs a.job-link", has_text="while-away")).to_be_visible()
    # The browser logs each refused connection as an error; nothing else may have failed.
    assert [e for e in watched.errors if "ERR_CONNECTION_REFUSED" not in e] == []
    assert watched.dialogs == []


def test_with_a_token_set_a_browser_may_still_come_in_once_by_the_address_then_by_cookie(
    db_path: Path,
    tmp_path: Path,
    cli_env: dict[str, str],
    new_page: Callable[[], Watched],
    run_cli: RunCli,
) -> None:
    token = "dashboard-read-token-3e7a1f90c24d68b5"
    guarded = guarded_server(db_path, tmp_path, cli_env, token)
    try:
        stranger = new_page().page
        refused = stranger.goto(guarded.url + "/")
        assert refused is not None and refused.status == 401
        expect(stranger.locator("#sign-in-form")).to_be_visible()

        watched = new_page()
        page = watched.page
        page.goto(f"{guarded.url}/?token={token}")
        expect(page.locator("#live")).to_have_class("live on", timeout=WAIT_MS)
        assert page.url == guarded.url + "/"  # the token left the address bar
        [cookie] = page.context.cookies()
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
        assert page.evaluate("document.cookie") == ""  # no script can read it
        enqueue(run_cli, id="behind-a-token", command="true")
        expect(page.locator("#jobs a.job-link", has_text="behind-a-token")).to_be_visible(
            timeout=WAIT_MS
        )  # the page's own fetches carry the cookie
        assert watched.errors == [] and watched.dialogs == []
    finally:
        guarded.stop()


def test_with_a_token_set_a_tab_signs_in_and_the_token_stays_out_of_every_address(
    db_path: Path,
    tmp_path: Path,
    cli_env: dict[str, str],
    new_page: Callable[[], Watched],
    run_cli: RunCli,
) -> None:
    token = "dashboard-read-token-8c2d4e6f10a3b597"
    enqueue(run_cli, id="before-sign-in", command="echo secret-output")
    pool = start_pool(db_path, tmp_path, cli_env)
    guarded = guarded_server(db_path, tmp_path, cli_env, token)
    try:
        watched = new_page()
        page = watched.page
        urls: list[str] = []
        page.on("request", lambda request: urls.append(request.url))
        refused = page.goto(guarded.url + "/")
        assert refused is not None and refused.status == 401
        expect(page.locator("#live")).to_have_text("\u25cf signed out", timeout=WAIT_MS)
        assert "before-sign-in" not in page.content()  # not one figure without the token

        page.fill("#sign-in-token", "not-the-token-at-all-0123456789")
        page.press("#sign-in-token", "Enter")
        expect(page.locator("#sign-in-error")).to_have_text("That token is not known here.")

        page.fill("#sign-in-token", token)
        page.press("#sign-in-token", "Enter")
        expect(page.locator("#live")).to_have_class("live on", timeout=WAIT_MS)
        expect(page.locator("#sign-in")).to_be_hidden()
        link = page.locator("#jobs a.job-link", has_text="before-sign-in")
        expect(link).to_be_visible(timeout=WAIT_MS)
        link.click()  # its output shows: the page reads with the token
        output = page.locator("#detail .attempt pre.output")
        expect(output).to_contain_text("secret-output", timeout=WAIT_MS)

        page.reload()  # the tab keeps it
        expect(page.locator("#live")).to_have_class("live on", timeout=WAIT_MS)
        expect(output).to_contain_text("secret-output", timeout=WAIT_MS)
        enqueue(run_cli, id="after-sign-in", command="true")  # the events reach it too
        expect(page.locator("#jobs a.job-link", has_text="after-sign-in")).to_be_visible(
            timeout=WAIT_MS
        )
        other_tab = page.context.new_page()  # another tab of the same browser has to sign in
        other_tab.goto(guarded.url + "/")
        expect(other_tab.locator("#sign-in-form")).to_be_visible(timeout=WAIT_MS)
        other_tab.close()

        assert page.context.cookies() == []
        assert not [url for url in urls if token in url]
        page.keyboard.press("Escape")  # the detail closes
        page.click("#sign-out")
        expect(page.locator("#sign-in-form")).to_be_visible(timeout=WAIT_MS)
        assert page.evaluate("sessionStorage.length") == 0
        refusals = [e for e in watched.errors if "status of 401" not in e]
        assert refusals == [] and watched.dialogs == []
    finally:
        guarded.stop()
        pool.terminate()
        pool.wait(20)


def test_a_running_job_s_output_appears_in_its_detail_as_it_prints(
    server: DashboardServer,
    new_page: Callable[[], Watched],
    run_cli: RunCli,
    db_path: Path,
    tmp_path: Path,
    cli_env: dict[str, str],
) -> None:
    gate, last = tmp_path / "gate", tmp_path / "last"
    command = (
        "echo compiling; echo 'warning: <b>old</b>' >&2; "
        f"while [ ! -e {gate} ]; do sleep 0.05; done; echo linking; "
        f"while [ ! -e {last} ]; do sleep 0.05; done; echo linked"
    )
    enqueue(run_cli, id="build-7", command=command)
    pool = start_pool(db_path, tmp_path, cli_env)
    try:
        watched = new_page()
        page = open_dashboard(watched, server.url)
        page.goto(server.url + "/?job=build-7")
        live = page.locator("#detail pre.output.live")
        expect(live).to_contain_text("compiling", timeout=WAIT_MS)
        expect(live.locator(".stderr")).to_have_text("warning: <b>old</b>\n")
        assert live.locator("b").count() == 0  # output is text, never markup
        gate.touch()
        expect(live).to_contain_text("linking", timeout=WAIT_MS)  # printed while it runs
        last.touch()
        # Finished: the stored attempt, with every line, takes the place of the stream.
        expect(page.locator("#detail .oc-completed")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#detail .attempt pre.output")).to_contain_text("linking\nlinked")
        expect(live).to_have_count(0)
        assert watched.errors == [] and watched.dialogs == []
    finally:
        pool.terminate()
        pool.wait(20)


def test_queues_show_paused_ones_limits_and_depth(
    server: DashboardServer, new_page: Callable[[], Watched], run_cli: RunCli
) -> None:
    enqueue(run_cli, id="r1", command="true", queue="reports")
    enqueue(run_cli, id="e1", command="true", queue="emails")
    watched = new_page()
    page = open_dashboard(watched, server.url)
    rows = page.locator("#queues tbody tr")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    assert run_cli("queue", "pause", "reports").returncode == 0
    assert run_cli("queue", "limit", "emails", "3").returncode == 0
    reports = page.locator("#queues tr", has_text="reports")
    expect(reports.locator(".qstate")).to_have_text("paused", timeout=WAIT_MS)  # no reload
    expect(page.locator("#queues tr", has_text="emails")).to_contain_text("0 / 3")
    assert watched.errors == []
