"""queuectl: a persistent background job queue for the terminal."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # `from queuectl_tui import Queue` without making every command import the API.
    if name == "Queue":
        from .api import Queue

        return Queue
    raise AttributeError(f"module 'queuectl_tui' has no attribute {name!r}")


__all__ = ["Queue", "__version__"]
