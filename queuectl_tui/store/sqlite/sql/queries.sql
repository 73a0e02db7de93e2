-- Every statement the SQLite store runs on the queue's tables, each after a `-- name:` line
-- that the store calls it by (statements.py reads this file once, at import). Comment lines
-- are for the reader and are not sent to SQLite.
--
-- Put together elsewhere, from fixed parts only: the bulk insert (bulk.py, from its column
-- list), the schema (migrations/) and the connection's own pragmas and transactions
-- (connection.py). `(?, ...)` stands for one `?` per value of a list (statements.with_list).
-- Active workers are those with status idle, busy or stopping (models.ACTIVE_WORKER_STATUSES).
-- `+state` next to `id IN (?, ...)`: the unary plus keeps the planner off the state index,
-- which it may otherwise prefer for a long list, reading every job of that state once per
-- chunk of ids (a cancel by filter of 200,000 pending jobs took 16 s that way).


-- == jobs ====================================================================================

-- name: insert_job
INSERT INTO jobs (id, command, state, priority, run_at, max_retries, timeout, idempotency_key,
                  created_at, updated_at, queue, job_type, payload)
VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group

-- name: count_inserted
-- New jobs are pending; their counter is kept here, once per statement, rather than by a
-- per-row trigger.
INSERT INTO queue_counts (queue, state, n) VALUES (?, 'pending', ?)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n

-- name: count_inserted_since
-- The same for a bulk insert whose jobs name their queues: those inserted in this
-- transaction have a seq above the largest before it.
INSERT INTO queue_counts (queue, state, n)
    SELECT queue, 'pending', count(*) FROM jobs WHERE seq > ? GROUP BY queue
    ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n

-- name: last_seq
SELECT coalesce(max(seq), 0) FROM jobs

-- name: job_by_idempotency_key
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group
  FROM jobs WHERE idempotency_key = ?

-- name: job_by_id
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group
  FROM jobs WHERE id = ?

-- name: job_by_seq
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group
  FROM jobs WHERE seq = ?

-- name: stored_id_among
SELECT id FROM jobs WHERE id IN (?, ...) LIMIT 1

-- name: job_attempts
SELECT j.id AS job_id, a.number, a.worker_id, a.scheduled_at, a.started_at, a.finished_at,
       a.exit_code, a.outcome, a.output, a.error
  FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE j.id = ? ORDER BY a.id

-- name: list_jobs
-- One keyset page of jobs. The store adds `WHERE` and the list_jobs_* conditions it was asked
-- for, joined by `AND`, then one of the two orders: each combination is then a plain range
-- that keeps its index (jobs_state_seq for a state, the rowid otherwise).
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group
  FROM jobs

-- name: list_jobs_in_state
state = ?

-- name: list_jobs_in_queue
queue = ?

-- name: list_jobs_after
seq > ?

-- name: list_jobs_before
seq < ?

-- name: list_jobs_matching
-- Free text: a part of the id, the command or the last error, whatever the case. The pattern
-- has its own %, _ and \ escaped with \.
(id LIKE ? ESCAPE '\' OR command LIKE ? ESCAPE '\' OR last_error LIKE ? ESCAPE '\')

-- name: list_jobs_exit
exit_code = ?

-- name: list_jobs_worker
worker_id LIKE ? ESCAPE '\'

-- name: list_jobs_since
updated_at >= ?

-- name: list_jobs_error
-- The failure of failed and dead jobs, found through their index (jobs_error_groups) however
-- few they are among all jobs.
seq IN (SELECT seq FROM jobs INDEXED BY jobs_error_groups
         WHERE error_group IS NOT NULL
           AND (error_group LIKE ? ESCAPE '\' OR last_error LIKE ? ESCAPE '\'))

-- name: count_jobs
SELECT count(*) FROM jobs

-- name: list_jobs_oldest_first
ORDER BY seq LIMIT ?

-- name: list_jobs_newest_first
ORDER BY seq DESC LIMIT ?

-- name: retry_all_dead
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?,
                cancel_requested_at = NULL
 WHERE state = 'dead'
RETURNING id

-- name: retry_dead_among
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?,
                cancel_requested_at = NULL
 WHERE +state = 'dead' AND id IN (?, ...)
RETURNING id

-- name: retry_finished_among
-- Dead and cancelled jobs go back to pending with a fresh retry budget.
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?,
                cancel_requested_at = NULL
 WHERE +state IN ('dead', 'cancelled') AND id IN (?, ...)
RETURNING id

-- name: retry_now_among
-- A failed job waiting out its backoff is ready at once, its attempts kept.
UPDATE jobs SET run_at = ?, updated_at = ?
 WHERE +state = 'failed' AND id IN (?, ...)
RETURNING id

-- name: cancel_waiting_among
UPDATE jobs SET state = 'cancelled', finished_at = ?, updated_at = ?,
                last_error = 'cancelled by an operator', cancel_requested_at = ?
 WHERE +state IN ('pending', 'failed') AND id IN (?, ...)
RETURNING id

-- name: request_cancel_among
-- A running job: its pool stops the command and records the run cancelled (see
-- cancel_requested_among); the first request's time is kept.
UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, ?), updated_at = ?
 WHERE +state = 'processing' AND id IN (?, ...)
RETURNING id

-- name: cancel_requested_among
SELECT id FROM jobs
 WHERE +state = 'processing' AND cancel_requested_at IS NOT NULL AND id IN (?, ...)

-- name: states_among
SELECT id, state FROM jobs WHERE id IN (?, ...)

-- name: delete_among
-- Attempts go with their job (ON DELETE CASCADE); a running job is never deleted.
DELETE FROM jobs WHERE state <> 'processing' AND id IN (?, ...)
RETURNING id

-- name: delete_in_state_among
-- A delete by filter: only jobs still in the state the filter named.
DELETE FROM jobs WHERE state <> 'processing' AND +state = ? AND id IN (?, ...)
RETURNING id

-- name: prunable
-- The oldest finished jobs of a state, a batch at a time (jobs_finished).
SELECT seq FROM jobs INDEXED BY jobs_finished
 WHERE state = ? AND finished_at < ? ORDER BY finished_at LIMIT ?

-- name: count_prunable
SELECT count(*) FROM jobs INDEXED BY jobs_finished WHERE state = ? AND finished_at < ?

-- name: delete_seqs
DELETE FROM jobs WHERE state <> 'processing' AND seq IN (?, ...)


-- == live output =============================================================================

-- name: append_output
-- Fenced: a piece is kept only while its run is the job's run under that worker.
INSERT OR IGNORE INTO output_chunks (job_seq, run, seq, stream, byte_offset, body, at)
SELECT seq, ?, ?, ?, ?, ?, ? FROM jobs
 WHERE id = ? AND state = 'processing' AND worker_id = ? AND runs = ?

-- name: forget_output
-- The pieces of runs before the one before (a follower may still be reading that one), and
-- this run's below the first one kept.
DELETE FROM output_chunks
 WHERE job_seq = (SELECT seq FROM jobs WHERE id = ?)
   AND (run < ? OR (run = ? AND seq < ?))

-- name: output_chunks
SELECT c.seq, c.stream, c.body AS text, c.at, c.byte_offset
  FROM output_chunks c JOIN jobs j ON j.seq = c.job_seq
 WHERE j.id = ? AND c.run = ? AND c.seq > ?
 ORDER BY c.seq LIMIT ?


-- == error groups ============================================================================

-- name: error_groups
-- The groups of one state's jobs, largest first, each with its latest job (jobs_error_groups).
SELECT g.error_group, count(*), min(g.finished_at), max(g.finished_at),
       (SELECT e.id FROM jobs e
         WHERE e.state = g.state AND e.error_group = g.error_group
         ORDER BY e.finished_at DESC LIMIT 1)
  FROM jobs g
 WHERE g.state = ? AND g.error_group IS NOT NULL
 GROUP BY g.state, g.error_group
 ORDER BY count(*) DESC, g.error_group
 LIMIT ?

-- name: error_group_ids
SELECT id FROM jobs WHERE state = ? AND error_group = ? ORDER BY seq


-- == queues ==================================================================================

-- name: queue_settings
SELECT name, paused, max_running FROM queues

-- name: existing_queues
-- The queues that exist: holding a job, or configured (paused, or given a limit).
SELECT queue FROM queue_counts GROUP BY queue HAVING sum(n) > 0
UNION
SELECT name FROM queues

-- name: queue_depths
-- Jobs per queue and state (the counters): which queues exist and how full they are.
SELECT queue, state, n FROM queue_counts WHERE n > 0

-- name: set_queue_paused
INSERT INTO queues (name, paused, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: set_queue_limit
INSERT INTO queues (name, max_running, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
                                     updated_at = excluded.updated_at

-- name: waiting_queues
-- Queues with jobs waiting (pending or failed).
SELECT DISTINCT queue FROM queue_counts WHERE state IN ('pending', 'failed') AND n > 0

-- name: claimable_queues
-- Queues with jobs waiting that are not paused, with their limit (NULL: none) and how many
-- of their jobs run now. A claim looks only into these.
SELECT w.queue, q.max_running,
       coalesce((SELECT n FROM queue_counts r WHERE r.queue = w.queue AND r.state = 'processing'), 0)
  FROM (SELECT queue FROM queue_counts WHERE state IN ('pending', 'failed') AND n > 0
         GROUP BY queue) w
  LEFT JOIN queues q ON q.name = w.queue
 WHERE coalesce(q.paused, 0) = 0


-- == the audit trail =========================================================================

-- name: record_action
INSERT INTO audit (at, face, actor, host, action, subject, touched) VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: list_actions
SELECT id, at, face, actor, host, action, subject, touched FROM audit
 WHERE (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?


-- == counts and statistics ===================================================================

-- name: state_counts
SELECT state, sum(n) FROM queue_counts GROUP BY state

-- name: queue_state_counts
SELECT state, n FROM queue_counts WHERE queue = ?

-- name: count_active_workers
SELECT count(*) FROM workers WHERE status IN ('idle', 'busy', 'stopping')

-- name: outcomes_since
SELECT outcome = 'completed', count(*) FROM attempts
 WHERE finished_at > ? AND outcome NOT IN ('cancelled', 'interrupted')
 GROUP BY outcome = 'completed'

-- name: queue_outcomes_since
SELECT a.outcome = 'completed', count(*) FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE a.finished_at > ? AND a.outcome NOT IN ('cancelled', 'interrupted') AND j.queue = ?
 GROUP BY a.outcome = 'completed'

-- name: attempt_totals
-- Of every queue (?1 NULL) or of one.
SELECT outcome, sum(n), sum(retries) FROM attempt_totals
 WHERE ?1 IS NULL OR queue = ?1
 GROUP BY outcome

-- name: latest_timings
SELECT started_at - scheduled_at, finished_at - started_at FROM attempts
 WHERE outcome NOT IN ('cancelled', 'interrupted') ORDER BY id DESC LIMIT ?

-- name: queue_latest_timings
-- One queue's attempts among the latest ?2 of every queue (the newest ?3 of them): attempts
-- carry no queue of their own, so the look back is bounded to keep the read cheap.
SELECT a.started_at - a.scheduled_at, a.finished_at - a.started_at
  FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE a.id > (SELECT coalesce(max(id), 0) FROM attempts) - ?2
   AND a.outcome NOT IN ('cancelled', 'interrupted') AND j.queue = ?1
 ORDER BY a.id DESC LIMIT ?3

-- name: attempt_rates
-- Of every queue (?3 NULL) or of one.
SELECT slot, sum(completed), sum(failed) FROM attempt_rates
 WHERE slot >= ?1 AND slot <= ?2 AND (?3 IS NULL OR queue = ?3)
 GROUP BY slot


-- == metrics =================================================================================
-- Each reads a table kept by triggers or by the store as jobs move, never jobs or attempts:
-- a scrape costs the same at any size.

-- name: metrics_job_counts
SELECT queue, state, n FROM queue_counts

-- name: metrics_worker_statuses
SELECT status, count(*) FROM workers GROUP BY status

-- name: metrics_attempt_totals
SELECT queue, outcome, n, retries FROM attempt_totals

-- name: metrics_counters
SELECT name, n FROM counters

-- name: metrics_histogram_bounds
SELECT le FROM histogram_bounds ORDER BY le

-- name: metrics_histograms
-- Per bucket, not cumulative; le -1 is the bucket above the last bound.
SELECT metric, le, n, sum_ms FROM attempt_histograms


-- == the engine's protocol ===================================================================

-- name: claim_next
-- The first job of one queue in claim order (priority, then run_at, then creation order), if
-- it is due: the common case, found and taken in one statement. INDEXED BY pins the partial
-- index that holds exactly this order; left alone, the planner may pick the state index and
-- sort every pending job, which costs seconds at a million jobs. When the first job is not
-- due, the claim looks a priority level at a time (ready.py), so that jobs scheduled for
-- later are never walked one by one.
-- The claim takes the job in the same statement that marks it processing, inside
-- BEGIN IMMEDIATE (see connection.py).
UPDATE jobs SET state = 'processing', worker_id = ?, worker_pid = ?, claimed_at = ?,
                updated_at = ?, attempts = attempts + 1, runs = runs + 1
 WHERE seq = (SELECT seq FROM jobs INDEXED BY jobs_ready
               WHERE queue = ? AND state IN ('pending', 'failed')
               ORDER BY priority DESC, run_at, seq LIMIT 1)
   AND run_at <= ?
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group

-- name: first_waiting
-- The first job of one queue in claim order, due or not (see claim_next).
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = ? AND state IN ('pending', 'failed')
 ORDER BY priority DESC, run_at, seq LIMIT 1

-- name: first_of_level
-- The first job of one priority level of one queue: the earliest run_at, then creation order.
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = ? AND state IN ('pending', 'failed') AND priority = ?
 ORDER BY run_at, seq LIMIT 1

-- name: waiting_levels
-- Each priority level of one queue's waiting jobs (at most ?3 of them, highest first), with
-- its earliest run_at and its earliest run_at after ?2. Each next level is one seek in the
-- ready index (the highest priority below the last), so the cost grows with the number of
-- levels, not of jobs; past ?3 levels the reader falls back to the scans below.
WITH RECURSIVE level(p) AS (
    SELECT max(priority) FROM jobs INDEXED BY jobs_ready
     WHERE queue = ?1 AND state IN ('pending', 'failed')
    UNION ALL
    SELECT (SELECT max(priority) FROM jobs INDEXED BY jobs_ready
             WHERE queue = ?1 AND state IN ('pending', 'failed') AND priority < level.p)
      FROM level WHERE level.p IS NOT NULL
     LIMIT ?3
)
SELECT p,
       (SELECT min(run_at) FROM jobs INDEXED BY jobs_ready
         WHERE queue = ?1 AND state IN ('pending', 'failed') AND priority = level.p),
       (SELECT min(run_at) FROM jobs INDEXED BY jobs_ready
         WHERE queue = ?1 AND state IN ('pending', 'failed') AND priority = level.p
           AND run_at > ?2)
  FROM level WHERE p IS NOT NULL

-- name: best_due_scan
-- For a queue of very many priority levels: the claim order's first due job, walking the
-- ready index past the jobs scheduled for later.
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = ? AND state IN ('pending', 'failed') AND run_at <= ?
 ORDER BY priority DESC, run_at, seq LIMIT 1

-- name: earliest_scan
-- For a queue of very many priority levels: its earliest run_at, and the earliest after ?2.
SELECT min(run_at), min(CASE WHEN run_at > ?2 THEN run_at END) FROM jobs INDEXED BY jobs_ready
 WHERE queue = ?1 AND state IN ('pending', 'failed')

-- name: claim_seq
UPDATE jobs SET state = 'processing', worker_id = ?, worker_pid = ?, claimed_at = ?,
                updated_at = ?, attempts = attempts + 1, runs = runs + 1
 WHERE seq = ? AND state IN ('pending', 'failed')
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group

-- name: active_workers_among
SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping') AND id IN (?, ...)

-- name: complete_job
-- The fence, here and in job_to_settle: still processing, still ours, still this run.
-- Completed changes nothing but the state (see lifecycle.after_attempt), so it is
-- written without reading the row first: the hot path of a busy pool.
UPDATE jobs SET state = 'completed', worker_id = NULL, worker_pid = NULL,
                finished_at = ?, exit_code = ?, last_error = ?, updated_at = ?
 WHERE seq = ? AND state = 'processing' AND worker_id = ? AND runs = ?
RETURNING run_at

-- name: job_to_settle
SELECT run_at, attempts, max_retries, cancel_requested_at IS NOT NULL FROM jobs
 WHERE seq = ? AND state = 'processing' AND worker_id = ? AND runs = ?

-- name: settle_job
-- After job_to_settle found the row within the fence, in the same transaction.
UPDATE jobs SET state = ?, run_at = ?, attempts = ?, worker_id = NULL, worker_pid = NULL,
                finished_at = ?, exit_code = ?, last_error = ?, error_group = ?, updated_at = ?
 WHERE seq = ?

-- name: record_attempt
INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at, finished_at,
                      exit_code, outcome, output, error)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: touch_worker
-- Each worker's current job (busy) or none (idle), and its counters; a worker that is
-- stopping keeps that status.
UPDATE workers SET current_job = ?, last_heartbeat = ?,
                   jobs_done = jobs_done + ?, jobs_failed = jobs_failed + ?,
                   status = CASE WHEN status IN ('idle', 'busy') THEN ? ELSE status END
 WHERE id = ?

-- name: mark_workers_lost
UPDATE workers SET status = 'lost', stopped_at = ?, current_job = NULL
 WHERE status IN ('idle', 'busy', 'stopping') AND id IN (?, ...)

-- name: orphaned_jobs
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group
  FROM jobs
 WHERE state = 'processing'
   AND worker_id NOT IN (SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping'))


-- == workers =================================================================================

-- name: register_worker
INSERT OR REPLACE INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat,
                                stopped_at, current_job, jobs_done, jobs_failed,
                                pid_namespace)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: heartbeat_among
UPDATE workers SET last_heartbeat = ?
 WHERE id IN (?, ...) AND status IN ('idle', 'busy', 'stopping')

-- name: set_worker_status
UPDATE workers SET status = ?, current_job = ?, last_heartbeat = ?,
                   stopped_at = CASE WHEN ? THEN ? ELSE stopped_at END,
                   jobs_done = jobs_done + ?, jobs_failed = jobs_failed + ?
 WHERE id = ?

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
DELETE FROM workers WHERE status NOT IN ('idle', 'busy', 'stopping') AND stopped_at < ?

-- name: request_stop
INSERT INTO stop_requests (requested_at) VALUES (?)

-- name: latest_stop_request
SELECT coalesce(max(id), 0) FROM stop_requests

-- name: stop_requested_after
SELECT 1 FROM stop_requests WHERE id > ? LIMIT 1

-- name: stop_requested_since
SELECT 1 FROM stop_requests WHERE requested_at >= ? LIMIT 1


-- == submissions and metrics' counters =======================================================

-- name: waiting_depth
-- Jobs waiting to run, every queue: what backpressure measures.
SELECT coalesce(sum(n), 0) FROM queue_counts WHERE state IN ('pending', 'failed')

-- name: waiting_of_type
-- Waiting jobs of one type; the partial index holds only those, so the count reads no more
-- entries than there are (and admission stops them at the type's limit).
SELECT count(*) FROM jobs INDEXED BY jobs_waiting_type
 WHERE job_type = ? AND state IN ('pending', 'failed')

-- name: add_to_counter
UPDATE counters SET n = n + ? WHERE name = ?
