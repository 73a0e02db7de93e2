"""Making untrusted text (ids, commands, output, errors) safe to show in a terminal."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# C0 and C1 control characters except newline and tab, DEL, and the bidirectional marks,
# overrides and isolates that can make displayed text read differently from what it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What json.dumps(ensure_ascii=False) leaves raw although a terminal obeys it or cannot encode
# it: DEL, C1 controls, bidirectional marks, overrides and isolates, and lone surrogates. (It
# escapes C0 controls itself.) Outside strings JSON text is ASCII, so every match is inside a
# string, where its \u escape means the same character.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def is_utf8(text: str) -> bool:
    """Whether text can be stored and printed as UTF-8: false when it holds a lone surrogate,
    which is what Python makes of a byte in argv that is not UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str | None, single_line: bool = False) -> str:
    """Text with every control character (ESC included) shown as a visible escape such as
    `\\x1b`, so that a job cannot move the cursor, recolour or clear the operator's screen.

    With `single_line`, newlines and tabs are shown as `\\n` and `\\t` too."""
    if not text:
        return ""
    if text.isprintable():
        return text  # the common case: no control, format or separator character at all
    safe = _CONTROL.sub(_escape, text)
    if single_line:
        safe = safe.replace("\n", "\\n").replace("\t", "\\t")
    return safe


def last_line(text: str | None) -> str:
    """The last non-blank line of a text (an error summary), made printable."""
    if not text:
        return ""
    for line in reversed(text.splitlines()):
        if line.strip():
            return printable(line.strip(), single_line=True)
    return ""


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _finite(data: Any) -> Any:
    """`data` with each infinite or NaN number as text, since JSON has no such numbers."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data


def safe_json(data: Any, indent: int | None = 2) -> str:
    """JSON text that is safe to print: Unicode kept readable, but the characters that could
    take over a terminal escaped as \\u009b and the like, so the text decodes to `data`
    (an infinite number, which JSON lacks, as the string "inf")."""
    try:
        text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:  # an infinite number, from a value another program stored
        text = json.dumps(_finite(data), indent=indent, ensure_ascii=False)
    return _JSON_UNSAFE.sub(_json_escape, text)
