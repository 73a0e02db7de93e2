"""The write token a `queuectl serve` without configured tokens generates for itself, and where
it lives: beside a SQLite database (`<database>.http-token`), or for PostgreSQL, which has no
file of its own, in `~/.local/state/queuectl/` (or `$XDG_STATE_HOME/queuectl/`) under a name
made from the URL without its password. Always 0600, owned by the user who serves; the CLI of
the same user finds it there (`queuectl serve --show-token`).

Imports nothing of the HTTP stack: the CLI reads the token without loading it."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .config import ApiToken
from .errors import ConfigurationError
from .location import absolute, is_url

SUFFIX = ".http-token"
TOKEN_MODE = 0o600
FOLDER_MODE = 0o700
GENERATED_NAME = "generated"  # the actor of the audit trail for actions taken with it
MAX_FILE_BYTES = 4096


class TokenFileError(ConfigurationError):
    """The token file cannot be used; the message says why in one sentence."""


@dataclass(frozen=True, slots=True)
class TokenFile:
    path: Path
    private_folder: bool  # in a folder of its own, made 0700 (PostgreSQL's)


def token_file(database: str, env: Mapping[str, str] | None = None) -> TokenFile:
    """Where the generated token of the queue `database` is (whether or not it exists yet)."""
    if not is_url(database):
        return TokenFile(Path(absolute(database) + SUFFIX), False)
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    key = hashlib.sha256(without_password(database).encode()).hexdigest()[:32]
    return TokenFile(Path(state) / "queuectl" / f"{key}{SUFFIX}", True)


def without_password(url: str) -> str:
    """The URL with no password in its user part nor in its query (`?password=`)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, host = netloc.rsplit("@", 1)
        netloc = f"{credentials.split(':', 1)[0]}@{host}"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def generated_token(secret: str, path: Path) -> ApiToken:
    return ApiToken(GENERATED_NAME, secret, write=True, origin=f"in {path}")


def read_token(path: Path) -> str | None:
    """The token stored at `path`, None if there is none yet. TokenFileError for a file that
    is not a regular file of this user with mode 0600, or that holds no usable token."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        if path.is_symlink():
            raise TokenFileError(f"the token file {path} is a symbolic link; refusing it") from None
        raise TokenFileError(f"cannot read the token file {path}: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenFileError(f"the token file {path} is not a regular file; refusing it")
        if info.st_uid != os.geteuid():
            raise TokenFileError(
                f"the token file {path} belongs to another user (uid {info.st_uid}); "
                "refusing it: remove it, or serve as its owner"
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode != TOKEN_MODE:
            raise TokenFileError(
                f"the token file {path} has mode {mode:04o}, not 0600, so others may have read "
                "it; refusing it: remove it and a new token is made at the next start"
            )
        text = os.read(fd, MAX_FILE_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if generated_token(text, path).weakness() or not all("!" <= c <= "~" for c in text):
        raise TokenFileError(
            f"the token file {path} holds no usable token; remove it and a new one is made at "
            "the next start"
        )
    return text


def ensure_token(where: TokenFile) -> tuple[str, bool]:
    """The token at `where`, made there first if there is none (random, 43 characters, 0600);
    and whether it was made now. Two servers starting together agree on one token."""
    path = where.path
    found = read_token(path)
    if found is not None:
        return found, False
    folder = path.parent
    if where.private_folder:
        try:
            folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        except OSError as error:
            raise TokenFileError(f"cannot create {folder}: {error.strerror}") from None
        _check_private_folder(folder)
    secret = secrets.token_urlsafe(32)
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)  # made 0600
    except OSError as error:
        raise TokenFileError(f"cannot create the token file {path}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            os.fchmod(out.fileno(), TOKEN_MODE)
            out.write(secret + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)  # never replaces: a file made meanwhile wins
            created = True
        except FileExistsError:
            created = False
        except OSError as error:
            raise TokenFileError(f"cannot create the token file {path}: {error.strerror}") from None
    finally:
        Path(temp).unlink(missing_ok=True)
    stored = read_token(path)
    if stored is None:
        raise TokenFileError(f"the token file {path} disappeared as it was made")
    return stored, created


def _check_private_folder(folder: Path) -> None:
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise TokenFileError(f"{folder} is not a folder of this user; refusing to keep a token")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise TokenFileError(
            f"{folder} may be opened by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            "make it 0700"
        )
