"""The web dashboard's page and static files, through Starlette's test client: the headers,
the types, what may and may not be served, escaping, paging and the job detail."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from store_helpers import claim, register, settle

from queuectl_tui.config import ApiToken, Settings, load_settings
from queuectl_tui.http.app import CONTENT_SECURITY_POLICY, create_app
from queuectl_tui.http.context import ServeOptions
from queuectl_tui.http.page import JOBS_PAGE
from queuectl_tui.models import JobSpec, Outcome, WorkerStatus
from queuectl_tui.presentation import STATE_STYLES, WORKER_STYLES
from queuectl_tui.store import SQLiteStore, Store
from queuectl_tui.timeutil import now_ms

HOSTILE_ID = "<script>alert(1)</script>"
HOSTILE_COMMAND = "echo [red]x[/red] <b>\"quoted\" & 'single'</b>"
HOSTILE_ERROR = "exit 3: <img src=x onerror=alert(1)> [bold]loud[/bold]\x1b[2J"
HOSTILE_OUTPUT = "</pre><script>alert(2)</script>\n\x1b[31mred?\x1b[0m\n"
STATIC = Path(__file__).parent.parent / "queuectl_tui" / "http" / "static"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.chdir(tmp_path)  # no config.json of the developer's is read
    return load_settings(db_path=str(tmp_path / "q.db"), env={})


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    opened = SQLiteStore(settings.database)
    yield opened
    opened.close()


@pytest.fixture
def client(settings: Settings, store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def dead_job(store: Store, job_id: str, command: str, error: str, output: str) -> None:
    """A job whose one allowed run failed: dead, with `error` and `output` recorded."""
    now = now_ms()
    store.enqueue(JobSpec(id=job_id, command=command, max_retries=0), 3, now - 5000)
    job = claim(store, "w-test", now - 4000)
    assert job is not None and job.id == job_id
    settle(store, job, Outcome.FAILED, now - 3000, exit_code=3, error=error, output=output)


def test_page_is_html_with_the_security_policy_and_no_inline_code(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    page = response.text
    # The CSP allows only the server's own files: every script has a src, no inline style.
    assert re.findall(r"<script\b[^>]*>", page) == ['<script src="/static/dashboard.js" defer>']
    assert '<link rel="stylesheet" href="/static/dashboard.css">' in page
    assert "<style" not in page
    assert not re.search(r"\sstyle=", page)
    assert not re.search(r"\son[a-z]+=", page)
    assert "http://" not in page and "https://" not in page  # no CDN


def test_first_view_is_complete_without_javascript(client: TestClient, store: Store) -> None:
    now = now_ms()
    store.enqueue(JobSpec(id="waiting-1", command="echo hi", queue="emails"), 3, now)
    register(store, "w-live", status=WorkerStatus.BUSY, now=now)
    dead_job(store, "died-1", "false", "exit code 1: disk full", "")
    page = client.get("/").text
    for part in ('id="counts"', 'id="tabs"', 'id="jobs"', 'id="throughput"', 'id="workers"'):
        assert part in page
    assert '<span class="n">1</span><span class="label">pending</span>' in page
    assert '<span class="n">1</span><span class="label">dead</span>' in page
    assert "waiting-1" in page and "emails" in page and "echo hi" in page
    assert "w-live" in page and "ws-busy" in page
    assert "exit code 1: disk full" in page  # the dead letters card, with the last error
    assert page.count("<rect ") == 30  # 15 minutes of completed and failed bars


def test_a_silent_worker_is_marked_stale(client: TestClient, store: Store) -> None:
    register(store, "w-silent", status=WorkerStatus.IDLE, now=now_ms() - 120_000)
    page = client.get("/").text
    assert "idle STALE" in page and 'class="ws-stale"' in page


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("dashboard.js", "text/javascript; charset=utf-8"),
        ("dashboard.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_static_files_are_served_with_their_types(client: TestClient, name: str, kind: str) -> None:
    response = client.get(f"/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == kind
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.content == (STATIC / name).read_bytes()


def test_an_unknown_static_name_is_404(client: TestClient) -> None:
    response = client.get("/static/nope.js")
    assert response.status_code == 404
    assert response.json()["error"] == "no such file: /static/nope.js"


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/..%2Fapp.py",
        "/static/%2e%2e%2fapp.py",
        "/static/%2e%2e/%2e%2e/pyproject.toml",
        "/static/%2e%2e",  # '..' itself, which a client would otherwise resolve away
        "/static/%2e",
        "/static/.hidden",
        "/static/..%5Capp.py",
        "/static/dashboard.js%00.css",
        "/static/%2Fetc%2Fpasswd",
        "/static/__init__.py",
    ],
)
def test_paths_outside_the_static_files_are_refused(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert "create_app" not in response.text and "root:" not in response.text


def test_hostile_text_is_escaped_on_the_page(client: TestClient, store: Store) -> None:
    dead_job(store, HOSTILE_ID, HOSTILE_COMMAND, HOSTILE_ERROR, HOSTILE_OUTPUT)
    page = client.get("/").text
    assert HOSTILE_ID not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "[red]x[/red]" in page
    assert "&lt;b&gt;&quot;quoted&quot; &amp; &#x27;single&#x27;&lt;/b&gt;" in page
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; [bold]loud[/bold]\\x1b[2J" in page
    assert "\x1b" not in page
    # The link to its detail carries the id URL-encoded.
    assert 'href="/?job=%3Cscript%3Ealert%281%29%3C%2Fscript%3E"' in page


def test_hostile_text_is_escaped_in_the_job_detail(client: TestClient, store: Store) -> None:
    dead_job(store, HOSTILE_ID, HOSTILE_COMMAND, HOSTILE_ERROR, HOSTILE_OUTPUT)
    page = client.get("/", params={"job": HOSTILE_ID}).text
    assert '<aside class="panel" aria-label="Job detail">' in page
    assert "<script>alert" not in page and "</pre><script>" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;\n\\x1b[31mred?\\x1b[0m" in page
    assert '<span class="outcome oc-failed">failed</span>' in page
    assert '<span class="exit bad">exit 3</span>' in page


def test_an_unknown_job_shows_a_note(client: TestClient) -> None:
    page = client.get("/", params={"job": "<nope>"}).text
    assert "No job with the id <code>&lt;nope&gt;</code>." in page


def test_the_page_needs_a_token_when_tokens_are_set(settings: Settings, store: Store) -> None:
    dead_job(store, "secretive", "false", "exit 1", "password=hunter2\n")
    secret = "ops-read-token-4b9e0d2a7c61f35e88"
    guarded = replace(settings, tokens=(ApiToken("ops", secret, False),))
    with TestClient(create_app(guarded)) as client:
        refused = client.get("/", params={"job": "secretive"})
        assert refused.status_code == 401 and "hunter2" not in refused.text
        assert 'id="sign-in-form"' in refused.text and "secretive" not in refused.text
        with_token = client.get(
            "/", params={"job": "secretive"}, headers={"Authorization": f"Bearer {secret}"}
        )
        assert "password=hunter2" in with_token.text
        # A browser's way in: the token once in the address, then a cookie.
        way_in = client.get("/", params={"token": secret}, follow_redirects=False)
        assert way_in.status_code == 303 and way_in.headers["location"] == "/"
        cookie = way_in.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert "password=hunter2" in client.get("/", params={"job": "secretive"}).text
        assert client.get("/stats").status_code == 200  # the page's fetches carry it
        assert client.post("/jobs", json={"type": "x"}).status_code == 401  # reads only
        client.cookies.clear()
        assert client.get("/").status_code == 401
        wrong = client.get("/", params={"token": "x" * 40}, follow_redirects=False)
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers


def job_ids(page: str) -> list[str]:
    return re.findall(r'<tr class="row [^"]+"><td class="id"><a [^>]*>([^<]+)</a>', page)


def test_pages_go_forward_and_back_by_keyset_cursor(client: TestClient, store: Store) -> None:
    now = now_ms()
    count = JOBS_PAGE * 2 + 3
    for index in range(count):
        store.enqueue(JobSpec(id=f"job-{index:03d}", command="true"), 3, now + index)
    first = client.get("/").text
    newest = [f"job-{index:03d}" for index in reversed(range(count))]
    assert job_ids(first) == newest[:JOBS_PAGE]
    assert f"1&ndash;{JOBS_PAGE} of {count}" in first
    assert '<span class="disabled">&lsaquo; Previous</span>' in first

    def link(page: str, name: str) -> str:
        found = re.search(rf'<a class="page-{name}" href="([^"]+)"', page)
        assert found, f"no {name} link"
        return found.group(1).replace("&amp;", "&")

    second = client.get(link(first, "next")).text
    assert job_ids(second) == newest[JOBS_PAGE : 2 * JOBS_PAGE]
    third = client.get(link(second, "next")).text
    assert job_ids(third) == newest[2 * JOBS_PAGE :]
    assert '<span class="disabled">Next &rsaquo;</span>' in third
    assert job_ids(client.get(link(third, "prev")).text) == job_ids(second)
    assert job_ids(client.get(link(second, "prev")).text) == job_ids(first)
    assert job_ids(client.get(link(third, "first")).text) == job_ids(first)


def test_a_state_tab_lists_that_state_only(client: TestClient, store: Store) -> None:
    store.enqueue(JobSpec(id="still-waiting", command="true"), 3, now_ms())
    dead_job(store, "gone", "false", "exit code 9", "")
    page = client.get("/", params={"state": "dead"}).text
    assert job_ids(page) == ["gone"]
    assert "<th>LAST ERROR</th>" in page  # the dead tab shows errors where commands were
    assert '<a class="tab selected" href="/?state=dead" data-nav aria-current=page>' in page


@pytest.mark.parametrize(
    "query", ["state=bogus", "cursor=-1", "cursor=abc", "back=1,x", "back=" + ",1" * 101]
)
def test_a_malformed_view_is_refused(client: TestClient, query: str) -> None:
    assert client.get("/?" + query).status_code == 422


def test_the_read_only_server_serves_the_dashboard(settings: Settings, store: Store) -> None:
    with TestClient(create_app(settings, ServeOptions(read_only=True))) as client:
        assert client.get("/").status_code == 200
        assert client.get("/static/dashboard.js").status_code == 200
        assert client.post("/jobs", json={"command": "true"}).status_code == 405


def test_the_styles_colour_every_state_and_worker_status() -> None:
    """The console's states and statuses (presentation.py) each have their colour here."""
    css = (STATIC / "dashboard.css").read_text(encoding="utf-8")
    for state in STATE_STYLES:
        assert f".st-{state.value} {{ --c:" in css
    for status in WORKER_STYLES:
        assert f".ws-{status.value}" in css


def test_the_script_never_writes_html_and_only_reads() -> None:
    script = (STATIC / "dashboard.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
    assert "method:" not in script  # fetch() with its default method, GET
