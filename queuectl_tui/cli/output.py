"""How a listing is printed: a table for a person at a terminal, plain aligned columns for
`awk`, `cut` and `grep`, or JSON for programs. Chosen by `--output`, else by where stdout
goes."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any

import typer

from .context import EXIT_USAGE, fail


class Output(str, Enum):
    TABLE = "table"
    PLAIN = "plain"
    JSON = "json"


def output_option() -> Any:
    return typer.Option(
        None,
        "--output",
        "-o",
        metavar="FORMAT",
        help="table, plain or json (default: table on a terminal, plain columns in a pipe).",
        show_default=False,
    )


def chosen(output: str | None, as_json: bool = False) -> Output:
    """The format asked for (`--json` is `--output json`), or the one that fits stdout."""
    if output is None:
        if as_json:
            return Output.JSON
        return Output.TABLE if sys.stdout.isatty() else Output.PLAIN
    try:
        mode = Output(output.strip().lower())
    except ValueError:
        fail(f"unknown output format '{output}'; choose one of: table, plain, json", EXIT_USAGE)
    if as_json and mode is not Output.JSON:
        fail(f"--json and --output {mode.value} disagree; give one of them", EXIT_USAGE)
    return mode
