from queuectl_tui.display import last_line, printable


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
