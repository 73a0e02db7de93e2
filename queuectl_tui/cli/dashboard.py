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
) -> None:
    """Open the operations console: jobs, workers and the DLQ, live.

    Example: queuectl dashboard --refresh 0.5
    """
    from ..tui.app import run_dashboard

    cli_state = state(ctx)
    run_dashboard(
        cli_state.settings, refresh=refresh, readonly=readonly, config_path=cli_state.config_path
    )


def register(app: typer.Typer) -> None:
    app.command()(dashboard)
