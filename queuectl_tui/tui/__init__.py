"""The operations console: a Textual app over the same service and store as the CLI."""
