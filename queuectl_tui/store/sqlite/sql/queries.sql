-- Every statement the SQLite store runs on the queue's tables, each after a `-- name:` line
-- that the store calls it by (statements.py reads this file once, at import). Comment lines
-- are for the reader and are not sent to SQLite.
--
-- Put together elsewhere, from fixed parts only: the bulk insert (bulk.py, from its column
-- list), the schema (migrations/) and the connection's own pragmas and transactions
-- (connection.py). `(?, ...)` stands for one `?` per value of a list (statements.with_list).
-- Active workers are those with status idle, busy or stopping (models.ACTIVE_WORKER_STATUSES).


-- == jobs ====================================================================================

-- name: insert_job
INSERT INTO jobs (id, command, state, priority, run_at, max_retries, timeout, idempotency_key,
                  created_at, updated_at)
VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error

-- name: count_inserted
-- New jobs are pending; their counter is kept here, once per statement, rather than by a
-- per-row trigger.
UPDATE state_counts SET n = n + ? WHERE state = 'pending'

-- name: job_by_idempotency_key
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error
  FROM jobs WHERE idempotency_key = ?

-- name: job_by_id
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error
  FROM jobs WHERE id = ?

-- name: job_by_seq
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error
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
       finished_at, exit_code, last_error
  FROM jobs

-- name: list_jobs_in_state
state = ?

-- name: list_jobs_after
seq > ?

-- name: list_jobs_before
seq < ?

-- name: list_jobs_matching
-- The pattern has its own %, _ and \ escaped with \.
(id LIKE ? ESCAPE '\' OR command LIKE ? ESCAPE '\')

-- name: list_jobs_oldest_first
ORDER BY seq LIMIT ?

-- name: list_jobs_newest_first
ORDER BY seq DESC LIMIT ?

-- name: retry_all_dead
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?
 WHERE state = 'dead'
RETURNING id

-- name: retry_dead_among
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?
 WHERE state = 'dead' AND id IN (?, ...)
RETURNING id


-- == counts and statistics ===================================================================

-- name: state_counts
SELECT state, n FROM state_counts

-- name: count_active_workers
SELECT count(*) FROM workers WHERE status IN ('idle', 'busy', 'stopping')

-- name: outcomes_since
SELECT outcome = 'completed', count(*) FROM attempts
 WHERE finished_at > ? AND outcome <> 'cancelled' GROUP BY outcome = 'completed'

-- name: attempt_totals
SELECT outcome, n, retries FROM attempt_totals

-- name: latest_timings
SELECT started_at - scheduled_at, finished_at - started_at FROM attempts
 WHERE outcome <> 'cancelled' ORDER BY id DESC LIMIT ?

-- name: attempt_rates
SELECT slot, completed, failed FROM attempt_rates WHERE slot >= ? AND slot <= ?


-- == the engine's protocol ===================================================================

-- name: claim_next
-- The best eligible job: priority, then run_at, then creation order. INDEXED BY pins the
-- partial index that holds exactly this order; left alone, the planner may pick the state
-- index and sort every pending job, which costs seconds at a million jobs.
-- The claim takes that job in the same statement that marks it processing, inside
-- BEGIN IMMEDIATE (see connection.py).
UPDATE jobs SET state = 'processing', worker_id = ?, worker_pid = ?, claimed_at = ?,
                updated_at = ?, attempts = attempts + 1, runs = runs + 1
 WHERE seq = (SELECT seq FROM jobs INDEXED BY jobs_ready
               WHERE state IN ('pending', 'failed') AND run_at <= ?
               ORDER BY priority DESC, run_at, seq LIMIT 1)
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error

-- name: has_due_work
-- The ready index, pinned as for claim_next.
SELECT 1 FROM jobs INDEXED BY jobs_ready
 WHERE state IN ('pending', 'failed') AND run_at <= ? LIMIT 1

-- name: next_run_at
SELECT min(run_at) FROM jobs WHERE state IN ('pending', 'failed') AND run_at > ?

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
SELECT run_at, attempts, max_retries FROM jobs
 WHERE seq = ? AND state = 'processing' AND worker_id = ? AND runs = ?

-- name: settle_job
-- After job_to_settle found the row within the fence, in the same transaction.
UPDATE jobs SET state = ?, run_at = ?, attempts = ?, worker_id = NULL, worker_pid = NULL,
                finished_at = ?, exit_code = ?, last_error = ?, updated_at = ?
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
       finished_at, exit_code, last_error
  FROM jobs
 WHERE state = 'processing'
   AND worker_id NOT IN (SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping'))


-- == workers =================================================================================

-- name: register_worker
INSERT OR REPLACE INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat,
                                stopped_at, current_job, jobs_done, jobs_failed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

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
       jobs_done, jobs_failed
  FROM workers ORDER BY started_at DESC, id

-- name: list_active_workers
SELECT id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at, current_job,
       jobs_done, jobs_failed
  FROM workers WHERE status IN ('idle', 'busy', 'stopping') ORDER BY started_at DESC, id

-- name: active_workers_by_id
SELECT id, pool_id, pid, host, status, started_at, last_heartbeat, stopped_at, current_job,
       jobs_done, jobs_failed
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
