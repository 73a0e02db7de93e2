-- Migration 3: named queues (paused or not, with an optional limit on running jobs), the
-- cancelled state and an operator's request to cancel a running job, counters per queue and
-- state, and the audit trail of operators' actions. A run stopped by a forced shutdown,
-- recorded until now as 'cancelled', is 'interrupted' from now on: an operator's cancel and
-- a shutdown never mix.
--
-- The jobs table is rebuilt, because a CHECK constraint cannot be altered in place (SQLite's
-- documented procedure: make the new table, copy, drop the old, rename). Foreign keys are
-- off while migrations run (connection.py), so dropping the old table leaves attempts be.

CREATE TABLE jobs_v3 (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
    command             TEXT    NOT NULL,
    queue               TEXT    NOT NULL DEFAULT 'default',
    state               TEXT    NOT NULL CHECK (state IN
                            ('pending','processing','completed','failed','dead','cancelled')),
    priority            INTEGER NOT NULL DEFAULT 0,
    run_at              INTEGER NOT NULL,
    max_retries         INTEGER NOT NULL,
    timeout             REAL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    runs                INTEGER NOT NULL DEFAULT 0,
    idempotency_key     TEXT UNIQUE,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    claimed_at          INTEGER,
    worker_id           TEXT,
    worker_pid          INTEGER,
    finished_at         INTEGER,
    exit_code           INTEGER,
    last_error          TEXT,
    cancel_requested_at INTEGER,
    CHECK ((state = 'processing') = (worker_id IS NOT NULL))
);
INSERT INTO jobs_v3 (seq, id, command, state, priority, run_at, max_retries, timeout, attempts,
                     runs, idempotency_key, created_at, updated_at, claimed_at, worker_id,
                     worker_pid, finished_at, exit_code, last_error)
    SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
           idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
           finished_at, exit_code, last_error
      FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v3 RENAME TO jobs;

-- The claim order within a queue, over claimable jobs only: a claim looks into each queue
-- it may take from (not paused, under its limit) and takes the best of their firsts.
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, run_at, seq)
    WHERE state IN ('pending', 'failed');
-- Keyset pages per state.
CREATE INDEX jobs_state_seq ON jobs (state, seq);
-- Jobs in flight per owner, for recovery and cancel requests.
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';
-- Jobs by state and the time they last finished, for retention. (Partial on finished_at,
-- not on the state: a range on finished_at implies the index's condition, a bound state
-- parameter would not.)
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- Counts per queue and state, so that `status` and `queue list` are constant time at any
-- size and a claim knows how many jobs of a queue run. State and queue changes keep them by
-- trigger; inserts add theirs once per statement in the store.
CREATE TABLE queue_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;
INSERT INTO queue_counts (queue, state, n) SELECT 'default', state, n FROM state_counts;
DROP TABLE state_counts;

CREATE TRIGGER jobs_count_update AFTER UPDATE OF state, queue ON jobs
    WHEN OLD.state <> NEW.state OR OLD.queue <> NEW.queue BEGIN
    UPDATE queue_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO queue_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE queue_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;

-- What an operator set for a queue; a queue without a row is running, without a limit.
CREATE TABLE queues (
    name        TEXT    PRIMARY KEY,
    paused      INTEGER NOT NULL DEFAULT 0,
    max_running INTEGER,  -- at most this many of its jobs run at once, over every pool
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- Every operator's action: when, from which face, by whom, what it touched.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    face    TEXT    NOT NULL,  -- cli, console, http, api
    actor   TEXT    NOT NULL,  -- the OS user, or the HTTP token's name
    host    TEXT    NOT NULL,
    action  TEXT    NOT NULL,
    subject TEXT    NOT NULL,  -- the jobs, queue or filter it was given
    touched INTEGER NOT NULL   -- how many jobs (or queues) it changed
);

UPDATE attempts SET outcome = 'interrupted' WHERE outcome = 'cancelled';
UPDATE attempt_totals SET outcome = 'interrupted' WHERE outcome = 'cancelled';

-- Rates count completed and failed runs; cancelled and interrupted ones are neither.
DROP TRIGGER attempts_count_insert;
CREATE TRIGGER attempts_count_insert AFTER INSERT ON attempts BEGIN
    INSERT INTO attempt_totals (outcome, n, retries) VALUES (NEW.outcome, 1, NEW.number > 1)
        ON CONFLICT (outcome) DO UPDATE SET n = n + 1, retries = retries + excluded.retries;
    INSERT INTO attempt_rates (slot, completed, failed)
        SELECT NEW.finished_at / 10000, NEW.outcome = 'completed', NEW.outcome <> 'completed'
         WHERE NEW.outcome NOT IN ('cancelled', 'interrupted')
        ON CONFLICT (slot) DO UPDATE SET completed = completed + excluded.completed,
                                           failed = failed + excluded.failed;
END;
