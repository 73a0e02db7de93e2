"""SQLite schema as numbered migrations; `PRAGMA user_version` records the last one applied."""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: jobs, attempts, workers, stop requests, per-state counters
    """
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
    """,
    # 2: attempt totals and outcomes per 10 s, kept by trigger, so that `stats` and the
    # console's rates take the same time at any size. They count every attempt ever recorded
    # (a counter never goes down), whatever later becomes of its job.
    """
    CREATE TABLE attempt_totals (
        outcome TEXT    PRIMARY KEY,
        n       INTEGER NOT NULL,
        retries INTEGER NOT NULL  -- of them, runs after a job's first
    ) WITHOUT ROWID;
    INSERT INTO attempt_totals (outcome, n, retries)
        SELECT outcome, count(*), sum(number > 1) FROM attempts GROUP BY outcome;

    -- Finished attempts per 10 s of the clock (finished_at / 10000), cancelled ones apart:
    -- fine enough for per-minute rates over a window that ends now.
    CREATE TABLE attempt_rates (
        slot      INTEGER PRIMARY KEY,
        completed INTEGER NOT NULL,
        failed    INTEGER NOT NULL  -- failed, timeout or lost
    );
    INSERT INTO attempt_rates (slot, completed, failed)
        SELECT finished_at / 10000, sum(outcome = 'completed'), sum(outcome <> 'completed')
          FROM attempts WHERE outcome <> 'cancelled' GROUP BY finished_at / 10000;

    CREATE TRIGGER attempts_count_insert AFTER INSERT ON attempts BEGIN
        INSERT INTO attempt_totals (outcome, n, retries) VALUES (NEW.outcome, 1, NEW.number > 1)
            ON CONFLICT (outcome) DO UPDATE SET n = n + 1, retries = retries + excluded.retries;
        INSERT INTO attempt_rates (slot, completed, failed)
            SELECT NEW.finished_at / 10000, NEW.outcome = 'completed', NEW.outcome <> 'completed'
             WHERE NEW.outcome <> 'cancelled'
            ON CONFLICT (slot) DO UPDATE SET completed = completed + excluded.completed,
                                               failed = failed + excluded.failed;
    END;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)

# `PRAGMA application_id` of a queuectl database ("qctl"): how a file is known as a queue
# before anything in it is changed. Databases made before it was stamped are known by their
# tables (and get the stamp when next opened).
APPLICATION_ID = int.from_bytes(b"qctl", "big")
TABLES = frozenset({"jobs", "attempts", "workers", "stop_requests", "state_counts"})
