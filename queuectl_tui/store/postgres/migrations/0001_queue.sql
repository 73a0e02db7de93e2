-- Migration 1: the queue as SQLite's migrations 1 to 5 left it, in PostgreSQL's terms.
-- Times are ms since the epoch (bigint), read from the database's clock by every host.
-- Names and keys compare byte by byte (COLLATE "C"): they are identifiers, not prose, and
-- their indexes build and search several times faster than under a locale's rules.
--
-- Counters (jobs per queue and state, attempt totals, rates, histograms, event counts) are
-- kept by statement triggers that only ever INSERT into a *_deltas table: concurrent pools
-- then never wait for each other on a hot counter row, and no two transactions can deadlock
-- on counters taken in different orders. fold_deltas() moves the deltas into the totals
-- (one folder at a time, under an advisory lock); a reader sums the totals and the deltas
-- not folded yet, which MVCC shows it consistently.

CREATE TABLE jobs (
    seq                 bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                  text    COLLATE "C" NOT NULL UNIQUE,
    command             text    NOT NULL,
    queue               text    COLLATE "C" NOT NULL DEFAULT 'default',
    state               text    COLLATE "C" NOT NULL DEFAULT 'pending' CHECK (state IN
                            ('pending','processing','completed','failed','dead','cancelled')),
    priority            bigint  NOT NULL DEFAULT 0,
    run_at              bigint  NOT NULL,
    max_retries         bigint  NOT NULL,
    timeout             double precision,
    attempts            bigint  NOT NULL DEFAULT 0,
    runs                bigint  NOT NULL DEFAULT 0,
    idempotency_key     text    COLLATE "C",
    created_at          bigint  NOT NULL,
    updated_at          bigint  NOT NULL,
    claimed_at          bigint,
    worker_id           text,
    worker_pid          bigint,
    finished_at         bigint,
    exit_code           bigint,
    last_error          text,
    cancel_requested_at bigint,
    job_type            text    COLLATE "C",
    payload             text,  -- JSON; given to the command, never to the shell
    CHECK ((state = 'processing') = (worker_id IS NOT NULL))
);
-- Idempotency keys are unique where there is one.
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The claim order over claimable jobs: priority, then run_at, then creation order.
CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq) WHERE state IN ('pending', 'failed');
-- The same within one queue, for pools that serve named queues and for `queue list`.
CREATE INDEX jobs_queue_ready ON jobs (queue, priority DESC, run_at, seq)
    WHERE state IN ('pending', 'failed');
-- Waiting jobs by queue and run_at: a queue's longest-waiting due job, and the next run_at
-- after a moment (a retry's backoff ending, a job scheduled later), each a seek per queue.
CREATE INDEX jobs_waiting ON jobs (queue, run_at) WHERE state IN ('pending', 'failed');
-- Keyset pages per state.
CREATE INDEX jobs_state_seq ON jobs (state, seq);
-- Jobs in flight: per owner for recovery, per queue for queue limits.
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';
CREATE INDEX jobs_running_queue ON jobs (queue) WHERE state = 'processing';
-- Retention: jobs by state and the time they last finished.
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;
-- The waiting jobs of one type, for a per-type admission limit.
CREATE INDEX jobs_waiting_type ON jobs (job_type)
    WHERE state IN ('pending', 'failed') AND job_type IS NOT NULL;

CREATE TABLE attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_seq      bigint NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    queue        text   NOT NULL,  -- its job's, when it ran
    number       bigint NOT NULL,
    worker_id    text,
    scheduled_at bigint NOT NULL,
    started_at   bigint NOT NULL,
    finished_at  bigint NOT NULL,
    exit_code    bigint,
    outcome      text   NOT NULL,
    output       text   NOT NULL DEFAULT '',
    error        text
);
CREATE INDEX attempts_job ON attempts (job_seq, number);
CREATE INDEX attempts_finished ON attempts (finished_at);

CREATE TABLE workers (
    id             text PRIMARY KEY,
    pool_id        text   NOT NULL,
    pid            bigint NOT NULL,
    host           text   NOT NULL,
    status         text   NOT NULL,
    started_at     bigint NOT NULL,
    last_heartbeat bigint NOT NULL,
    stopped_at     bigint,
    current_job    text,
    jobs_done      bigint NOT NULL DEFAULT 0,
    jobs_failed    bigint NOT NULL DEFAULT 0
);
CREATE INDEX workers_status ON workers (status);

CREATE TABLE stop_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    requested_at bigint NOT NULL
);

-- What an operator set for a queue; a queue without a row is running, without a limit.
CREATE TABLE queues (
    name        text    PRIMARY KEY,
    paused      boolean NOT NULL DEFAULT false,
    max_running bigint,  -- at most this many of its jobs run at once, over every pool
    updated_at  bigint  NOT NULL
);

-- Every operator's action: when, from which face, by whom, what it touched.
CREATE TABLE audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      bigint NOT NULL,
    face    text   NOT NULL,
    actor   text   NOT NULL,
    host    text   NOT NULL,
    action  text   NOT NULL,
    subject text   NOT NULL,
    touched bigint NOT NULL
);


-- == counters: totals, and the deltas not folded into them yet =============================

CREATE TABLE job_counts (
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, state)
);
CREATE TABLE job_count_deltas (queue text NOT NULL, state text NOT NULL, n bigint NOT NULL);

CREATE TABLE attempt_totals (
    queue   text   NOT NULL,
    outcome text   NOT NULL,
    n       bigint NOT NULL,
    retries bigint NOT NULL,  -- of them, runs after a job's first
    PRIMARY KEY (queue, outcome)
);
CREATE TABLE attempt_total_deltas (
    queue text NOT NULL, outcome text NOT NULL, n bigint NOT NULL, retries bigint NOT NULL
);

-- Finished attempts per 10 s of the clock (finished_at / 10000) and queue.
CREATE TABLE attempt_rates (
    slot      bigint NOT NULL,
    queue     text   NOT NULL,
    completed bigint NOT NULL,
    failed    bigint NOT NULL,  -- failed, timeout or lost
    PRIMARY KEY (slot, queue)
);
CREATE TABLE attempt_rate_deltas (
    slot bigint NOT NULL, queue text NOT NULL, completed bigint NOT NULL, failed bigint NOT NULL
);

-- Queue wait and run time of every finished attempt (cancelled and interrupted ones apart),
-- per bucket: the upper bounds in ms; above the last, le -1.
CREATE TABLE histogram_bounds (le bigint PRIMARY KEY);
INSERT INTO histogram_bounds (le) VALUES (5), (10), (25), (50), (100), (250), (500), (1000),
    (2500), (5000), (10000), (30000), (60000), (300000), (600000), (1800000), (3600000);
CREATE TABLE attempt_histograms (
    metric text   NOT NULL,  -- queue_wait or run_time
    le     bigint NOT NULL,
    n      bigint NOT NULL,
    sum_ms bigint NOT NULL,
    PRIMARY KEY (metric, le)
);
CREATE TABLE attempt_histogram_deltas (
    metric text NOT NULL, le bigint NOT NULL, n bigint NOT NULL, sum_ms bigint NOT NULL
);

-- Events without a row of their own: jobs that became dead, results that came too late
-- (their job was recovered meanwhile) and submissions refused for backpressure.
CREATE TABLE counters (name text PRIMARY KEY, n bigint NOT NULL);
INSERT INTO counters (name, n) VALUES ('dead_lettered', 0), ('late_results', 0),
                                      ('admission_rejected', 0);
CREATE TABLE counter_deltas (name text NOT NULL, n bigint NOT NULL);


-- == what keeps them ===========================================================================

-- The channel a change that may give a worker something to do is announced on: one per
-- schema, so that queues in one database never wake each other's pools.
CREATE FUNCTION queuectl_channel() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT 'queuectl.' || current_schema() $$;

CREATE FUNCTION jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n)
        SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    PERFORM pg_notify(queuectl_channel(), '');
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_inserted();

CREATE FUNCTION jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n)
        SELECT queue, state, sum(n) FROM (
            SELECT o.queue, o.state, -1 AS n FROM old_rows o JOIN new_rows w USING (seq)
             WHERE o.state <> w.state OR o.queue <> w.queue
            UNION ALL
            SELECT w.queue, w.state, 1 FROM old_rows o JOIN new_rows w USING (seq)
             WHERE o.state <> w.state OR o.queue <> w.queue
        ) moved GROUP BY queue, state HAVING sum(n) <> 0;
    INSERT INTO counter_deltas (name, n)
        SELECT 'dead_lettered', count(*) FROM old_rows o JOIN new_rows w USING (seq)
         WHERE w.state = 'dead' AND o.state <> 'dead' HAVING count(*) > 0;
    -- Work that may be claimed now: a job back to pending, or a failed one made due.
    IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows w USING (seq)
                WHERE w.state IN ('pending', 'failed') AND w.run_at <= w.updated_at
                  AND (o.state <> w.state OR o.run_at <> w.run_at)) THEN
        PERFORM pg_notify(queuectl_channel(), '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_updated AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_updated();

CREATE FUNCTION jobs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n)
        SELECT queue, state, -count(*) FROM old_rows GROUP BY queue, state;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_deleted AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_deleted();

CREATE FUNCTION attempts_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO attempt_total_deltas (queue, outcome, n, retries)
        SELECT queue, outcome, count(*), count(*) FILTER (WHERE number > 1)
          FROM new_rows GROUP BY queue, outcome;
    INSERT INTO attempt_rate_deltas (slot, queue, completed, failed)
        SELECT finished_at / 10000, queue, count(*) FILTER (WHERE outcome = 'completed'),
               count(*) FILTER (WHERE outcome <> 'completed')
          FROM new_rows WHERE outcome NOT IN ('cancelled', 'interrupted')
         GROUP BY finished_at / 10000, queue;
    INSERT INTO attempt_histogram_deltas (metric, le, n, sum_ms)
        SELECT metric,
               coalesce((SELECT min(le) FROM histogram_bounds b WHERE b.le >= ms), -1) AS bucket,
               count(*), sum(ms)
          FROM (SELECT 'queue_wait' AS metric, greatest(0, started_at - scheduled_at) AS ms
                  FROM new_rows WHERE outcome NOT IN ('cancelled', 'interrupted')
                UNION ALL
                SELECT 'run_time', greatest(0, finished_at - started_at)
                  FROM new_rows WHERE outcome NOT IN ('cancelled', 'interrupted')) timed
         GROUP BY metric, bucket;
    RETURN NULL;
END $$;
CREATE TRIGGER attempts_recorded AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION attempts_recorded();

-- A queue resumed, or its limit raised: its waiting jobs may be claimable now.
CREATE FUNCTION queue_settings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(queuectl_channel(), '');
    RETURN NULL;
END $$;
CREATE TRIGGER queue_settings_changed AFTER INSERT OR UPDATE ON queues
    FOR EACH STATEMENT EXECUTE FUNCTION queue_settings_changed();

-- Move the deltas into the totals. Each DELETE ... RETURNING moves exactly the rows it
-- deleted, in the transaction that adds them up, so a reader sees them once, on one side or
-- the other. The sorted upserts take the total rows in one order; only the folder (one at a
-- time: the caller holds the fold lock) writes them.
CREATE FUNCTION fold_deltas() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH moved AS (DELETE FROM job_count_deltas RETURNING queue, state, n)
    INSERT INTO job_counts AS t (queue, state, n)
        SELECT queue, state, sum(n) FROM moved GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state) DO UPDATE SET n = t.n + excluded.n;
    WITH moved AS (DELETE FROM attempt_total_deltas RETURNING queue, outcome, n, retries)
    INSERT INTO attempt_totals AS t (queue, outcome, n, retries)
        SELECT queue, outcome, sum(n), sum(retries) FROM moved
         GROUP BY queue, outcome ORDER BY queue, outcome
        ON CONFLICT (queue, outcome) DO UPDATE SET n = t.n + excluded.n,
                                                   retries = t.retries + excluded.retries;
    WITH moved AS (DELETE FROM attempt_rate_deltas RETURNING slot, queue, completed, failed)
    INSERT INTO attempt_rates AS t (slot, queue, completed, failed)
        SELECT slot, queue, sum(completed), sum(failed) FROM moved
         GROUP BY slot, queue ORDER BY slot, queue
        ON CONFLICT (slot, queue) DO UPDATE SET completed = t.completed + excluded.completed,
                                                failed = t.failed + excluded.failed;
    WITH moved AS (DELETE FROM attempt_histogram_deltas RETURNING metric, le, n, sum_ms)
    INSERT INTO attempt_histograms AS t (metric, le, n, sum_ms)
        SELECT metric, le, sum(n), sum(sum_ms) FROM moved GROUP BY metric, le ORDER BY metric, le
        ON CONFLICT (metric, le) DO UPDATE SET n = t.n + excluded.n,
                                               sum_ms = t.sum_ms + excluded.sum_ms;
    WITH moved AS (DELETE FROM counter_deltas RETURNING name, n)
    INSERT INTO counters AS t (name, n)
        SELECT name, sum(n) FROM moved GROUP BY name ORDER BY name
        ON CONFLICT (name) DO UPDATE SET n = t.n + excluded.n;
END $$;
