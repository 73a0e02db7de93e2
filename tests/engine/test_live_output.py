"""A run's output in pieces for the store: streams, characters split between reads, the
output limit."""

from __future__ import annotations

from queuectl_tui.engine.live_output import LiveOutput
from queuectl_tui.models import Stream

OUT, ERR = Stream.STDOUT, Stream.STDERR


def test_each_take_gives_a_piece_per_stretch_of_one_stream() -> None:
    live = LiveOutput(1000)
    assert live.take(1) is None and not live.sent_any
    live.feed(OUT, b"a\n")
    live.feed(OUT, b"b\n")
    live.feed(ERR, b"oops\n")
    live.feed(OUT, b"c\n")
    taken = live.take(5)
    assert taken is not None and live.sent_any and not live.pending
    assert [(c.seq, c.stream, c.text, c.byte_offset, c.at) for c in taken.chunks] == [
        (0, OUT, "a\nb\n", 0, 5),
        (1, ERR, "oops\n", 4, 5),
        (2, OUT, "c\n", 9, 5),
    ]
    live.feed(OUT, b"d\n")
    again = live.take(6)
    assert again is not None
    assert [(c.seq, c.byte_offset) for c in again.chunks] == [(3, 11)]
    assert again.keep_from == 0


def test_a_character_split_between_reads_is_kept_whole() -> None:
    live = LiveOutput(1000)
    live.feed(OUT, b"caf\xc3")
    first = live.take(1)
    live.feed(OUT, b"\xa9!")
    second = live.take(2)
    assert first is not None and second is not None
    assert [c.text for c in first.chunks + second.chunks] == ["caf", "é!"]
    assert second.chunks[0].byte_offset == 3


def test_a_run_ending_mid_character_and_nul_bytes_are_replaced() -> None:
    live = LiveOutput(1000)
    live.feed(ERR, b"a\x00b\xc3")
    taken = live.take(1, final=True)
    assert taken is not None
    assert "".join(c.text for c in taken.chunks) == "a\ufffdb\ufffd"


def test_only_the_newest_limit_bytes_are_kept() -> None:
    live = LiveOutput(10)
    live.feed(OUT, b"0123456789ABCDEF")  # 16 bytes: the first 6 are skipped
    taken = live.take(1)
    assert taken is not None
    [chunk] = taken.chunks
    assert (chunk.text, chunk.byte_offset, taken.keep_from) == ("6789ABCDEF", 6, 0)
    live.feed(ERR, b"xyz")
    taken = live.take(2)
    assert taken is not None
    # The first piece no longer fits within the last 10 bytes: the store may forget it.
    assert (taken.chunks[0].byte_offset, taken.keep_from) == (16, 1)


def test_memory_between_takes_is_bounded() -> None:
    live = LiveOutput(100)
    for _ in range(10_000):
        live.feed(OUT, b"x" * 100)
    assert live._pending_bytes <= 2 * 100 + 65536
    taken = live.take(1)
    assert taken is not None
    assert sum(len(c.text) for c in taken.chunks) == 100
    assert taken.chunks[0].byte_offset == 10_000 * 100 - 100
