"""`queuectl dashboard`: opens the Textual console (imported only here, only when run)."""

from __future__ import annotations

import sys

import typer

from .context import EXIT_USAGE, fail, guarded, open_store, state


@guarded
def dashboard(
    ctx: typer.Context,
    refresh: float = typer.Option(
        1.0, "--refresh", min=0.1, max=60, help="Seconds between live updates."
    ),
    readonly: bool = typer.Option(
        False, "--readonly", help="Hide and refuse every action that changes the queue."
    ),
    addr: str | None = typer.Option(
        None,
        "--addr",
        metavar="HOST:PORT",
        help="Serve the read-only web dashboard on this address instead of opening the console.",
    ),
) -> None:
    """Open the operations console: jobs, workers and the DLQ, live. With --addr, serve the
    read-only web dashboard instead.

    Example: queuectl dashboard --refresh 0.5   (or: queuectl dashboard --addr 127.0.0.1:8080)
    """
    if addr is not None:
        from .serve import run_server

        run_server(ctx, addr, allow_commands=False, read_only=True)
        return
    # A database that cannot be opened is said first; then the console needs a terminal on
    # both ends (without one it would spin on input that never comes).
    with open_store(ctx, note_missing=False):  # the console shows the queue empty
        pass
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail(
            "the console needs a terminal, and stdin or stdout is not one; for a browser "
            "run queuectl dashboard --addr 127.0.0.1:8080",
            EXIT_USAGE,
        )
    from ..tui.app import run_dashboard

    cli_state = state(ctx)
    run_dashboard(
        cli_state.settings, refresh=refresh, readonly=readonly, config_path=cli_state.config_path
    )


def register(app: typer.Typer) -> None:
    app.command()(dashboard)
