"""Every console action in one list: the key bindings, the footer, the `?` help and the
command palette are all built from it, so they cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..presentation import STATE_ORDER


@dataclass(frozen=True, slots=True)
class ActionSpec:
    keys: str  # Textual key names, comma separated
    action: str  # the app action, with arguments if any
    title: str  # footer label, help and palette text
    help: str  # one line for the palette and the help screen
    section: str
    key_display: str | None = None
    mutating: bool = False  # changes the queue: hidden and refused in read-only mode
    footer: bool = True

    @property
    def name(self) -> str:
        return self.action.split("(", 1)[0]

    @property
    def shown_key(self) -> str:
        return self.key_display or self.keys.split(",")[0]


# The state tabs, in the order an operator follows a job through the queue.
STATE_TABS = ("all", *(state.value for state in STATE_ORDER))

GLOBAL = "Anywhere"
TABLES = "Jobs and dead letters"
SCHEDULES = "Schedules"

ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("question_mark", "help", "Help", "Show every key", GLOBAL, key_display="?"),
    # Not in the footer: Enter on a row is what every table does, and the footer is short.
    ActionSpec("enter", "open_job", "Open", "Open the selected job", TABLES, "Enter", footer=False),
    ActionSpec(
        "slash",
        "filter",
        "Filter",
        'Search: text of the id, command or error, and state: queue: exit: worker: error:"…" '
        "since:10m",
        TABLES,
        "/",
    ),
    ActionSpec(
        "space",
        "toggle_mark",
        "Mark",
        "Mark or unmark the selected job; r, c and D then act on the marked jobs",
        TABLES,
        "space",
    ),
    ActionSpec(
        "v",
        "mark_range",
        "Mark range",
        "Mark every row from the one marked last to the selected one",
        TABLES,
        footer=False,
    ),
    ActionSpec(
        "asterisk",
        "mark_matching",
        "Mark all",
        "Mark every job the view matches, on every page (its tab, queue and filter)",
        TABLES,
        "*",
        footer=False,
    ),
    ActionSpec("n", "new_job", "New", "Open the enqueue form", GLOBAL, mutating=True),
    ActionSpec(
        "r",
        "retry_selected",
        "Retry",
        "Retry the selected dead or cancelled job, or run a failed one now",
        TABLES,
        mutating=True,
    ),
    ActionSpec(
        "c",
        "cancel_selected",
        "Cancel",
        "Cancel the selected job; a running one is stopped (asks first)",
        TABLES,
        mutating=True,
    ),
    ActionSpec(
        "D",
        "delete_selected",
        "Delete",
        "Delete the selected job with its attempts (asks first)",
        TABLES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "P",
        "toggle_queue",
        "Pause queue",
        "Pause or resume the selected queue, or the selected job's (asks first)",
        TABLES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "L",
        "limit_queue",
        "Limit queue",
        "Set how many of the selected queue's jobs may run at once",
        TABLES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "R",
        "retry_all",
        "Retry all",
        "Retry every dead job shown (asks first)",
        TABLES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "s",
        "start_pool",
        "Start pool",
        "Start a background worker pool",
        GLOBAL,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "x",
        "stop_pools",
        "Stop pools",
        "Ask every worker pool (on the Workers pane: the selected worker's) to stop once its "
        "jobs in flight finish (asks first)",
        GLOBAL,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "X",
        "force_stop_pools",
        "Force stop",
        "As x, but the running commands are stopped now and their jobs go back to waiting "
        "(asks first)",
        GLOBAL,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "K",
        "prune",
        "Prune",
        "Remove finished jobs older than an age (asks first, with the count)",
        GLOBAL,
        mutating=True,
        footer=False,
    ),
    # Not `p`: next to `P` (pause a queue) it was taken for it.
    ActionSpec(
        "f",
        "toggle_pause",
        "Freeze",
        "Freeze the screen (no live updates) or go live again",
        GLOBAL,
        footer=False,
    ),
    ActionSpec("q", "quit", "Quit", "Leave the console (worker pools keep running)", GLOBAL),
    ActionSpec("j", "show_pane('jobs')", "Jobs", "Show the jobs pane", GLOBAL, footer=False),
    ActionSpec(
        "w", "show_pane('workers')", "Workers", "Show the workers pane", GLOBAL, footer=False
    ),
    ActionSpec(
        "d", "show_pane('dead')", "Dead letters", "Show the dead letter queue", GLOBAL, footer=False
    ),
    ActionSpec("u", "show_pane('queues')", "Queues", "Show the queues pane", GLOBAL, footer=False),
    ActionSpec(
        "t", "show_pane('schedules')", "Schedules", "Show the schedules pane", GLOBAL, footer=False
    ),
    # On the Schedules pane P pauses the selected schedule (elsewhere it pauses a queue).
    ActionSpec(
        "P",
        "toggle_schedule",
        "Pause schedule",
        "Pause or resume the selected schedule",
        SCHEDULES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "N",
        "run_schedule",
        "Run now",
        "Make one job of the selected schedule now, outside its ticks",
        SCHEDULES,
        mutating=True,
        footer=False,
    ),
    ActionSpec(
        "enter",
        "open_last_job",
        "Open last job",
        "Open the selected schedule's last job",
        SCHEDULES,
        "Enter",
        footer=False,
    ),
    ActionSpec(
        "e",
        "error_groups",
        "Errors",
        "Dead jobs grouped by how they failed; retry or delete a group",
        GLOBAL,
    ),
    *(
        ActionSpec(
            str(index),
            f"set_state('{name}')",
            f"{name.capitalize()} jobs",
            f"Show {name} jobs" if name != "all" else "Show jobs in every state",
            GLOBAL,
            footer=False,
        )
        for index, name in enumerate(STATE_TABS, start=1)
    ),
    ActionSpec(
        "h",
        "toggle_history",
        "Worker history",
        "Workers pane: every stored worker, or only those running and ended in the last hour",
        GLOBAL,
        footer=False,
    ),
    ActionSpec("ctrl+r", "refresh_now", "Refresh", "Read the database now", GLOBAL, footer=False),
    ActionSpec(
        "escape",
        "clear_filter",
        "Clear",
        "Clear the marks, or else the filter",
        TABLES,
        "Esc",
        footer=False,
    ),
    ActionSpec(
        "right_square_bracket", "next_page", "Next page", "Older jobs", TABLES, "]", footer=False
    ),
    ActionSpec(
        "left_square_bracket",
        "prev_page",
        "Previous page",
        "Newer jobs",
        TABLES,
        "[",
        footer=False,
    ),
    ActionSpec("g", "first_page", "First page", "Back to the newest jobs", TABLES, footer=False),
)

MUTATING = frozenset(spec.name for spec in ACTIONS if spec.mutating)
NAMES = frozenset(spec.name for spec in ACTIONS)
# About a table of jobs: refused on the Workers pane.
TABLE_ACTIONS = frozenset(spec.name for spec in ACTIONS if spec.section == TABLES)
# About a schedule: allowed on the Schedules pane only.
SCHEDULE_ACTIONS = frozenset(spec.name for spec in ACTIONS if spec.section == SCHEDULES)
# About a queue: allowed on the Queues pane too.
QUEUE_ACTIONS = frozenset({"toggle_queue", "limit_queue"})
# Keys that are text: while an input has the focus they are typed into it, not run.
TYPED = frozenset(
    spec.name for spec in ACTIONS if spec.keys != "escape" and not spec.keys.startswith("ctrl+")
)


def bindings() -> list[Binding]:
    """Priority bindings: the console handles each key before it looks at the next one, so a
    key that moves the focus (a pane, a tab, the filter) has moved it for the keys after it."""
    return [
        Binding(
            spec.keys,
            spec.action,
            spec.title,
            show=spec.footer,
            key_display=spec.key_display,
            priority=True,
        )
        for spec in ACTIONS
    ]


class ActionCommands(Provider):
    """The command palette's view of ACTIONS (read-only mode leaves the mutating ones out)."""

    def _specs(self) -> list[ActionSpec]:
        readonly = bool(getattr(self.app, "readonly", False))
        return [spec for spec in ACTIONS if not (readonly and spec.mutating)]

    def _command(self, spec: ActionSpec) -> partial[Any]:
        run = getattr(self.app, "run_command", self.app.run_action)
        return partial(run, spec.action)

    async def discover(self) -> Hits:
        for spec in self._specs():
            yield DiscoveryHit(
                f"{spec.title}  ({spec.shown_key})", self._command(spec), help=spec.help
            )

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for spec in self._specs():
            label = f"{spec.title}  ({spec.shown_key})"
            score = max(matcher.match(label), matcher.match(spec.help) * 0.8)
            if score > 0:
                yield Hit(score, matcher.highlight(label), self._command(spec), help=spec.help)
