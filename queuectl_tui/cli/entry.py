"""The `queuectl` command's first code (the installed script and `python -m queuectl_tui`):
from its first line on, Ctrl+C is quiet while the command loads, runs and exits.

Light on purpose: the script imports this module before anything that takes time to load."""

import _signal  # type: ignore[import-not-found]  # the C module: `signal` imports enum, which alone takes long enough to be hit
import os
import sys


def _interrupted(_signum: int, _frame: object) -> None:
    # Nothing was started (or the command had finished): one line and 130.
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a second Ctrl+C must not cut this short
    try:
        os.write(2, b"Interrupted.\n")
    finally:
        os._exit(130)


# Not where SIGINT is ignored (a pool started with `&` from a script must keep ignoring it).
_QUIET = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
if _QUIET:  # at once: the script runs a line of its own before it calls main()
    _signal.signal(_signal.SIGINT, _interrupted)


def main() -> None:
    try:
        from .app import main as run_command

        # The commands handle KeyboardInterrupt themselves (a pool stops gracefully). Inside
        # the try: a Ctrl+C during the import is handled only once this handler is in place.
        if _QUIET:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        run_command()
    except KeyboardInterrupt:  # before a command's own handling (typer builds the commands first)
        _interrupted(_signal.SIGINT, None)
    except Exception as error:
        # Python wraps what some of its machinery raises (a class body's __set_name__, while a
        # module loads): a Ctrl+C there arrives as another error, caused by the interrupt.
        if _caused_by_interrupt(error):
            _interrupted(_signal.SIGINT, None)
        raise
    finally:
        if _QUIET:  # Python's own exit (flushing, joining threads) would print a traceback
            _signal.signal(_signal.SIGINT, _interrupted)
            _flush()


def _caused_by_interrupt(error: BaseException) -> bool:
    seen: BaseException | None = error
    for _ in range(10):  # a chain of causes, never a cycle's worth
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _flush() -> None:
    """Write what the command printed while a Ctrl+C still ends the process with 130."""
    import contextlib  # loaded by now; not at the start, which must be quick

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to write to
            stream.flush()
