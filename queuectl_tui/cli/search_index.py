"""`queuectl search-index`: free text searched through a trigram index, or by a scan."""

from __future__ import annotations

import time

import typer

from .. import control
from .context import EXIT_USAGE, fail, guarded, open_store

CHOICES = ("on", "off", "status")


@guarded
def search_index(
    ctx: typer.Context,
    action: str = typer.Argument("status", metavar="on|off|status"),
) -> None:
    """Search free text (list --query, the console's /, GET /jobs?q=) through a trigram
    index of every job's id, command and last error, or by reading every job.

    With it, a rare match among a million jobs answers in milliseconds instead of a second;
    enqueueing is about half as fast (docs/output-search-groups.md has the figures). Building
    it reads every job once: in one transaction on SQLite (pools wait, some 10 s per million
    jobs), beside the pools on PostgreSQL.

    Example: queuectl search-index on
    """
    if action not in CHOICES:
        fail(f"say on, off or status, not {action!r}", EXIT_USAGE)
    with open_store(ctx) as store:
        if action == "status":
            on = store.text_index()
            print(
                "Free text is searched through the trigram index"
                if on
                else "Free text is searched by reading every job (queuectl search-index on)"
            )
            return
        started = time.monotonic()
        control.set_text_index(store, action == "on", control.local_operator("cli"))
    took = time.monotonic() - started
    if action == "on":
        print(f"Free text is searched through the trigram index now (built in {took:.1f} s)")
    else:
        print("Free text is searched by reading every job now")


def register(app: typer.Typer) -> None:
    app.command("search-index")(search_index)
