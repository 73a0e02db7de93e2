"""queuectl: a persistent background job queue for the terminal."""

__version__ = "0.1.0"
