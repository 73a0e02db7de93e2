"""The HTTP face: the JSON API with backpressure and group commit, Prometheus and JSON
metrics, and the read-only web dashboard, served by `queuectl serve` (Starlette under
uvicorn). Imported only by the commands that serve."""
