"""The global options also after the command's name: `queuectl status --db q.db` runs as
`queuectl --db q.db status`, as other queue tools and scripts ported from them write it."""

from __future__ import annotations

from collections.abc import Sequence

# The root's options that take a value, and those that take none.
VALUED = ("--db", "--config")
FLAGS = ("--version", "-h", "--help")
# Commands with an option of their own by one of those names: theirs is left to them.
OWN_OPTIONS = {"bench": ("--db",)}


def hoisted(args: Sequence[str]) -> list[str]:
    """`args` with every --db and --config given after the command's name moved before it.
    Nothing after `--` moves (the words of a command to run)."""
    args = list(args)
    command = _command_index(args)
    if command is None:
        return args
    own = OWN_OPTIONS.get(args[command], ())
    front: list[str] = []
    rest: list[str] = []
    index = command + 1
    while index < len(args):
        word = args[index]
        if word == "--":
            rest.extend(args[index:])
            break
        name = word.split("=", 1)[0]
        if name in VALUED and name not in own:
            if "=" in word:
                front.append(word)
            elif index + 1 < len(args):
                front.extend(args[index : index + 2])
                index += 1
            else:
                rest.append(word)  # no value: the command's own error says so
        else:
            rest.append(word)
        index += 1
    return [*args[:command], *front, args[command], *rest]


def _command_index(args: list[str]) -> int | None:
    """Where the command's name is: the first word that is not a root option or its value."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in VALUED:
            index += 2
        elif word.split("=", 1)[0] in VALUED or word in FLAGS:
            index += 1
        elif word.startswith("-"):
            return None  # an option the root does not know: left for its error
        else:
            return index
    return None
