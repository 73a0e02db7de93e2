"""`queuectl serve`: the HTTP API, the metrics and the web dashboard in one process (the HTTP
face is imported only here, only when run)."""

from __future__ import annotations

import sys

import typer

from ..location import shown
from .context import EXIT_FAILURE, EXIT_USAGE, fail, guarded, state

ADDR_HELP = "HOST:PORT to listen on; a non-loopback host needs tokens."


def run_server(ctx: typer.Context, addr: str, allow_commands: bool, read_only: bool) -> None:
    from ..errors import InvalidInput
    from ..http.context import ServeOptions
    from ..http.server import ServeError, parse_address, serve

    try:
        address = parse_address(addr)
    except InvalidInput as error:
        fail(str(error), EXIT_USAGE)
    settings = state(ctx).settings
    what = "the read-only web dashboard" if read_only else "the API, metrics and web dashboard"

    def listening() -> None:
        print(
            f"Serving {what} on {address.url} (database {shown(settings.database)}); Ctrl+C stops"
        )
        sys.stdout.flush()

    try:
        serve(settings, address, ServeOptions(allow_commands, read_only), listening)
    except ServeError as error:
        fail(str(error), EXIT_FAILURE)


@guarded
def serve_command(
    ctx: typer.Context,
    addr: str = typer.Option("127.0.0.1:8080", "--addr", metavar="HOST:PORT", help=ADDR_HELP),
    allow_commands: bool = typer.Option(
        False,
        "--allow-commands",
        help="Also take jobs with a raw shell 'command' (else typed jobs only).",
    ),
) -> None:
    """Serve the HTTP API (submit with backpressure, job control), Prometheus metrics at
    /metrics and the read-only web dashboard at /.

    Example: queuectl serve --addr 127.0.0.1:8080
    """
    run_server(ctx, addr, allow_commands, read_only=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
