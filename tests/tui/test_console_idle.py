"""An idle console does next to nothing each second: ages past a minute move once a minute,
a row is built again only when what it shows of the time changed, and the labels and status
lines are set only when their words change (each setting lays the screen out again)."""

from __future__ import annotations

from queuectl_tui.timeutil import rough_age
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.widgets.jobs_table import JobsTable


def test_ages_past_a_minute_move_once_a_minute() -> None:
    start = 1_800_000_000_000
    assert rough_age(start, start + 42_000) == "42s"
    assert {rough_age(start, start + ms) for ms in range(600_000, 660_000, 1000)} == {"10m"}
    assert rough_age(start, start + 7_530_000) == "2h05m"
    assert rough_age(None, start) == ""


async def test_the_tick_builds_only_the_rows_whose_time_changed(console, monkeypatch) -> None:
    async with console(size=(120, 40)) as (app, _):
        table = app.table_for(Pane.JOBS)
        assert table.items
        built: list[str] = []
        build = JobsTable.build

        def counting(self, job, now):  # type: ignore[no-untyped-def]
            built.append(job.id)
            return build(self, job, now)

        monkeypatch.setattr(JobsTable, "build", counting)
        table.retime(table._now)  # the same moment: nothing to build
        assert built == []
        table.retime(table._now + 3_600_000)  # an hour on: every age changed
        assert len(built) == len(table.items)


async def test_labels_are_set_only_when_their_words_change(console) -> None:
    async with console(size=(120, 40)) as (app, _):
        snapshot = app.snapshot
        assert snapshot is not None
        tab = app.query_one("#state-dead")
        before = tab.label
        app.update_tab_labels(snapshot)
        assert tab.label is before  # the same words: not set again
