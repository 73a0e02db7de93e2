"""A run's output as numbered pieces for the store while the run goes on (live output).

The pool reads a command's stdout and stderr as they come; every `take()` turns what came since
the last one into pieces, one per stretch of a single stream, decoded as UTF-8 across the
reads (a character split between two reads is kept whole). Only the newest `limit` bytes are
ever kept: what a piece would carry beyond that is skipped (the pieces' byte offsets show the
gap: an offset counts the UTF-8 of the pieces before it plus the bytes skipped), and the
store is told to forget the pieces that fell out of the last `limit` bytes.
"""

from __future__ import annotations

import codecs
from collections import deque
from dataclasses import dataclass

from ..models import OutputChunk, Stream


@dataclass(frozen=True, slots=True)
class Taken:
    chunks: list[OutputChunk]
    keep_from: int  # the run's pieces numbered below this fell out of the limit


def _decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


class LiveOutput:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._pending: deque[tuple[Stream, bytes]] = deque()
        self._pending_bytes = 0
        self._offset = 0  # bytes of the pieces taken so far, and of those skipped
        self._next_seq = 0
        self._kept: deque[tuple[int, int]] = deque()  # (seq, bytes) of the pieces in the limit
        self._kept_bytes = 0
        self._decoders = {Stream.STDOUT: _decoder(), Stream.STDERR: _decoder()}
        self.sent_any = False  # a piece was taken: the run is live in the store

    @property
    def pending(self) -> bool:
        return self._pending_bytes > 0

    def feed(self, stream: Stream, data: bytes) -> None:
        self._pending.append((stream, data))
        self._pending_bytes += len(data)
        if self._pending_bytes > 2 * self.limit + 65536:
            self._skip(self._pending_bytes - self.limit)  # bound memory between takes

    def take(self, now: int, final: bool = False) -> Taken | None:
        """The pieces since the last take (None: nothing new). `final` at the run's end:
        bytes a decoder holds back for the rest of a character come out as U+FFFD."""
        if self._pending_bytes > self.limit:
            self._skip(self._pending_bytes - self.limit)
        stretches: list[tuple[Stream, bytearray]] = []
        for stream, data in self._pending:
            if stretches and stretches[-1][0] is stream:
                stretches[-1][1].extend(data)
            else:
                stretches.append((stream, bytearray(data)))
        self._pending.clear()
        self._pending_bytes = 0
        chunks: list[OutputChunk] = []
        for stream, stretch in stretches:
            self._emit(chunks, stream, self._decoders[stream].decode(bytes(stretch), final), now)
        if final:
            for stream, decoder in self._decoders.items():
                self._emit(chunks, stream, decoder.decode(b"", final=True), now)
        if not chunks:
            return None
        while self._kept_bytes > self.limit and len(self._kept) > 1:
            _, size = self._kept.popleft()
            self._kept_bytes -= size
        self.sent_any = True
        return Taken(chunks, self._kept[0][0])

    def _emit(self, chunks: list[OutputChunk], stream: Stream, text: str, now: int) -> None:
        if not text:
            return
        # Output is untrusted bytes: NUL becomes U+FFFD, as in the stored output.
        text = text.replace("\x00", "\ufffd")
        size = len(text.encode())
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        chunks.append(OutputChunk(seq, stream, text, now, self._offset))
        self._offset += size
        self._kept.append((seq, size))
        self._kept_bytes += size

    def _skip(self, excess: int) -> None:
        """Drop `excess` bytes from the front of what is pending."""
        while excess > 0 and self._pending:
            stream, data = self._pending[0]
            if len(data) <= excess:
                self._pending.popleft()
                cut = len(data)
            else:
                self._pending[0] = (stream, data[excess:])
                cut = excess
            excess -= cut
            self._pending_bytes -= cut
            self._offset += cut
        # A character cut in two is not continued from the far side of a gap.
        self._decoders = {Stream.STDOUT: _decoder(), Stream.STDERR: _decoder()}
