"""The web dashboard's Schedules card in a real browser: schedules added, run and paused from
the CLI show up live, with a countdown to the next job and the last job's state."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect
from test_http_browser import (  # the browser tests' server, browser and page fixtures
    WAIT_MS,
    DashboardServer,
    Watched,
    browser,
    new_page,
    open_dashboard,
    server,
)

from helpers import RunCli

pytestmark = pytest.mark.slow
__all__ = ["browser", "new_page", "server"]  # fixtures, used by name

HOSTILE = "<b>[red]x[/red]"


def test_schedules_appear_live_with_their_next_and_last_job(
    server: DashboardServer, new_page: Callable[[], Watched], run_cli: RunCli
) -> None:
    watched = new_page()
    page = open_dashboard(watched, server.url)
    card = page.locator("#schedules")
    expect(card).to_contain_text("No schedules.")

    added = run_cli(
        "schedule",
        "add",
        "nightly",
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--command",
        "true",
    )
    assert added.returncode == 0, added.stderr
    row = card.locator("tr", has_text="nightly")
    expect(row).to_contain_text("At 02:00 AM · Europe/Berlin", timeout=WAIT_MS)
    expect(row.locator("time[data-kind=until]")).to_contain_text("in ", timeout=WAIT_MS)

    ran = run_cli("schedule", "run", "nightly", "--quiet")
    job_id = ran.stdout.strip()
    link = row.get_by_role("link", name=job_id, exact=True)
    expect(link).to_be_visible(timeout=WAIT_MS)
    expect(row.locator(".state")).to_have_text("pending")

    assert run_cli("schedule", "pause", "nightly").returncode == 0
    expect(row.locator(".scstate")).to_have_text("paused", timeout=WAIT_MS)

    assert run_cli("schedule", "add", HOSTILE, "--every", "5m", "--command", "true").returncode == 0
    hostile = card.locator("tr", has_text=HOSTILE)
    expect(hostile).to_be_visible(timeout=WAIT_MS)  # shown as text, never as markup
    assert page.locator("#schedules b").count() == 0

    link.click()  # the last job's detail, in place
    expect(page.locator("#detail .panel h2")).to_have_text(f"Job {job_id}", timeout=WAIT_MS)
    assert watched.dialogs == [] and watched.errors == []
