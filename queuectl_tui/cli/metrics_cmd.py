"""`queuectl metrics`: the store's counters as Prometheus text or as the summary's JSON."""

from __future__ import annotations

import sys

import typer

from .. import metrics
from .context import guarded, open_store, print_json


@guarded
def metrics_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the summary figures as JSON."),
) -> None:
    """Print the queue's metrics in the Prometheus text format, or the summary as JSON.

    For node_exporter's textfile collector, write a file and rename it into place, so that
    it is never read half written.

    Example: queuectl metrics > queuectl.prom.tmp && mv queuectl.prom.tmp queuectl.prom
    """
    with open_store(ctx, note_missing=False) as store:  # scraped: nothing on stderr
        snapshot = metrics.read(store)
    if as_json:
        print_json(metrics.summary(snapshot))
        return
    # Bytes as rendered: UTF-8 whatever the terminal's encoding (label values are queue names).
    sys.stdout.flush()
    sys.stdout.buffer.write(metrics.prometheus_text(snapshot))
    sys.stdout.buffer.flush()


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics_command)
