"""Marks in the console: space, a range, every job the view matches (over pages); retry,
cancel and delete then act on exactly the marked ids, after a confirmation with the count."""

from __future__ import annotations

from textual.widgets import DataTable

from queuectl_tui.models import JobSpec, JobState
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen


async def test_cancelling_three_marked_jobs_cancels_exactly_those(
    console, demo_store, settle, wait_for
) -> None:
    async with console() as (app, pilot):
        await pilot.press("2")  # pending
        await settle(pilot)
        table = app.table_for(Pane.JOBS)
        pending = list(table.keys)
        assert len(pending) == 4
        await pilot.press("space", "down", "space", "space")  # the 1st, 3rd and 4th
        await settle(pilot)
        chosen = [pending[0], pending[2], pending[3]]
        assert list(app.marks) == chosen
        assert [table.cells_of(key)[0].plain for key in pending] == ["●", "", "●", "●"]
        await pilot.press("c")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text == "Cancel the 3 marked jobs?"
        await pilot.press("y")
        await wait_for(
            pilot, lambda: all(demo_store.get(i).state is JobState.CANCELLED for i in chosen)
        )
        assert demo_store.get(pending[1]).state is JobState.PENDING
        await wait_for(pilot, lambda: not app.marks)


async def test_marking_every_matching_job_reaches_past_the_page(
    make_console, demo_store, settle, wait_for
) -> None:
    for index in range(30):
        demo_store.enqueue(JobSpec(id=f"batch-{index:02d}", command="true"), 3, 1)
    app = make_console(page_size=10)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"batch-", "enter")
        await settle(pilot)
        assert len(app.table_for(Pane.JOBS).keys) == 10  # one page of 30
        await pilot.press("asterisk")
        await wait_for(pilot, lambda: len(app.marks) == 30)
        await settle(pilot)
        await pilot.press("D")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text == "Delete the 30 marked jobs?"
        await pilot.press("y")
        await wait_for(pilot, lambda: not demo_store.list_jobs(search="batch-", limit=100))
        assert demo_store.get("email-digest-78") is not None  # not matched, not touched


async def test_a_range_and_escape(console, settle) -> None:
    async with console() as (app, pilot):
        table = app.table_for(Pane.JOBS)
        keys = table.keys
        await pilot.press("space", "down", "down", "v")  # space moved down a row
        await settle(pilot)
        assert list(app.marks) == [keys[0], keys[1], keys[2], keys[3]]
        assert "4 marked" in str(app.query_one("#jobs-status").render())
        await pilot.press("escape")  # the marks go first, the filter stays
        await settle(pilot)
        assert not app.marks and table.cells_of(keys[0])[0].plain == ""
        await pilot.press("c")  # no marks: the selected job alone
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen) and "marked" not in dialog.title_text


async def test_error_groups_open_with_e_and_a_group_is_retried_in_two_keys(
    console, demo_store, settle, wait_for
) -> None:
    from queuectl_tui.tui.screens.error_groups import ErrorGroupsScreen

    groups = demo_store.error_groups(JobState.DEAD)
    assert groups and sum(group.count for group in groups) == 4  # every dead demo job
    async with console(size=(120, 30)) as (app, pilot):
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ErrorGroupsScreen)
        assert [group.fingerprint for group in screen.groups] == [g.fingerprint for g in groups]
        assert screen.query_one("#groups", DataTable).row_count == len(groups)
        await pilot.press("r")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        noun = "job" if groups[0].count == 1 else "jobs"
        assert dialog.title_text == f"Retry the group's {groups[0].count} dead {noun}?"
        ids = demo_store.error_group_ids(JobState.DEAD, groups[0].fingerprint)
        assert len(ids) == groups[0].count
        await pilot.press("y")
        await wait_for(pilot, lambda: all(demo_store.get(i).state is JobState.PENDING for i in ids))


async def test_a_search_shows_its_count_no_matches_and_its_mistakes(console, settle) -> None:
    async with console(size=(140, 30)) as (app, pilot):
        status = app.query_one("#jobs-status")
        await pilot.press("slash", *"state:pending email-digest", "enter")
        await settle(pilot)
        assert sorted(app.table_for(Pane.JOBS).keys) == ["email-digest-78", "email-digest-79"]
        assert "2 matching state:pending email-digest" in str(status.render())
        await pilot.press("slash", "ctrl+u", *"nothing-like-it", "enter")
        await settle(pilot)
        assert app.table_for(Pane.JOBS).keys == []
        assert "no matches for nothing-like-it" in str(status.render())
        await pilot.press("slash", "ctrl+u", *"stat:dead", "enter")
        await settle(pilot)
        assert "did you mean 'state:'?" in str(status.render())


async def test_a_search_with_qualifiers_marks_what_it_shows_and_a_quick_d_waits_for_it(
    console, demo_store, settle, wait_for
) -> None:
    dead = [job.id for job in demo_store.list_jobs(JobState.DEAD, limit=1000)]
    assert len(dead) > 1
    async with console() as (app, pilot):
        await pilot.press("slash", *"state:dead", "enter")
        await settle(pilot)
        await pilot.press("asterisk", "D")  # in one burst: D acts on what * marks
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_text == f"Delete the {len(dead)} marked jobs?"
        assert sorted(app.marks) == sorted(dead)
