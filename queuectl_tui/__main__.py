import _signal  # type: ignore[import-not-found]  # the C module: `signal` imports enum, which alone takes long enough to be hit
import os


def _leave_quietly() -> None:
    # Ctrl+C while the command is still loading: nothing was started, so one line and 130.
    try:
        os.write(2, b"Interrupted.\n")
    finally:
        os._exit(130)


def _interrupted_while_loading(_signum: int, _frame: object) -> None:
    _leave_quietly()


# Not where SIGINT is ignored (a pool started with `&` from a script must keep ignoring it).
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_loading)
    from .cli.app import main

    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
else:
    from .cli.app import main

try:
    main()
except KeyboardInterrupt:  # before a command's own handling (typer builds the commands first)
    _leave_quietly()
