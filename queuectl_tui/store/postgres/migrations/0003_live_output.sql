-- Migration 3: live output. The pieces of a running attempt's output, as its pool reads them
-- (see engine/live_output.py): only the newest output-limit bytes of each job's latest run
-- are kept, and they stay after the run ends, so a reader that followed it sees the rest.
-- They go with their job.

CREATE TABLE output_chunks (
    job_seq     bigint  NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    run         integer NOT NULL,
    seq         integer NOT NULL,
    stream      text    NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    byte_offset bigint  NOT NULL,
    body        text    NOT NULL,
    at          bigint  NOT NULL,
    PRIMARY KEY (job_seq, run, seq)
);
