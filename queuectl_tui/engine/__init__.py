"""The worker engine: runner (one command), worker (claim → run → settle), pool (N workers,
heartbeats, recovery, wake-ups, signals). It speaks to the store, never to the CLI or console."""
