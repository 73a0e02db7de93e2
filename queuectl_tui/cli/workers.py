"""Worker commands: `worker start`, `worker stop`, and `workers`."""

from __future__ import annotations

import time

import typer

from .. import control, service
from ..config import SettingsSource

# `render` (and rich with it) is imported by the commands that draw: enqueue and the
# pool start without it.
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, queue_option, state
from .output import Output, chosen, output_option

worker_app = typer.Typer(
    help="Run a worker pool, or stop the running pools.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@worker_app.command("start")
@guarded
def start(
    ctx: typer.Context,
    count: int | None = typer.Option(
        None,
        "--count",
        "-c",
        min=1,
        max=256,
        help="Workers in the pool (default: the default-workers setting).",
    ),
    detach: bool = typer.Option(
        False,
        "--detach",
        "-d",
        help="Run the pool in the background; prints its PID and log file, then returns.",
    ),
    log_format: str = typer.Option(
        "human", "--log-format", metavar="FORMAT", help="Log lines as 'human' or 'json'."
    ),
    queues: list[str] = typer.Option(
        [],
        "--queue",
        "-q",
        metavar="NAME",
        help="Serve only this queue (repeat for several; default: every queue).",
    ),
) -> None:
    """Start a pool of workers in the foreground (Ctrl+C stops it gracefully).

    Several pools may run at once, from separate terminals, on one database.

    Example: queuectl worker start --count 3 --queue reports --queue emails
    """
    from ..engine.detach import PoolOptions, start_detached
    from ..engine.pool import run_pool

    if log_format not in ("human", "json"):
        fail("--log-format must be 'human' or 'json'", EXIT_USAGE)
    served = tuple(dict.fromkeys(queue_option(name, "--queue") for name in queues))
    cli_state = state(ctx)
    settings = cli_state.settings
    options = PoolOptions(
        count=count or settings.default_workers, log_format=log_format, queues=served or None
    )
    if detach:
        # A database that cannot be opened is refused here, not in a log nobody reads (and
        # before the log's folder is made).
        with open_store(ctx, note_missing=False):  # the pool about to start makes it
            pass
        launched = start_detached(settings, options, cli_state.config_path)
        print(f"Started a pool of {options.count} workers in the background (pid {launched.pid})")
        print(f"Log: {launched.log_path}")
        return
    # The pool reads the config file again when it changes, with these same flags.
    source = SettingsSource.capture(cli_state.config_path, cli_state.db_path)
    raise typer.Exit(run_pool(settings, options, source))


@worker_app.command("stop")
@guarded
def stop(
    ctx: typer.Context,
    pool: str | None = typer.Option(
        None,
        "--pool",
        metavar="ID",
        help="Stop only this pool: its id, or one of its workers' ids (see queuectl workers).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Stop the running commands now; their jobs go back to waiting without spending "
        "an attempt.",
    ),
    wait: bool = typer.Option(False, "--wait", help="Wait until the pools have exited."),
    timeout: float = typer.Option(
        0, "--timeout", min=0, help="With --wait, give up after this many seconds (0: never)."
    ),
) -> None:
    """Ask every running pool, or one, to stop: gracefully (the jobs in flight finish
    first), or --force.

    Example: queuectl worker stop --pool build-host:4711-k3x9 --force --wait
    """
    stale_after = state(ctx).settings.stale_worker_timeout
    who = control.local_operator("cli")
    with open_store(ctx) as store:
        active = service.stop_pools(store, stale_after, who, pool, force)
        pools = {worker.pool_id for worker in active}
        if not active:
            print("No worker pool is running")
            return
        named = next(iter(pools)) if pool else None
        whom = f"pool {named}" if named else f"{len(pools)} pool(s)"
        how = "Forced stop" if force else "Stop"
        print(f"{how} requested for {whom} with {len(active)} worker(s)")
        if not wait:
            return
        deadline = time.monotonic() + timeout if timeout else None
        while any(w.pool_id in pools for w in service.running_workers(store, stale_after)):
            if deadline is not None and time.monotonic() > deadline:
                fail(f"workers still running after {timeout:g} s")
            time.sleep(0.1)
        print(f"Pool {named} stopped" if named else "All workers stopped")


@guarded
def workers(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
    active: bool = typer.Option(False, "--active", help="Only workers that are running."),
    history: bool = typer.Option(
        False, "--all", help="Also workers that ended more than an hour ago."
    ),
) -> None:
    """Workers with PID, host, status, heartbeat, current job and counters: those running
    and those that ended in the last hour (--all: every stored one).

    Example: queuectl workers
    """
    mode = chosen(output, as_json)
    settings = state(ctx).settings
    with open_store(ctx) as store:
        rows = service.shown_workers(
            store, settings.stale_worker_timeout, active_only=active, history=history
        )
        now = store.now()
    if mode is Output.JSON:
        print_json(
            [
                worker.to_dict()
                | {"heartbeat_age_s": round((now - worker.last_heartbeat) / 1000, 1)}
                for worker in rows
            ]
        )
        return
    from . import render

    empty = "No workers." + ("" if active else " Start some with: queuectl worker start")
    table = render.workers_table(rows, settings.stale_worker_timeout, now)
    render.show(table, mode is Output.PLAIN, empty)


def register(app: typer.Typer) -> None:
    app.add_typer(worker_app, name="worker")
    app.command()(workers)
