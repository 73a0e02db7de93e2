"""Making untrusted text (ids, commands, output, errors) safe to show in a terminal."""

from __future__ import annotations

import re

# C0 and C1 control characters except newline and tab, DEL, and the bidirectional
# overrides and isolates that can make displayed text read differently from what it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
