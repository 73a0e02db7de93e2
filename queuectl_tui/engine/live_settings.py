"""A running pool's settings, whose live ones follow the config file.

`config set` replaces the file by a rename, so a change shows in its stat: the pool compares
the file's identity (device, inode, size, mtime) before each exchange with the store and on
each heartbeat, and parses the file only when that changed. Of what it reads, only the live
settings (config.LIVE_KEYS: those read per run or per failure) are taken; the others keep
the values the pool started with. The file is loaded as at the start (the same flags, the
environment as it was), so what a flag or a variable set keeps winning over the file. A file
that cannot be used leaves the settings in use as they are, with one warning.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import ALL_RESTART, LIVE_KEYS, POOL_RESTART, SETTINGS, Settings, SettingsSource
from . import events

FileIdentity = tuple[int, int, int, int] | None  # None: no such file
# The settings a pool reads as it starts: a change of one is logged as waiting for a restart.
_AT_START = tuple(spec for spec in SETTINGS if spec.applies in (POOL_RESTART, ALL_RESTART))
_UNREAD = (-1, -1, -1, -1)  # no file has this identity: the first look always reads


def file_identity(path: Path) -> FileIdentity:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class LiveSettings:
    """The settings in use; `refresh()` takes a changed config file's live settings in. Safe
    to call from the pool's threads at once."""

    def __init__(self, settings: Settings, source: SettingsSource | None = None) -> None:
        self._settings = settings
        self._source = source
        # Read once at the first look: the file may have changed since the command loaded it.
        self._seen: FileIdentity = _UNREAD
        self._waiting: tuple[str, ...] = ()  # changed settings that need a restart, as logged
        self._lock = threading.Lock()

    @property
    def current(self) -> Settings:
        return self._settings

    def refresh(self) -> Settings:
        """The settings in use after a look at the config file (one stat when unchanged)."""
        source = self._source
        if source is None:
            return self._settings
        identity = file_identity(source.file)
        if identity != self._seen:
            with self._lock:
                if identity != self._seen:
                    self._seen = identity
                    self._reload(source)
        return self._settings

    def _reload(self, source: SettingsSource) -> None:
        try:
            loaded = source.load()
        except Exception as error:  # whatever is wrong with the file, the pool carries on
            events.event(
                "config file not applied, settings unchanged",
                level=logging.WARNING,
                file=str(source.file),
                error=str(error),
            )
            return
        current = self._settings
        changed: dict[str, Any] = {
            key: getattr(loaded, key)
            for key in LIVE_KEYS
            if getattr(loaded, key) != getattr(current, key)
        }
        if changed:
            self._settings = replace(current, **changed)
            events.event("settings applied", **changed)
        waiting = tuple(
            spec.cli_name
            for spec in _AT_START
            if getattr(loaded, spec.key) != getattr(current, spec.key)
        )
        if waiting and waiting != self._waiting:
            events.event("settings need a restart of the pool", settings=",".join(waiting))
        self._waiting = waiting
