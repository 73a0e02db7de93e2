-- Migration 5: typed jobs (a type name and a JSON payload the command gets on stdin) and the
-- counters that metrics read at scrape time, kept in the store so that they are monotonic
-- across processes and restarts.

ALTER TABLE jobs ADD COLUMN job_type TEXT;
ALTER TABLE jobs ADD COLUMN payload TEXT;  -- JSON; given to the command, never to the shell

-- The waiting jobs of one type, for a per-type admission limit: counting them reads no more
-- index entries than the limit allows.
CREATE INDEX jobs_waiting_type ON jobs (job_type)
    WHERE state IN ('pending', 'failed') AND job_type IS NOT NULL;

-- Events without a row of their own: jobs that became dead, results that came too late
-- (their job was recovered meanwhile) and submissions refused for backpressure.
CREATE TABLE counters (
    name TEXT    PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, n) VALUES ('dead_lettered', 0), ('late_results', 0),
                                      ('admission_rejected', 0);

CREATE TRIGGER jobs_dead_lettered AFTER UPDATE OF state ON jobs
    WHEN NEW.state = 'dead' AND OLD.state <> 'dead' BEGIN
    UPDATE counters SET n = n + 1 WHERE name = 'dead_lettered';
END;

-- Queue wait and run time of every finished attempt (cancelled and interrupted ones apart),
-- counted per bucket: the upper bounds in ms, from 5 ms to an hour; above the last, le -1.
CREATE TABLE histogram_bounds (
    le INTEGER PRIMARY KEY
);
INSERT INTO histogram_bounds (le) VALUES (5), (10), (25), (50), (100), (250), (500), (1000),
    (2500), (5000), (10000), (30000), (60000), (300000), (600000), (1800000), (3600000);

CREATE TABLE attempt_histograms (
    metric TEXT    NOT NULL,  -- queue_wait or run_time
    le     INTEGER NOT NULL,  -- the bucket's upper bound; -1 above the last
    n      INTEGER NOT NULL,
    sum_ms INTEGER NOT NULL,
    PRIMARY KEY (metric, le)
) WITHOUT ROWID;

CREATE TRIGGER attempts_histograms AFTER INSERT ON attempts
    WHEN NEW.outcome NOT IN ('cancelled', 'interrupted') BEGIN
    INSERT INTO attempt_histograms (metric, le, n, sum_ms)
        SELECT 'queue_wait',
               coalesce((SELECT min(le) FROM histogram_bounds
                          WHERE le >= max(0, NEW.started_at - NEW.scheduled_at)), -1),
               1, max(0, NEW.started_at - NEW.scheduled_at)
         WHERE true
        ON CONFLICT (metric, le) DO UPDATE SET n = n + 1, sum_ms = sum_ms + excluded.sum_ms;
    INSERT INTO attempt_histograms (metric, le, n, sum_ms)
        SELECT 'run_time',
               coalesce((SELECT min(le) FROM histogram_bounds
                          WHERE le >= max(0, NEW.finished_at - NEW.started_at)), -1),
               1, max(0, NEW.finished_at - NEW.started_at)
         WHERE true
        ON CONFLICT (metric, le) DO UPDATE SET n = n + 1, sum_ms = sum_ms + excluded.sum_ms;
END;
