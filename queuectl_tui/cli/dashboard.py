"""`queuectl dashboard`: opens the Textual console (imported only here, only when run)."""

from __future__ import annotations

import typer

from .context import guarded, state


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
    from ..tui.app import run_dashboard

    cli_state = state(ctx)
    run_dashboard(
        cli_state.settings, refresh=refresh, readonly=readonly, config_path=cli_state.config_path
    )


def register(app: typer.Typer) -> None:
    app.command()(dashboard)
