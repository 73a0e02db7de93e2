"""`queuectl config list | show | get | set`."""

from __future__ import annotations

import os

import typer

from ..config import (
    NEXT_FAILURE,
    NEXT_RUN,
    SETTINGS,
    Settings,
    resolve_config_path,
    setting_spec,
    write_setting,
)
from .context import guarded, print_json, state
from .output import Output, chosen, output_option

app = typer.Typer(
    help="Show and change settings (stored in the config file).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _names(applies: str) -> str:
    """The settings whose changes reach running pools this way, as 'a, b and c'."""
    names = [spec.cli_name for spec in SETTINGS if spec.applies == applies]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


# Which settings are live, from the same table as `config list` and `config set`'s answer.
LIVE_SUMMARY = (
    f"Running pools apply {_names(NEXT_RUN)} from their next run, and {_names(NEXT_FAILURE)} "
    "from their next failure, without a restart. Every other setting reaches running pools "
    "and servers only when they restart (max-retries is copied into each job as it is "
    "enqueued)."
)


def _show(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@app.command("list")
@app.command("show", help="The same as list.\n\nExample: queuectl config show")
@guarded
def list_settings(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    output: str | None = output_option(),
) -> None:
    """Every setting with its value in effect, its default, and whether running pools apply
    a change to it without a restart (LIVE).

    Example: queuectl config list
    """
    mode = chosen(output, as_json)
    settings = state(ctx).settings
    values = settings.as_dict()
    if mode is Output.JSON:
        print_json({spec.cli_name: values[spec.key] for spec in SETTINGS})
        return
    from rich.table import Table  # rich only for the commands that draw

    from . import render

    defaults = Settings().as_dict()
    rows: list[list[str]] = [
        [
            spec.cli_name,
            _show(values[spec.key]),
            _show(defaults[spec.key]),
            spec.live or "no",
            spec.help,
        ]
        for spec in SETTINGS
    ]
    headers = ("SETTING", "VALUE", "DEFAULT", "LIVE", "MEANING")
    if mode is Output.PLAIN:
        columns = [render.Column(header) for header in headers]
        render.show(render.FittedTable(columns, list(rows)), plain_text=True)
        return

    caption = (
        f"config file: {settings.config_file or '(none)'}\n"
        "LIVE: when running pools apply a change; no: running pools and servers apply it after "
        "a restart"
    )
    table = Table(header_style="bold", caption=caption)
    for column in headers:
        table.add_column(column, no_wrap=column != "MEANING")
    for row in rows:
        table.add_row(*row)
    render.console().print(table)


@app.command("get")
@guarded
def get_setting(
    ctx: typer.Context,
    key: str | None = typer.Argument(
        None, metavar="[KEY]", help="e.g. max-retries; without it, every setting"
    ),
) -> None:
    """Print the value in effect for one setting, or a `name = value` line for each.

    Example: queuectl config get backoff-base (or, for every setting: queuectl config get)
    """
    values = state(ctx).settings.as_dict()
    if key is None:
        for spec in SETTINGS:
            print(f"{spec.cli_name} = {_show(values[spec.key])}")
        return
    print(_show(values[setting_spec(key).key]))


@app.command(
    "set",
    help="Validate and save one setting in the config file (written atomically).\n\n"
    f"{LIVE_SUMMARY}\n\nExample: queuectl config set max-retries 5 (or: queuectl config set "
    "--key max-retries --value 5)",
    # A value such as -1 is a value, refused by the setting's range, not an unknown option.
    context_settings={"ignore_unknown_options": True},
)
@guarded
def set_setting(
    ctx: typer.Context,
    key: str | None = typer.Argument(None, metavar="KEY", help="e.g. max-retries"),
    value: str | None = typer.Argument(None, metavar="VALUE"),
    key_option: str | None = typer.Option(None, "--key", help="The setting, as an option."),
    value_option: str | None = typer.Option(None, "--value", help="Its value, as an option."),
) -> None:
    key, value = (
        _one_of(key, key_option, "KEY", "--key"),
        _one_of(value, value_option, "VALUE", "--value"),
    )
    path, _ = resolve_config_path(state(ctx).config_path, os.environ)
    spec, stored = write_setting(path, key, value)
    print(f"{spec.cli_name} = {_show(stored)} (saved to {path}): {spec.applies}")


def _one_of(argument: str | None, option: str | None, name: str, flag: str) -> str:
    """The setting or value, given as an argument or as an option, but once."""
    if argument is not None:
        if option is not None:
            raise typer.BadParameter(f"give {name} or {flag}, not both")
        return argument
    if option is None:
        raise typer.BadParameter(f"missing {name} (or {flag})")
    return option
