"""The `queuectl` command: global options and the command groups."""

from __future__ import annotations

import os

import typer

from ..env_names import unknown_names
from ..version import __version__
from . import (
    bench,
    config_cmd,
    control,
    dashboard,
    dlq,
    enqueue,
    jobs,
    logs,
    metrics_cmd,
    queues,
    schedules,
    search_index,
    serve,
    workers,
)
from .context import CliState

app = typer.Typer(
    name="queuectl",
    help=(
        "A persistent background job queue for the terminal: shell commands in SQLite, run by "
        "a worker pool with retries, backoff, a dead letter queue and crash recovery."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"queuectl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None,
        "--db",
        help="Database file (overrides QUEUECTL_DB and the config file).",
        metavar="PATH",
    ),
    config: str | None = typer.Option(
        None,
        "--config",
        help="Config file (default: QUEUECTL_CONFIG, else ./config.json).",
        metavar="PATH",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = CliState(config_path=config, db_path=db)
    for line in unknown_names(os.environ):  # once per command, on stderr
        typer.echo(line, err=True)


enqueue.register(app)
jobs.register(app)
logs.register(app, workers.worker_app)
control.register(app)
workers.register(app)
app.add_typer(queues.app, name="queue")
app.add_typer(dlq.app, name="dlq")
app.add_typer(schedules.app, name="schedule")
app.add_typer(config_cmd.app, name="config")
dashboard.register(app)
serve.register(app)
bench.register(app)
metrics_cmd.register(app)
search_index.register(app)


def main() -> None:
    import sys

    from .global_options import hoisted

    # One name however it was started (`python -m queuectl_tui` too): usage lines and shell
    # completion (the variable its scripts set) are made from it.
    app(args=hoisted(sys.argv[1:]), prog_name="queuectl")
