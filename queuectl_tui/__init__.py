"""queuectl: a persistent background job queue for the terminal."""

# Nothing is imported here: the installed `queuectl` script imports this package before its
# first line can make Ctrl+C quiet, so every import here would be a window for a traceback.
# Not even `typing`: type checkers take a module's own TYPE_CHECKING as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see of the names below
    from .api import Queue
    from .version import __version__


def __getattr__(name: str) -> object:
    # `from queuectl_tui import Queue` without making every command import the API.
    if name == "Queue":
        from .api import Queue

        return Queue
    if name == "__version__":
        from .version import __version__

        return __version__
    raise AttributeError(f"module 'queuectl_tui' has no attribute {name!r}")


__all__ = ["Queue", "__version__"]
