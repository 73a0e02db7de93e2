"""Every error queuectl reports to a user, in a few families that each face maps in one place:
the CLI to an exit code (cli/context.py), the console to a notice, HTTP to a status.

`str(error)` is one plain sentence for the user. Whatever raises one of these has changed
nothing, except where the class says otherwise."""

from __future__ import annotations


class QueueError(Exception):
    """The root of every error queuectl reports."""


class InvalidInput(QueueError, ValueError):
    """Input that was refused; nothing was written. `field` names the offending field of a
    job, when one is to blame, for every face to point at."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigurationError(QueueError, ValueError):
    """A setting or config file that cannot be used; the message says which and why."""


class NotFound(QueueError, LookupError):
    """Something named (a job id) that the queue does not know."""


class Conflict(QueueError):
    """The request clashes with what is stored (a job id that is taken)."""


class Unavailable(QueueError):
    """The queue cannot be used right now, or at this place: the database is locked beyond
    every retry, missing its folder, full, not a queue, or unsafe to open. Trying again may
    help; the engine retries these."""


class Damaged(QueueError):
    """The database file is damaged. Not Unavailable on purpose: retrying cannot help, so
    nothing that retries store calls catches it."""
