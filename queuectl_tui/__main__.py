"""`python -m queuectl_tui`: the installed `queuectl` command."""

from .cli.entry import main

if __name__ == "__main__":
    main()
