-- Migration 1: jobs, attempts, workers, stop requests, per-state counters.

CREATE TABLE jobs (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    command         TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN
                        ('pending','processing','completed','failed','dead')),
    priority        INTEGER NOT NULL DEFAULT 0,
    run_at          INTEGER NOT NULL,
    max_retries     INTEGER NOT NULL,
    timeout         REAL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    runs            INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT UNIQUE,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    claimed_at      INTEGER,
    worker_id       TEXT,
    worker_pid      INTEGER,
    finished_at     INTEGER,
    exit_code       INTEGER,
    last_error      TEXT,
    CHECK ((state = 'processing') = (worker_id IS NOT NULL))
);
-- The claim order, over claimable jobs only.
CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq)
    WHERE state IN ('pending', 'failed');
-- Keyset pages per state.
CREATE INDEX jobs_state_seq ON jobs (state, seq);
-- Jobs in flight per owner, for recovery.
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';

CREATE TABLE attempts (
    id           INTEGER PRIMARY KEY,
    job_seq      INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    number       INTEGER NOT NULL,
    worker_id    TEXT,
    scheduled_at INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    exit_code    INTEGER,
    outcome      TEXT    NOT NULL,
    output       TEXT    NOT NULL DEFAULT '',
    error        TEXT
);
CREATE INDEX attempts_job ON attempts (job_seq, number);
CREATE INDEX attempts_finished ON attempts (finished_at);

CREATE TABLE workers (
    id             TEXT PRIMARY KEY,
    pool_id        TEXT    NOT NULL,
    pid            INTEGER NOT NULL,
    host           TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    started_at     INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL,
    stopped_at     INTEGER,
    current_job    TEXT,
    jobs_done      INTEGER NOT NULL DEFAULT 0,
    jobs_failed    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX workers_status ON workers (status);

CREATE TABLE stop_requests (
    id           INTEGER PRIMARY KEY,
    requested_at INTEGER NOT NULL
);

-- Counts per state, so `status` is constant time at any size. State changes keep them
-- by trigger; inserts add theirs once per statement in the store (a per-row trigger
-- costs a third of bulk enqueue time).
CREATE TABLE state_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO state_counts (state, n) VALUES
    ('pending', 0), ('processing', 0), ('completed', 0), ('failed', 0), ('dead', 0);

CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs
    WHEN OLD.state <> NEW.state BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
END;
