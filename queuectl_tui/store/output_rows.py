"""The rows both backends' append_output statements take for a piece of live output."""

from __future__ import annotations

from .base import OutputAppend


def chunk_rows(append: OutputAppend) -> list[dict[str, object]]:
    """append_output's parameters per piece: the piece, and the fence (job, worker, run)."""
    fence = {"job_id": append.job_id, "worker_id": append.worker_id, "run": append.run}
    return [
        {
            "seq": c.seq,
            "stream": c.stream.value,
            "byte_offset": c.byte_offset,
            "body": c.text,
            "at": c.at,
            **fence,
        }
        for c in append.chunks
    ]


def forget_params(append: OutputAppend) -> dict[str, object] | None:
    """forget_output's parameters, when this append leaves something to forget: the first
    piece of a run (the pieces of runs before the previous one go), or a piece past the
    output limit."""
    if append.chunks and (append.chunks[0].seq == 0 or append.keep_from > 0):
        return {
            "job_id": append.job_id,
            "before_run": append.run - 1,
            "run": append.run,
            "keep_from": append.keep_from,
        }
    return None
