"""Every QUEUECTL_* environment variable queuectl reads or sets, and a warning for one it does
not know (a mistyped name for the database would otherwise leave the command on another
database, silently). tests/test_env_names.py checks that every name the package spells is
here."""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "QUEUECTL_"
KNOWN = frozenset(
    {
        # Read by the commands.
        "QUEUECTL_DB",
        "QUEUECTL_CONFIG",
        "QUEUECTL_READ_TOKEN",
        "QUEUECTL_WRITE_TOKEN",
        "QUEUECTL_WAKE",
        "QUEUECTL_CGROUPS",
        # Set in each job's environment (a job may run queuectl itself).
        "QUEUECTL_JOB_ID",
        "QUEUECTL_ATTEMPT",
        "QUEUECTL_WORKER",
        "QUEUECTL_JOB_TYPE",
        "QUEUECTL_PAYLOAD",
        # Read by the project's own tests and scripts.
        "QUEUECTL_TEST_POSTGRES",
        "QUEUECTL_REQUIRE_POSTGRES",
        "QUEUECTL_TIMINGS_DIR",
    }
)


def unknown_names(environ: Mapping[str, str]) -> list[str]:
    """A line for each QUEUECTL_* variable in `environ` that queuectl does not know, naming the
    closest known one where there is one."""
    lines = []
    for name in sorted(n for n in environ if n.startswith(PREFIX) and n not in KNOWN):
        closest = _closest(name[len(PREFIX) :])
        hint = f"; did you mean {PREFIX}{closest}?" if closest else ""
        lines.append(f"warning: {name} is not a variable queuectl reads{hint}")
    return lines


def _closest(suffix: str) -> str | None:
    """The known name after the prefix that `suffix` most likely meant: one it starts with
    (DB_PATH: DB), else one spelled nearly alike (CONFG: CONFIG)."""
    import difflib  # here: every command checks its environment, few find a stranger in it

    known = sorted(name[len(PREFIX) :] for name in KNOWN)
    starts = [name for name in known if suffix.startswith(name)]
    if starts:
        return max(starts, key=len)
    close = difflib.get_close_matches(suffix, known, n=1, cutoff=0.6)
    return close[0] if close else None
