"""The rows both backends' append_output statements take for a piece of live output."""

from __future__ import annotations

from .base import OutputAppend


def chunk_rows(append: OutputAppend) -> list[tuple[object, ...]]:
    """append_output's parameters per piece: the piece, then the fence (job, worker, run)."""
    fence = (append.job_id, append.worker_id, append.run)
    return [
        (append.run, c.seq, c.stream.value, c.byte_offset, c.text, c.at, *fence)
        for c in append.chunks
    ]


def forget_params(append: OutputAppend) -> tuple[object, ...] | None:
    """forget_output's parameters, when this append leaves something to forget: the first
    piece of a run (the pieces of runs before the previous one go), or a piece past the
    output limit."""
    if append.chunks and (append.chunks[0].seq == 0 or append.keep_from > 0):
        return (append.job_id, append.run - 1, append.run, append.keep_from)
    return None
