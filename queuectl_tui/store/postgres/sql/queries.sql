-- Every statement the PostgreSQL store runs, each after a `-- name:` line that the store calls
-- it by. Parameters are psycopg's: %s in order, %(name)s by name. Lists travel as one array
-- parameter (= ANY(%s)), so no statement is put together at run time except list_jobs, from
-- its fixed parts. Active workers are those with status idle, busy or stopping.
-- The jobs table's columns are exactly the fields of models.Job, so `*` reads a Job.


-- == jobs ====================================================================================

-- name: insert_job
-- A taken id or idempotency key inserts nothing (no error, so the transaction goes on); the
-- store then looks up which it was.
INSERT INTO jobs (id, command, state, priority, run_at, max_retries, timeout, idempotency_key,
                  created_at, updated_at, queue, job_type, payload, cwd, env)
VALUES (%(id)s, %(command)s, 'pending', %(priority)s, %(run_at)s, %(max_retries)s, %(timeout)s, %(idempotency_key)s, %(created_at)s, %(updated_at)s, %(queue)s, %(job_type)s, %(payload)s, %(cwd)s, %(env)s)
ON CONFLICT DO NOTHING
RETURNING *

-- name: job_by_idempotency_key
SELECT * FROM jobs WHERE idempotency_key = %(key)s

-- name: job_by_id
SELECT * FROM jobs WHERE id = %(id)s

-- name: job_attempts
SELECT j.id AS job_id, a.number, a.worker_id, a.scheduled_at, a.started_at, a.finished_at,
       a.exit_code, a.outcome, a.output, a.error
  FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE j.id = %(id)s ORDER BY a.id

-- name: list_jobs
-- One keyset page: the store adds WHERE and the list_jobs_* conditions it was asked for,
-- joined by AND, then one of the two orders.
SELECT * FROM jobs

-- name: list_jobs_in_state
state = %s

-- name: list_jobs_in_queue
queue = %s

-- name: list_jobs_after
seq > %s

-- name: list_jobs_before
seq < %s

-- name: list_jobs_matching
-- Free text: a part of the id, the command or the last error, whatever the case. The pattern
-- has its own %, _ and \ escaped with \.
(id ILIKE %s ESCAPE '\' OR command ILIKE %s ESCAPE '\' OR last_error ILIKE %s ESCAPE '\')

-- name: list_jobs_exit
exit_code = %s

-- name: list_jobs_worker
worker_id ILIKE %s ESCAPE '\'

-- name: list_jobs_since
updated_at >= %s

-- name: list_jobs_error
-- The failure of failed and dead jobs, found through their index (jobs_error_groups) however
-- few they are among all jobs.
seq IN (SELECT seq FROM jobs
         WHERE error_group IS NOT NULL
           AND (error_group ILIKE %s ESCAPE '\' OR last_error ILIKE %s ESCAPE '\'))

-- name: count_jobs
SELECT count(*) FROM jobs

-- name: list_jobs_oldest_first
ORDER BY seq LIMIT %s

-- name: list_jobs_newest_first
ORDER BY seq DESC LIMIT %s

-- name: list_jobs_ended
-- In the order the jobs ended (dead letters by time of death): the end, then seq, through
-- jobs_finished; a page goes on from where its anchor job ended. Only ended jobs: a failed
-- (or retried) one keeps its last run's end, and is not one.
state IN ('completed', 'dead', 'cancelled') AND finished_at IS NOT NULL

-- name: list_jobs_ended_after
(finished_at, seq) > (SELECT finished_at, seq FROM jobs WHERE seq = %s)

-- name: list_jobs_ended_before
(finished_at, seq) < (SELECT finished_at, seq FROM jobs WHERE seq = %s)

-- name: list_jobs_ended_after_at
-- As list_jobs_ended_after, from an end and a seq the caller kept (a cursor of GET /jobs).
(finished_at, seq) > (%s, %s)

-- name: list_jobs_ended_before_at
(finished_at, seq) < (%s, %s)

-- name: list_jobs_ended_first
ORDER BY finished_at, seq LIMIT %s

-- name: list_jobs_ended_last
ORDER BY finished_at DESC, seq DESC LIMIT %s

-- name: retry_all_dead
UPDATE jobs SET state = 'pending', attempts = 0, run_at = %(now)s, updated_at = %(now)s,
                cancel_requested_at = NULL, blocked_by = NULL
 WHERE state = 'dead'
RETURNING id

-- name: retry_dead_among
UPDATE jobs SET state = 'pending', attempts = 0, run_at = %s, updated_at = %s,
                cancel_requested_at = NULL, blocked_by = NULL
 WHERE state = 'dead' AND id = ANY(%s)
RETURNING id

-- name: retry_finished_among
-- Dead and cancelled jobs go back to pending with a fresh retry budget.
UPDATE jobs SET state = 'pending', attempts = 0, run_at = %s, updated_at = %s,
                cancel_requested_at = NULL, blocked_by = NULL
 WHERE state IN ('dead', 'cancelled') AND id = ANY(%s)
RETURNING id

-- name: retry_now_among
-- A failed job waiting out its backoff is ready at once, its attempts kept.
UPDATE jobs SET run_at = %s, updated_at = %s
 WHERE state = 'failed' AND id = ANY(%s)
RETURNING id

-- name: cancel_among
-- One statement decides on each job's latest, locked row: a waiting job ends cancelled, a
-- running one gets a request to cancel (the first request's time is kept; its pool stops
-- the command and records the run cancelled). Two statements would each miss a job that
-- moves between them (a run ending, a claim). RETURNING says which it was.
UPDATE jobs SET state = CASE WHEN state = 'processing' THEN state ELSE 'cancelled' END,
                finished_at = CASE WHEN state = 'processing' THEN finished_at
                                   ELSE %(now)s END,
                last_error = CASE WHEN state = 'processing' THEN last_error
                                  ELSE 'cancelled by an operator' END,
                cancel_requested_at = coalesce(cancel_requested_at, %(now)s),
                updated_at = %(now)s
 WHERE state IN ('pending', 'failed', 'waiting', 'processing') AND id = ANY(%(ids)s)
RETURNING id, state

-- name: cancel_requested_among
SELECT id FROM jobs
 WHERE state = 'processing' AND cancel_requested_at IS NOT NULL AND id = ANY(%s)

-- name: states_among
SELECT id, state FROM jobs WHERE id = ANY(%s)

-- name: delete_among
-- Attempts go with their job (ON DELETE CASCADE); a running job is never deleted.
DELETE FROM jobs WHERE state <> 'processing' AND id = ANY(%s)
RETURNING id

-- name: delete_in_state_among
-- A delete by filter: only jobs still in the state the filter named.
DELETE FROM jobs WHERE state <> 'processing' AND state = %s AND id = ANY(%s)
RETURNING id

-- name: prune_batch
-- The oldest finished jobs of a state, a batch at a time; rows another transaction holds are
-- left for the next batch.
DELETE FROM jobs WHERE seq IN (
    SELECT seq FROM jobs
     WHERE state = %(state)s AND finished_at < %(before)s AND finished_at IS NOT NULL
     ORDER BY finished_at LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED)
  AND state <> 'processing'

-- name: count_prunable
SELECT count(*) FROM jobs WHERE state = %(state)s AND finished_at < %(before)s AND finished_at IS NOT NULL


-- == live output =============================================================================

-- name: append_output
-- Fenced: a piece is kept only while its run is the job's run under that worker.
INSERT INTO output_chunks (job_seq, run, seq, stream, byte_offset, body, at)
SELECT seq, %(run)s, %(seq)s, %(stream)s, %(byte_offset)s, %(body)s, %(at)s FROM jobs
 WHERE id = %(job_id)s AND state = 'processing' AND worker_id = %(worker_id)s AND runs = %(run)s
ON CONFLICT DO NOTHING

-- name: forget_output
-- The pieces of runs before the one before (a follower may still be reading that one), and
-- this run's below the first one kept.
DELETE FROM output_chunks
 WHERE job_seq = (SELECT seq FROM jobs WHERE id = %(job_id)s)
   AND (run < %(before_run)s OR (run = %(run)s AND seq < %(keep_from)s))

-- name: output_chunks
SELECT c.seq, c.stream, c.body AS text, c.at, c.byte_offset
  FROM output_chunks c JOIN jobs j ON j.seq = c.job_seq
 WHERE j.id = %(id)s AND c.run = %(run)s AND c.seq > %(after_seq)s
 ORDER BY c.seq LIMIT %(limit)s


-- == error groups ============================================================================

-- name: error_groups
-- The groups of one state's jobs, largest first, each with its latest job (jobs_error_groups).
SELECT g.error_group, count(*), min(g.finished_at), max(g.finished_at),
       (SELECT e.id FROM jobs e
         WHERE e.state = g.state AND e.error_group = g.error_group
         ORDER BY e.finished_at DESC LIMIT 1)
  FROM jobs g
 WHERE g.state = %(state)s AND g.error_group IS NOT NULL
 GROUP BY g.state, g.error_group
 ORDER BY count(*) DESC, g.error_group
 LIMIT %(limit)s

-- name: error_group_ids
SELECT id FROM jobs WHERE state = %(state)s AND error_group = %(fingerprint)s ORDER BY seq


-- == queues ==================================================================================

-- name: queue_settings
SELECT name, paused, max_running FROM queues

-- name: existing_queues
-- The queues that exist: holding a job, or configured (paused, or given a limit).
SELECT queue
  FROM (SELECT queue, n FROM job_counts UNION ALL SELECT queue, n FROM job_count_deltas) c
 GROUP BY queue HAVING sum(n) > 0
UNION
SELECT name FROM queues

-- name: set_queue_paused
INSERT INTO queues (name, paused, updated_at) VALUES (%(name)s, %(value)s, %(now)s)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: set_queue_limit
INSERT INTO queues (name, max_running, updated_at) VALUES (%(name)s, %(value)s, %(now)s)
    ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
                                     updated_at = excluded.updated_at

-- name: lock_limited_queues
-- The queues with a limit a claim may take from, locked in name order until the claiming
-- transaction ends, so that pools claiming from them take turns and never exceed it. Their
-- running jobs are counted by the next statement (running_in_queues), whose snapshot is
-- taken once the locks are held: it sees what the pool before us claimed. A limit lifted
-- since the settings were read is re-checked here and gone.
SELECT name, max_running FROM queues
 WHERE name = ANY(%(queues)s) AND max_running IS NOT NULL
 ORDER BY name
   FOR UPDATE

-- name: oldest_due
-- When the longest-waiting due job of one queue became due.
SELECT min(run_at) FROM jobs WHERE queue = %(queue)s AND state IN ('pending', 'failed') AND run_at <= %(now)s


-- == the audit trail =========================================================================

-- name: record_action
INSERT INTO audit (at, face, actor, host, action, subject, touched)
VALUES (%(at)s, %(face)s, %(actor)s, %(host)s, %(action)s, %(subject)s, %(touched)s)

-- name: list_actions
SELECT id, at, face, actor, host, action, subject, touched FROM audit
 WHERE (%(before)s::bigint IS NULL OR id < %(before)s) ORDER BY id DESC LIMIT %(limit)s


-- == counts and statistics ===================================================================
-- Counters are their totals plus the deltas not folded yet (migration 1).

-- name: job_counts
-- Jobs per queue and state, and how many delta rows were added up (for the fold).
SELECT queue, state, sum(n)::bigint, count(*) FILTER (WHERE delta)
  FROM (SELECT queue, state, n, false AS delta FROM job_counts
        UNION ALL
        SELECT queue, state, n, true FROM job_count_deltas) c
 WHERE %(queue)s::text IS NULL OR queue = %(queue)s
 GROUP BY queue, state

-- name: count_active_workers
SELECT count(*) FROM workers WHERE status IN ('idle', 'busy', 'stopping')

-- name: outcomes_since
SELECT outcome = 'completed', count(*) FROM attempts
 WHERE finished_at > %(since)s AND outcome NOT IN ('cancelled', 'interrupted')
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
 GROUP BY outcome = 'completed'

-- name: attempt_totals
SELECT outcome, sum(n)::bigint, sum(retries)::bigint
  FROM (SELECT queue, outcome, n, retries FROM attempt_totals
        UNION ALL
        SELECT queue, outcome, n, retries FROM attempt_total_deltas) t
 WHERE %(queue)s::text IS NULL OR queue = %(queue)s
 GROUP BY outcome

-- name: latest_timings
SELECT started_at - scheduled_at, finished_at - started_at FROM attempts
 WHERE outcome NOT IN ('cancelled', 'interrupted')
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
 ORDER BY id DESC LIMIT %(limit)s

-- name: attempt_rates
SELECT slot, sum(completed)::bigint, sum(failed)::bigint
  FROM (SELECT slot, queue, completed, failed FROM attempt_rates
         WHERE slot >= %(first)s AND slot <= %(last)s
        UNION ALL
        SELECT slot, queue, completed, failed FROM attempt_rate_deltas
         WHERE slot >= %(first)s AND slot <= %(last)s) r
 WHERE %(queue)s::text IS NULL OR queue = %(queue)s
 GROUP BY slot

-- name: fold
-- Fold the counters' deltas, unless another store is at it (one folder at a time): one
-- statement, its own transaction.
SELECT fold_deltas() WHERE pg_try_advisory_xact_lock(hashtext(current_schema() || '.fold'))


-- == metrics =================================================================================

-- name: metrics_worker_statuses
SELECT status, count(*) FROM workers GROUP BY status

-- name: metrics_attempt_totals
SELECT queue, outcome, sum(n)::bigint, sum(retries)::bigint
  FROM (SELECT queue, outcome, n, retries FROM attempt_totals
        UNION ALL
        SELECT queue, outcome, n, retries FROM attempt_total_deltas) t
 GROUP BY queue, outcome

-- name: metrics_counters
SELECT name, sum(n)::bigint
  FROM (SELECT name, n FROM counters UNION ALL SELECT name, n FROM counter_deltas) c
 GROUP BY name

-- name: metrics_histogram_bounds
SELECT le FROM histogram_bounds ORDER BY le

-- name: metrics_histograms
-- Per bucket, not cumulative; le -1 is the bucket above the last bound.
SELECT metric, le, sum(n)::bigint, sum(sum_ms)::bigint
  FROM (SELECT metric, le, n, sum_ms FROM attempt_histograms
        UNION ALL
        SELECT metric, le, n, sum_ms FROM attempt_histogram_deltas) h
 GROUP BY metric, le


-- == the engine's protocol ===================================================================

-- name: claim
-- Take the best %(n)s due jobs for the workers %(workers)s, in claim order, in one statement.
-- Its cost does not grow with the backlog. The pick goes down the priorities that jobs wait
-- at (`levels`, each found by one seek in jobs_ready when the pick asks for the next) and, at
-- each, takes the due jobs in run_at and creation order with a range scan of jobs_ready that
-- stops at the jobs it locked: jobs scheduled later are never walked past, and a level is
-- looked at only when the ones above it fall short of %(n)s. The shape holds the plan, not
-- the statistics: the scan's conditions are the index's; the queue filter is a CASE, which
-- the planner costs as keeping half the rows whatever the lists hold (as `queue <> ALL(...)`
-- it is costed from the column's statistics: with one queue, as keeping none, and the plan
-- turns to sorting every due job); the inner LIMIT is a constant, a pool's most workers
-- (claims.MOST_CLAIMANTS), so a plan made once for any parameters is the same plan. The
-- exchange's pick is the same (the fragments below), and the due-work check's levels.
-- The MATERIALIZED pick is evaluated once, as written, never flattened into the UPDATE, so
-- the UPDATE touches exactly the rows it picked and locked. SKIP LOCKED lets pools on other
-- hosts claim beside it without waiting; a row changed by a transaction that committed
-- meanwhile is re-checked against the WHERE before it is locked. Served queues (%(served)s
-- NULL: every queue) and closed ones (paused, or at their limit).
WITH RECURSIVE closed AS (SELECT %(closed)s::text[] AS names),
wanted AS (SELECT %(n)s::bigint AS n),
-- use: waiting_levels
-- use: pick_by_level
numbered AS (
    SELECT seq, row_number() OVER (ORDER BY priority DESC, run_at, seq) AS k FROM picked
)
UPDATE jobs j SET state = 'processing', worker_id = w.id,
                  worker_pid = %(pid)s, claimed_at = %(now)s, updated_at = %(now)s,
                  attempts = j.attempts + 1, runs = j.runs + 1
  FROM numbered JOIN unnest(%(workers)s::text[]) WITH ORDINALITY AS w (id, k) USING (k)
 WHERE j.seq = numbered.seq
RETURNING j.*

-- fragment: waiting_levels
-- The priorities that jobs wait at, highest first, each found by one seek in jobs_ready when
-- the pick asks for the next (a recursive CTE is evaluated as far as it is read); at most
-- 32 of them, so that thousands of distinct priorities cost no more than 32 seeks: below the
-- last (`beyond`), the picks walk the ready index in claim order instead.
levels (priority, depth) AS (
    (SELECT priority, 1 FROM jobs WHERE state IN ('pending', 'failed')
      ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs j
             WHERE j.state IN ('pending', 'failed') AND j.priority < l.priority
             ORDER BY j.priority DESC LIMIT 1),
           l.depth + 1
      FROM levels l WHERE l.priority IS NOT NULL AND l.depth < 32
),
beyond (priority) AS (
    -- NULL when the levels above ended on their own: every priority was looked at.
    SELECT CASE WHEN count(*) = 32 AND bool_and(priority IS NOT NULL) THEN min(priority) END
      FROM levels
),

-- fragment: pick_by_level
-- The best due jobs, at most (SELECT n FROM wanted), of queues not in (SELECT names FROM
-- closed) and served (%(served)s NULL: every queue): see `claim`. Each job is locked as the
-- outer LIMIT reads it, so no more are locked than are taken. A pool serving one queue scans
-- that queue's part of jobs_queue_ready the same way, never walking past other queues' jobs.
-- One serving several reads, at each level, the first due jobs of each (unlocked), puts
-- them in order, and locks them one by one in that order; a job another pool holds is
-- passed over, up to 256 per queue and level. Below the levels looked at (`beyond`), each
-- walks its index in claim order, past jobs scheduled later.
picked AS MATERIALIZED (
    (SELECT due.seq, due.priority, due.run_at
       FROM (SELECT found.seq, found.priority, found.run_at
               FROM levels l
              CROSS JOIN LATERAL (
                  SELECT seq, priority, run_at FROM jobs
                   WHERE state IN ('pending', 'failed') AND priority = l.priority
                     AND run_at <= %(now)s
                     AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                              ELSE true END
                   ORDER BY run_at, seq
                   LIMIT 256
                     FOR UPDATE SKIP LOCKED) found
             UNION ALL
             SELECT * FROM (
                 SELECT seq, priority, run_at FROM jobs
                  WHERE state IN ('pending', 'failed') AND priority < (SELECT priority FROM beyond)
                    AND run_at <= %(now)s
                    AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                             ELSE true END
                  ORDER BY priority DESC, run_at, seq
                  LIMIT 256
                    FOR UPDATE SKIP LOCKED) below) due
      WHERE %(served)s::text[] IS NULL
      LIMIT (SELECT n FROM wanted))
    UNION ALL
    (SELECT due.seq, due.priority, due.run_at
       FROM (SELECT found.seq, found.priority, found.run_at
               FROM levels l
              CROSS JOIN LATERAL (
                  SELECT seq, priority, run_at FROM jobs
                   WHERE queue = (%(served)s::text[])[1] AND state IN ('pending', 'failed')
                     AND priority = l.priority AND run_at <= %(now)s
                     AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                              ELSE true END
                   ORDER BY run_at, seq
                   LIMIT 256
                     FOR UPDATE SKIP LOCKED) found
             UNION ALL
             SELECT * FROM (
                 SELECT seq, priority, run_at FROM jobs
                  WHERE queue = (%(served)s::text[])[1] AND state IN ('pending', 'failed')
                    AND priority < (SELECT priority FROM beyond) AND run_at <= %(now)s
                    AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                             ELSE true END
                  ORDER BY priority DESC, run_at, seq
                  LIMIT 256
                    FOR UPDATE SKIP LOCKED) below) due
      WHERE cardinality(%(served)s::text[]) = 1
      LIMIT (SELECT n FROM wanted))
    UNION ALL
    (SELECT due.seq, due.priority, due.run_at
       FROM (SELECT level.seq
               FROM levels l
              CROSS JOIN LATERAL (
                  SELECT first.seq
                    FROM unnest(%(served)s::text[]) AS served (name)
                   CROSS JOIN LATERAL (
                       SELECT seq, run_at FROM jobs
                        WHERE queue = served.name AND state IN ('pending', 'failed')
                          AND priority = l.priority AND run_at <= %(now)s
                        ORDER BY run_at, seq
                        LIMIT 256) first
                   WHERE served.name <> ALL((SELECT names FROM closed)::text[])
                   ORDER BY first.run_at, first.seq) level
             UNION ALL
             SELECT * FROM (
                 SELECT first.seq
                   FROM unnest(%(served)s::text[]) AS served (name)
                  CROSS JOIN LATERAL (
                      SELECT seq, priority, run_at FROM jobs
                       WHERE queue = served.name AND state IN ('pending', 'failed')
                         AND priority < (SELECT priority FROM beyond) AND run_at <= %(now)s
                       ORDER BY priority DESC, run_at, seq
                       LIMIT 256) first
                  WHERE served.name <> ALL((SELECT names FROM closed)::text[])
                  ORDER BY first.priority DESC, first.run_at, first.seq) below) candidate
      CROSS JOIN LATERAL (
          SELECT seq, priority, run_at FROM jobs
           WHERE seq = candidate.seq AND state IN ('pending', 'failed')
             AND run_at <= %(now)s
             FOR UPDATE SKIP LOCKED) due
      WHERE cardinality(%(served)s::text[]) > 1
      LIMIT (SELECT n FROM wanted))
),

-- name: has_due_work
-- Whether a pool serving %(served)s (NULL: every queue) would find a due job in a queue that
-- is not paused: one statement, shaped as the claim's pick (see `claim`), so that neither
-- finished jobs nor jobs scheduled later are walked past. A queue at its limit counts (the
-- claim then finds nothing).
WITH RECURSIVE closed AS (SELECT coalesce(array_agg(name), '{}') AS names
                            FROM queues WHERE paused),
-- use: waiting_levels
open_served (name) AS (
    SELECT name FROM unnest(%(served)s::text[]) AS served (name)
     WHERE name <> ALL((SELECT names FROM closed)::text[])
),
due AS (
    SELECT 1
      FROM levels l
     CROSS JOIN LATERAL (
         SELECT 1 FROM jobs
          WHERE %(served)s::text[] IS NULL
            AND state IN ('pending', 'failed') AND priority = l.priority
            AND run_at <= %(now)s
            AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                     ELSE true END
          ORDER BY run_at, seq  -- the index's order: a scan of it, not of the table
          LIMIT 1) found
    UNION ALL
    SELECT 1
      FROM levels l
     CROSS JOIN open_served served
     CROSS JOIN LATERAL (
         SELECT 1 FROM jobs
          WHERE queue = served.name AND state IN ('pending', 'failed')
            AND priority = l.priority AND run_at <= %(now)s
          ORDER BY run_at, seq
          LIMIT 1) found
    UNION ALL
    SELECT 1 FROM (
        SELECT 1 FROM jobs
         WHERE %(served)s::text[] IS NULL
           AND state IN ('pending', 'failed') AND priority < (SELECT priority FROM beyond)
           AND run_at <= %(now)s
           AND CASE WHEN queue = ANY((SELECT names FROM closed)::text[]) THEN false
                    ELSE true END
         ORDER BY priority DESC, run_at, seq
         LIMIT 1) below
    UNION ALL
    SELECT 1
      FROM open_served served
     CROSS JOIN LATERAL (
         SELECT 1 FROM jobs
          WHERE queue = served.name AND state IN ('pending', 'failed')
            AND priority < (SELECT priority FROM beyond) AND run_at <= %(now)s
          ORDER BY priority DESC, run_at, seq
          LIMIT 1) below
)
SELECT EXISTS (SELECT 1 FROM due)

-- name: running_in_queues
SELECT queue, count(*) FROM jobs WHERE state = 'processing' AND queue = ANY(%(queues)s) GROUP BY queue

-- name: next_run_at
-- The earliest run_at after %(after)s of any waiting job: a seek in jobs_waiting per queue
-- that has jobs waiting (the counters name them).
SELECT min((SELECT min(run_at) FROM jobs j
             WHERE j.queue = w.queue AND j.state IN ('pending', 'failed')
               AND j.run_at > %(after)s))
  FROM (SELECT queue FROM (SELECT queue, state, n FROM job_counts
                           UNION ALL
                           SELECT queue, state, n FROM job_count_deltas) c
         WHERE state IN ('pending', 'failed')
         GROUP BY queue HAVING sum(n) > 0) w

-- name: active_workers_among
-- Locked, and so read again if a recovery changed them meanwhile: a worker just declared
-- lost is not active.
SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping') AND id = ANY(%s)
 ORDER BY id
   FOR SHARE

-- name: job_to_settle
-- The fence, as in the exchange statement: still processing, still ours, still this run; the
-- row is locked, so a result arriving meanwhile (or a recovery) waits, then is fenced out.
SELECT run_at, attempts, max_retries, cancel_requested_at IS NOT NULL, queue, has_dependents
  FROM jobs
 WHERE seq = %(seq)s AND state = 'processing' AND worker_id = %(worker_id)s AND runs = %(runs)s
   FOR UPDATE

-- name: recorded_run
-- A run fenced out of settle_job: recorded already (by an exchange whose answer was lost) if
-- its attempt is there, with this outcome; then where its job went.
SELECT j.state, j.run_at FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE a.job_seq = %(seq)s AND a.number = %(runs)s AND a.worker_id = %(worker_id)s AND a.outcome = %(outcome)s
 LIMIT 1

-- name: unseen_claims
-- Jobs still processing under workers whose last claims may have committed unseen (the
-- connection dropped around the commit), other than those being settled now; locked, as
-- recovery locks them, after the workers' rows.
SELECT * FROM jobs
 WHERE state = 'processing' AND worker_id = ANY(%(worker_ids)s) AND seq <> ALL(%(settling)s)
 ORDER BY seq
   FOR UPDATE

-- name: settle_job
-- After job_to_settle found and locked the row within the fence.
UPDATE jobs SET state = %(state)s, run_at = %(run_at)s, attempts = %(attempts)s, worker_id = NULL, worker_pid = NULL,
                finished_at = %(now)s, exit_code = %(exit_code)s, last_error = %(error)s, error_group = %(error_group)s, updated_at = %(now)s
 WHERE seq = %(seq)s

-- name: record_attempts
INSERT INTO attempts (job_seq, queue, number, worker_id, scheduled_at, started_at, finished_at,
                      exit_code, outcome, output, error)
SELECT * FROM unnest(%(job_seq)s::bigint[], %(queue)s::text[], %(number)s::bigint[], %(worker_id)s::text[], %(scheduled_at)s::bigint[],
                     %(started_at)s::bigint[], %(finished_at)s::bigint[], %(exit_code)s::bigint[], %(outcome)s::text[], %(output)s::text[],
                     %(error)s::text[])

-- name: add_to_counter
INSERT INTO counter_deltas (name, n) VALUES (%(name)s, %(n)s)

-- name: touch_workers
-- Each worker's current job (busy) or none (idle), and its counters; a worker that is
-- stopping keeps that status.
UPDATE workers w SET current_job = t.job, last_heartbeat = %(now)s,
                     jobs_done = w.jobs_done + t.done, jobs_failed = w.jobs_failed + t.failed,
                     status = CASE WHEN w.status IN ('idle', 'busy') THEN t.status
                                   ELSE w.status END
  FROM unnest(%(id)s::text[], %(job)s::text[], %(done)s::bigint[], %(failed)s::bigint[], %(status)s::text[])
       AS t(id, job, done, failed, status)
 WHERE w.id = t.id

-- name: recovery_lock
-- Pools that recover at the same time take turns: each lost job is recovered once.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.recovery'))

-- name: lock_workers
-- Worker rows in id order, before any job row: the one lock order of recovery and exchange.
SELECT id FROM workers WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE

-- name: mark_workers_lost
UPDATE workers SET status = 'lost', stopped_at = %(now)s, current_job = NULL
 WHERE status IN ('idle', 'busy', 'stopping') AND id = ANY(%(ids)s)

-- name: orphaned_jobs
-- Locked: an owner's result that arrives meanwhile waits, then finds itself fenced out.
SELECT * FROM jobs
 WHERE state = 'processing'
   AND worker_id NOT IN (SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping'))
 ORDER BY seq
   FOR UPDATE OF jobs

-- name: job_by_seq
SELECT * FROM jobs WHERE seq = %(seq)s


-- == workers =================================================================================

-- name: register_worker
INSERT INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at,
                     current_job, jobs_done, jobs_failed, pid_namespace)
VALUES (%(id)s, %(pool_id)s, %(pid)s, %(host)s, %(status)s, %(started_at)s, %(last_heartbeat)s, %(stopped_at)s, %(current_job)s, %(jobs_done)s, %(jobs_failed)s, %(pid_namespace)s)
ON CONFLICT (id) DO UPDATE SET
    pool_id = excluded.pool_id, pid = excluded.pid, host = excluded.host,
    status = excluded.status, started_at = excluded.started_at,
    last_heartbeat = excluded.last_heartbeat, stopped_at = excluded.stopped_at,
    current_job = excluded.current_job, jobs_done = excluded.jobs_done,
    jobs_failed = excluded.jobs_failed, pid_namespace = excluded.pid_namespace

-- name: heartbeat_among
-- The rows locked in id order, the one lock order of worker rows (see lock_workers): an
-- UPDATE by a list locks them in whatever order its plan reads them, and the pool's own
-- exchange, holding some of them and waiting for another, deadlocked with it.
UPDATE workers SET last_heartbeat = %s
 WHERE id IN (SELECT id FROM workers
               WHERE id = ANY(%s) AND status IN ('idle', 'busy', 'stopping')
               ORDER BY id
                 FOR UPDATE)

-- name: set_worker_status
UPDATE workers SET status = %(status)s, current_job = %(current_job)s, last_heartbeat = %(now)s,
                   stopped_at = CASE WHEN %(ended)s THEN %(now)s ELSE stopped_at END,
                   jobs_done = jobs_done + %(done)s, jobs_failed = jobs_failed + %(failed)s
 WHERE id = %(id)s

-- name: list_workers
SELECT id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at, current_job,
       jobs_done, jobs_failed, pid_namespace
  FROM workers ORDER BY started_at DESC, id

-- name: list_active_workers
SELECT id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at, current_job,
       jobs_done, jobs_failed, pid_namespace
  FROM workers WHERE status IN ('idle', 'busy', 'stopping') ORDER BY started_at DESC, id

-- name: active_workers_by_id
SELECT id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at, current_job,
       jobs_done, jobs_failed, pid_namespace
  FROM workers WHERE status IN ('idle', 'busy', 'stopping') ORDER BY id

-- name: prune_workers
DELETE FROM workers WHERE status NOT IN ('idle', 'busy', 'stopping') AND stopped_at < %(before)s

-- name: stop_lock
-- A stop request and a pool's registration take turns, so that the request's list of
-- workers is exactly the pools that will see it.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.stop'))

-- name: request_stop
INSERT INTO stop_requests (requested_at, pool_id, forced) VALUES (%(now)s, %(pool_id)s, %(forced)s)

-- name: latest_stop_request
SELECT coalesce(max(id), 0) FROM stop_requests

-- name: stop_requested_after
-- The strongest request for one pool after a given one: NULL none, 0 graceful, 1 forced.
SELECT max(forced) FROM stop_requests WHERE id > %(request_id)s AND (pool_id IS NULL OR pool_id = %(pool_id)s)

-- name: stop_requested_since
SELECT max(forced) FROM stop_requests
 WHERE requested_at >= %(since)s AND (pool_id IS NULL OR pool_id = %(pool_id)s)


-- == submissions ==============================================================================

-- name: waiting_depth
-- Jobs waiting to run, every queue: what backpressure measures.
SELECT coalesce(sum(n), 0)::bigint
  FROM (SELECT n FROM job_counts WHERE state IN ('pending', 'failed')
        UNION ALL
        SELECT n FROM job_count_deltas WHERE state IN ('pending', 'failed')) c

-- name: waiting_of_type
SELECT count(*) FROM jobs WHERE job_type = %(job_type)s AND state IN ('pending', 'failed')


-- == change detection =========================================================================

-- name: change_token
-- The snapshot's bounds and the transactions in flight: it changes whenever a transaction
-- of this cluster takes an id or commits (sometimes for another database's: a re-read).
SELECT hashtext(pg_current_snapshot()::text)

-- name: now_ms
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint


-- == the exchange in one statement ==============================================================

-- name: exchange
-- A pool's hot path in one statement: record its completed runs (fenced: still processing,
-- still ours, still this run; each with its attempt, and a late one counted), then take the
-- best due jobs for its free workers that are still active (FOR UPDATE SKIP LOCKED, the
-- MATERIALIZED pick never flattened into the UPDATE), and touch each worker's row. Runs that
-- did not complete were settled before it, in the same transaction, by the lifecycle's rules
-- (their workers' counts come in as %(touch_*)s). A queue with a limit on running jobs needs
-- its lock and count first: when one is open to this pool, nothing is claimed here
-- (`limited`) and the store claims the slower way, in the same transaction. The engine's own
-- bookkeeping: committed without waiting for the WAL flush (set_config, local).
WITH RECURSIVE sync AS (SELECT set_config('synchronous_commit', 'off', true) AS off),
input AS (
    SELECT * FROM unnest(%(seqs)s::bigint[], %(owners)s::text[], %(runs)s::bigint[],
                         %(finished)s::bigint[], %(exits)s::bigint[], %(errors)s::text[],
                         %(outputs)s::text[])
               AS s(seq, worker_id, runs, finished_at, exit_code, error, output)
),
live AS MATERIALIZED (
    -- The rows of the workers this exchange settles for or claims for, locked first, in id
    -- order, before any job row (recovery takes its dead workers' rows first too: one lock
    -- order, no deadlock), and read again once locked: a worker declared lost by a
    -- recovery that committed meanwhile is not live, and gets nothing. The aggregate makes
    -- the lock complete before the first job row is touched.
    SELECT coalesce(array_agg(id), '{}') AS ids
      FROM (SELECT id FROM workers
             WHERE id = ANY(%(owners)s::text[] || %(claimants)s::text[]
                            || %(touch_ids)s::text[])
               AND status IN ('idle', 'busy', 'stopping')
             ORDER BY id
               FOR SHARE) locked
),
done AS (
    UPDATE jobs j SET state = 'completed', worker_id = NULL, worker_pid = NULL,
                      finished_at = s.finished_at, exit_code = s.exit_code,
                      last_error = s.error, updated_at = s.finished_at
      FROM input s
     WHERE s.worker_id = ANY((SELECT ids FROM live)::text[])
       AND j.seq = s.seq AND j.state = 'processing' AND j.worker_id = s.worker_id
       AND j.runs = s.runs
    RETURNING j.seq, j.id, j.has_dependents, j.queue, j.run_at, j.claimed_at, s.worker_id,
              s.runs, s.finished_at, s.exit_code, s.output, s.error
),
ended_links AS (
    -- The links of jobs that others run after record their end with it, in this statement:
    -- moving those others follows (dependencies.py), in a transaction of its own.
    UPDATE job_parents p SET parent_state = 'completed'
      FROM done d WHERE d.has_dependents AND p.parent_id = d.id
),
recorded AS (
    INSERT INTO attempts (job_seq, queue, number, worker_id, scheduled_at, started_at,
                          finished_at, exit_code, outcome, output, error)
    SELECT seq, queue, runs, worker_id, run_at, coalesce(claimed_at, finished_at), finished_at,
           exit_code, 'completed', output, error
      FROM done
),
earlier AS (
    -- Runs fenced out because an earlier exchange, whose answer was lost, recorded them:
    -- their attempt is there already (this statement's own inserts are not visible here).
    -- A scalar subquery, not EXISTS: one probe of attempts_job per completed run, where a
    -- semi join may scan every attempt for every run.
    SELECT s.seq FROM input s
     WHERE NOT EXISTS (SELECT 1 FROM done d WHERE d.seq = s.seq)
       AND (SELECT 1 FROM attempts a
             WHERE a.job_seq = s.seq AND a.number = s.runs
               AND a.worker_id = s.worker_id AND a.outcome = 'completed'
             LIMIT 1) IS NOT NULL
),
late AS (
    INSERT INTO counter_deltas (name, n)
    SELECT 'late_results', counted.offered - counted.settled
      FROM (SELECT (SELECT count(*) FROM input) AS offered,
                   (SELECT count(*) FROM done) + (SELECT count(*) FROM earlier) AS settled)
           counted
     WHERE counted.offered > counted.settled
),
active AS (
    SELECT c.id, row_number() OVER (ORDER BY c.ord) AS k
      FROM unnest(%(claimants)s::text[]) WITH ORDINALITY AS c(id, ord)
     WHERE c.id = ANY((SELECT ids FROM live)::text[])
),
settings AS (
    SELECT coalesce(array_agg(name) FILTER (WHERE paused), '{}') AS closed,
           coalesce(bool_or(NOT paused AND max_running IS NOT NULL
                            AND (%(served)s::text[] IS NULL OR name = ANY(%(served)s))),
                    false) AS limited
      FROM queues
),
closed AS (SELECT closed AS names FROM settings),
wanted AS (
    SELECT CASE WHEN limited THEN 0 ELSE (SELECT count(*) FROM active) END AS n FROM settings
),
-- use: waiting_levels
-- use: pick_by_level
numbered AS (
    SELECT seq, row_number() OVER (ORDER BY priority DESC, run_at, seq) AS k FROM picked
),
claimed AS (
    UPDATE jobs j SET state = 'processing', worker_id = a.id, worker_pid = %(pid)s,
                      claimed_at = %(now)s, updated_at = %(now)s,
                      attempts = j.attempts + 1, runs = j.runs + 1
      FROM numbered n JOIN active a ON a.k = n.k
     WHERE j.seq = n.seq
    RETURNING j.*
),
touch AS (
    SELECT id, sum(done)::bigint AS done, sum(failed)::bigint AS failed, max(job) AS job
      FROM (SELECT worker_id AS id, 1 AS done, 0 AS failed, NULL::text AS job FROM done
            UNION ALL
            SELECT t.id, t.done, t.failed, NULL
              FROM unnest(%(touch_ids)s::text[], %(touch_done)s::bigint[],
                          %(touch_failed)s::bigint[]) AS t(id, done, failed)
            UNION ALL
            SELECT worker_id, 0, 0, id FROM claimed) every_touch
     GROUP BY id
),
touched AS (
    UPDATE workers w SET current_job = t.job, last_heartbeat = %(now)s,
                         jobs_done = w.jobs_done + t.done, jobs_failed = w.jobs_failed + t.failed,
                         status = CASE WHEN w.status NOT IN ('idle', 'busy') THEN w.status
                                       WHEN t.job IS NULL THEN 'idle' ELSE 'busy' END
      FROM touch t
     WHERE w.id = t.id
)
SELECT head.limited, head.settled, head.freeing, c.*
  FROM (SELECT (SELECT limited FROM settings) AS limited,
               ARRAY(SELECT seq FROM done UNION ALL SELECT seq FROM earlier) AS settled,
               -- Completed jobs that others run after, whose links say so (ended_links, or
               -- an earlier exchange whose answer was lost): their children move next.
               ARRAY(SELECT id FROM done WHERE has_dependents
                     UNION ALL
                     SELECT id FROM jobs
                      WHERE seq IN (SELECT seq FROM earlier) AND has_dependents) AS freeing) head
  LEFT JOIN claimed c ON true
 -- A condition, not a column: a column nothing reads is planned away, and set_config with it.
 WHERE (SELECT off FROM sync) IS NOT NULL


-- == jobs that run after others (store/dependencies.py) =========================================

-- name: dep_find_parents
SELECT id FROM jobs WHERE id = ANY(%(ids)s::text[])

-- name: dep_mark_parents
-- Locks each parent's row: a parent ending meanwhile either ended first (its state is read
-- here) or waits for this transaction, and then finds the link.
UPDATE jobs SET has_dependents = true WHERE id = ANY(%(ids)s::text[])
RETURNING id, state

-- name: dep_link
INSERT INTO job_parents (job_seq, position, parent_id, parent_state)
VALUES (%(child)s, %(position)s, %(parent)s, %(parent_state)s)

-- name: dep_any_end
UPDATE jobs SET after_any_end = true WHERE seq = %(seq)s

-- name: dep_end_links
UPDATE job_parents SET parent_state = %(end)s WHERE parent_id = ANY(%(parents)s::text[])

-- name: dep_drop_links
UPDATE job_parents SET parent_state = 'deleted'
 WHERE parent_id = ANY(%(parents)s::text[]) AND parent_state IS NULL

-- name: dep_children
-- Locked, in seq order, before their links are read (by the next statement, which then sees
-- every end committed before the lock was had).
SELECT seq, id, after_any_end, blocked_by FROM jobs
 WHERE seq IN (SELECT job_seq FROM job_parents WHERE parent_id = ANY(%(parents)s::text[]))
   AND state = %(state)s
 ORDER BY seq
   FOR UPDATE

-- name: dep_links_of
SELECT job_seq, parent_id, parent_state FROM job_parents
 WHERE job_seq = ANY(%(seqs)s::bigint[])
 ORDER BY job_seq, position

-- name: dep_still_waiting
-- Two probes of partial indexes per job (job_parents_open, job_parents_failed).
SELECT seq FROM jobs j
 WHERE seq = ANY(%(seqs)s::bigint[])
   AND EXISTS (SELECT 1 FROM job_parents p WHERE p.job_seq = j.seq AND p.parent_state IS NULL)
   AND (j.after_any_end
        OR NOT EXISTS (SELECT 1 FROM job_parents p
                        WHERE p.job_seq = j.seq AND p.parent_state <> 'completed'))

-- name: dep_set_state
-- A job that waited, or was cancelled by a parent's end, moves: its reason goes with it (a
-- job cancelled by an operator keeps its own).
UPDATE jobs SET state = %(state)s, blocked_by = %(blocked_by)s,
                last_error = CASE WHEN %(state)s = 'cancelled' OR blocked_by IS NOT NULL
                                  THEN %(error)s ELSE last_error END,
                finished_at = CASE WHEN %(state)s = 'cancelled' THEN %(now)s::bigint END,
                updated_at = %(now)s
 WHERE seq = %(seq)s

-- name: dep_linked_among
SELECT id, seq, after_any_end FROM jobs j
 WHERE id = ANY(%(ids)s::text[])
   AND EXISTS (SELECT 1 FROM job_parents p WHERE p.job_seq = j.seq)

-- name: dep_blocked_by
SELECT blocked_by FROM jobs WHERE id = ANY(%(ids)s::text[])

-- name: dep_forget_deleted
DELETE FROM job_parents
 WHERE job_seq = ANY(%(seqs)s::bigint[]) AND parent_state = 'deleted'

-- name: dep_any
SELECT 1 FROM job_parents LIMIT 1

-- name: dep_stranded
-- Waiting jobs whose parents have all ended, or one of which failed (dependencies.sweep).
SELECT seq, id, after_any_end, blocked_by FROM jobs j
 WHERE state = 'waiting'
   AND (NOT EXISTS (SELECT 1 FROM job_parents p
                     WHERE p.job_seq = j.seq AND p.parent_state IS NULL)
        OR (NOT j.after_any_end
            AND EXISTS (SELECT 1 FROM job_parents p
                         WHERE p.job_seq = j.seq AND p.parent_state <> 'completed')))
 ORDER BY seq
   FOR UPDATE SKIP LOCKED

-- name: dep_parents_with_children
SELECT DISTINCT parent_id FROM job_parents WHERE parent_id = ANY(%(ids)s::text[])

-- name: job_parents_of
SELECT p.parent_id, j.state, p.parent_state
  FROM jobs c JOIN job_parents p ON p.job_seq = c.seq
  LEFT JOIN jobs j ON j.id = p.parent_id
 WHERE c.id = %(id)s
 ORDER BY p.position

-- name: job_children_of
SELECT c.id, c.state
  FROM job_parents p JOIN jobs c ON c.seq = p.job_seq
 WHERE p.parent_id = %(id)s
 ORDER BY c.seq
 LIMIT %(limit)s


-- == the text index (queuectl search-index) ==================================================
-- Free text goes through a pg_trgm GIN index of each job's id, command and last error (one
-- expression, the three joined by chr(1)) when an operator turned it on.

-- name: list_jobs_matching_indexed
-- The same matches as list_jobs_matching, for a text of three characters or more.
(id || chr(1) || command || chr(1) || coalesce(last_error, '')) ILIKE
    '%%' || replace(replace(replace(%s, '\', '\\'), '%%', '\%%'), '_', '\_') || '%%' ESCAPE '\'

-- name: text_index_present
-- Valid only: a build that was cut short leaves an invalid index, which queries do not use.
SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relname = 'jobs_text' AND c.relnamespace = current_schema()::regnamespace
   AND i.indisvalid

-- name: trgm_extension
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public

-- name: trgm_schema
SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'

-- name: text_index_drop
DROP INDEX CONCURRENTLY IF EXISTS jobs_text

-- name: text_index_wait_freely
-- A concurrent build waits for every transaction open when it starts (a long bulk enqueue):
-- that wait is no lock conflict to give up on.
SET lock_timeout = 0

-- name: text_index_wait_as_before
RESET lock_timeout
