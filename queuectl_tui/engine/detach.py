"""Pool processes started by others: the command line of `queuectl worker start`, and a pool
in the background (its own session, its output in a log file beside the database)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..files import open_for_append
from ..location import absolute, is_url, shown
from .containment import ensure_descriptors


@dataclass(frozen=True, slots=True)
class PoolOptions:
    count: int
    log_format: str = "human"
    queues: tuple[str, ...] | None = None  # serve only these queues (None: every queue)


@dataclass(frozen=True, slots=True)
class Detached:
    pid: int
    log_path: str


def log_path_for(database: str) -> Path:
    """Where a background pool writes its log: beside a database file, or for a server's
    queue in the user's state folder, named after the URL (its password left out)."""
    if is_url(database):
        state = Path(os.environ.get("XDG_STATE_HOME") or "~/.local/state").expanduser()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", shown(database)).strip("_")
        return state / "queuectl" / f"{name}.workers.log"
    path = Path(absolute(database))
    return path.with_name(path.name + ".workers.log")


def pool_command(
    database: str | Path, options: PoolOptions, config_path: str | Path | None = None
) -> list[str]:
    """The command line of `queuectl worker start` for a pool of another process."""
    command = [sys.executable, "-m", "queuectl_tui"]
    if config_path is not None:
        command += ["--config", str(config_path)]
    command += ["--db", str(database), "worker", "start", "--count", str(options.count)]
    for name in options.queues or ():
        command += ["--queue", name]
    return [*command, "--log-format", options.log_format]


def start_detached(settings: Settings, options: PoolOptions, config_path: str | None) -> Detached:
    """Start `queuectl worker start` in the background (its own session, so a closing
    terminal or console does not stop it); output goes to a log file beside the database."""
    ensure_descriptors(options.count)  # refuse here, not in a log nobody reads
    database = absolute(settings.database)
    log_path = log_path_for(database)
    # A server queue's logs live in the user's state folder: private, as its tokens are.
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = str(Path(config_path).expanduser().resolve()) if config_path else None
    command = pool_command(database, options, config)
    with open_for_append(log_path, settings.file_permissions) as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    # In a long-lived caller (the console) reap the pool when it ends, so no zombie lingers.
    threading.Thread(target=process.wait, name="queuectl-detached-reaper", daemon=True).start()
    return Detached(pid=process.pid, log_path=str(log_path))
