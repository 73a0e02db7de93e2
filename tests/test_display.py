import json

from hypothesis import given
from hypothesis import strategies as st

from queuectl_tui.display import last_line, printable, safe_json


def test_escape_sequences_become_visible_text() -> None:
    assert printable("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert printable("a\rb\x07") == "a\\rb\\x07"
    assert printable("[red]x[/red]") == "[red]x[/red]"


def test_c1_controls_and_bidi_overrides_are_shown_as_escapes() -> None:
    assert printable("a\x9b31mb") == "a\\x9b31mb"
    assert printable("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert printable("naïve café") == "naïve café"


def test_single_line_folds_newlines() -> None:
    assert printable("a\nb\tc", single_line=True) == "a\\nb\\tc"
    assert printable("a\nb") == "a\nb"


def test_last_line_skips_blank_lines() -> None:
    assert last_line("first\nsecond\n\n") == "second"
    assert last_line(None) == ""


UNSAFE_IN_JSON = [chr(c) for c in range(0x7F, 0xA0)] + [
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]


def test_safe_json_escapes_c1_controls_and_bidi_marks() -> None:
    text = "".join(UNSAFE_IN_JSON) + "naïve ✓ \x1b"
    out = safe_json({"output": text})
    assert not any(char in out for char in UNSAFE_IN_JSON)
    assert "\\u009b" in out and "\\u202e" in out and "\\u001b" in out
    assert "naïve ✓" in out  # other Unicode stays readable
    assert json.loads(out) == {"output": text}


def test_safe_json_writes_infinite_numbers_as_text() -> None:
    assert json.loads(safe_json({"timeout": float("inf")})) == {"timeout": "inf"}


@given(st.text(st.characters(codec=None, categories=None)))
def test_safe_json_round_trips_any_text(text: str) -> None:
    out = safe_json([text, {text: text}])
    assert json.loads(out) == [text, {text: text}]
    assert not any(char in out for char in UNSAFE_IN_JSON)
    out.encode("utf-8")  # printable as UTF-8 even with a lone surrogate
