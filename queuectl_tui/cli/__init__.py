"""The queuectl command line (typer). Never imports Textual at module level."""
