"""`queuectl serve`: the HTTP API, the metrics and the web dashboard in one process (the HTTP
face is imported only here, only when run)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from ..location import shown
from .context import EXIT_FAILURE, EXIT_USAGE, fail, guarded, state

if TYPE_CHECKING:
    from ..http.context import ServeOptions

ADDR_HELP = "HOST:PORT to listen on; a non-loopback host needs tokens."
SHOW_TOKEN_HELP = (
    "Print the token this queue's server generated (when no tokens are configured) and exit."
)


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

    def listening(options: ServeOptions) -> None:
        print(
            f"Serving {what} on {address.url} (database {shown(settings.database)}); Ctrl+C stops"
        )
        for line in _who_may(address.url, options, bool(settings.tokens), address.host):
            print(line)
        sys.stdout.flush()

    try:
        serve(settings, address, ServeOptions(allow_commands, read_only), listening)
    except ServeError as error:
        fail(str(error), EXIT_FAILURE)


def _who_may(url: str, options: ServeOptions, tokens_configured: bool, host: str) -> list[str]:
    """What anonymous clients may do, and where the token is (as Jupyter prints its own)."""
    lines = []
    if options.generated is not None:
        lines += [
            "Anonymous clients may read and submit typed jobs; anything else needs the token "
            f"{options.generated.origin} (queuectl serve --show-token prints it):",
            f"    {url}/?token={options.generated.secret}",
        ]
    elif not tokens_configured:  # the read-only dashboard, on loopback
        lines.append("Anyone on this machine may read it; a token in http_tokens closes it.")
    else:
        lines.append(
            "Every route but /healthz needs a token (http_tokens or QUEUECTL_*_TOKEN); "
            f"in a browser, sign in on the page at {url}/ (the token is kept for that tab)."
        )
    if options.hosts is not None and not _loopback(host):
        names = ", ".join(sorted(options.hosts))
        lines.append(f"It answers requests addressed to {names} (http-hosts); others get 421.")
    return lines


def _loopback(host: str) -> bool:
    from ..http.auth import is_loopback

    return is_loopback(host)


def show_token(ctx: typer.Context) -> None:
    from ..http_token import TokenFileError, read_token, token_file

    settings = state(ctx).settings
    if settings.tokens:
        where = ", ".join(token.origin or token.name for token in settings.tokens)
        fail(f"this queue's server uses the tokens configured ({where}), not a generated one")
    path = token_file(settings.database).path
    try:
        secret = read_token(path)
    except TokenFileError as error:
        fail(str(error))
    if secret is None:
        fail(f"no token yet: `queuectl serve` makes {path} as it first starts")
    print(secret)


@guarded
def serve_command(
    ctx: typer.Context,
    addr: str = typer.Option("127.0.0.1:8080", "--addr", metavar="HOST:PORT", help=ADDR_HELP),
    allow_commands: bool = typer.Option(
        False,
        "--allow-commands",
        help="Also take jobs with a raw shell 'command' (else typed jobs only).",
    ),
    show: bool = typer.Option(False, "--show-token", help=SHOW_TOKEN_HELP),
) -> None:
    """Serve the HTTP API (submit with backpressure, job control), Prometheus metrics at
    /metrics and the read-only web dashboard at /.

    Without tokens configured, anonymous clients may read and submit typed jobs; a raw
    command and every operator's action need the write token the server generates beside the
    database on its first start (printed then, and by --show-token).

    Example: queuectl serve --addr 127.0.0.1:8080

    \b
    Then, as the same user:
    curl -X POST localhost:8080/queues/default/pause \\
      -H "Authorization: Bearer $(queuectl serve --show-token)"
    """
    if show:
        show_token(ctx)
        return
    run_server(ctx, addr, allow_commands, read_only=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
