-- Migration 7: live output. The pieces of a running attempt's output, as its pool reads them
-- (see engine/live_output.py): only the newest output-limit bytes of each job's latest run
-- are kept, and they stay after the run ends, so a reader that followed it sees the rest.
-- They go with their job.

CREATE TABLE output_chunks (
    job_seq     INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    run         INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    stream      TEXT    NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    byte_offset INTEGER NOT NULL,
    body        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (job_seq, run, seq)
) WITHOUT ROWID;
