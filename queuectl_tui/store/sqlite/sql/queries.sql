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
                  created_at, updated_at, queue, job_type, payload, cwd, env)
VALUES (:id, :command, 'pending', :priority, :run_at, :max_retries, :timeout, :idempotency_key, :created_at, :updated_at, :queue, :job_type, :payload, :cwd, :env)
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by

-- name: count_inserted
-- New jobs are pending; their counter is kept here, once per statement, rather than by a
-- per-row trigger.
INSERT INTO queue_counts (queue, state, n) VALUES (:queue, 'pending', :n)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n

-- name: count_inserted_since
-- The same for a bulk insert whose jobs name their queues: those inserted in this
-- transaction have a seq above the largest before it.
INSERT INTO queue_counts (queue, state, n)
    SELECT queue, 'pending', count(*) FROM jobs WHERE seq > :after_seq GROUP BY queue
    ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n

-- name: last_seq
SELECT coalesce(max(seq), 0) FROM jobs

-- name: job_by_idempotency_key
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by
  FROM jobs WHERE idempotency_key = :key

-- name: job_by_id
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by
  FROM jobs WHERE id = :id

-- name: job_by_seq
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by
  FROM jobs WHERE seq = :seq

-- name: stored_id_among
SELECT id FROM jobs WHERE id IN (?, ...) LIMIT 1

-- name: job_attempts
SELECT j.id AS job_id, a.number, a.worker_id, a.scheduled_at, a.started_at, a.finished_at,
       a.exit_code, a.outcome, a.output, a.error
  FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE j.id = :id ORDER BY a.id

-- name: list_jobs
-- One keyset page of jobs. The store adds `WHERE` and the list_jobs_* conditions it was asked
-- for, joined by `AND`, then one of the two orders: each combination is then a plain range
-- that keeps its index (jobs_state_seq for a state, the rowid otherwise).
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by
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

-- name: list_jobs_ended
-- In the order the jobs ended (dead letters by time of death): the end, then seq, through
-- jobs_finished; a page goes on from where its anchor job ended. Only ended jobs: a failed
-- (or retried) one keeps its last run's end, and is not one.
state IN ('completed', 'dead', 'cancelled') AND finished_at IS NOT NULL

-- name: list_jobs_ended_after
(finished_at, seq) > (SELECT finished_at, seq FROM jobs WHERE seq = ?)

-- name: list_jobs_ended_before
(finished_at, seq) < (SELECT finished_at, seq FROM jobs WHERE seq = ?)

-- name: list_jobs_ended_after_at
-- As list_jobs_ended_after, from an end and a seq the caller kept (a cursor of GET /jobs).
(finished_at, seq) > (?, ?)

-- name: list_jobs_ended_before_at
(finished_at, seq) < (?, ?)

-- name: list_jobs_ended_first
ORDER BY finished_at, seq LIMIT ?

-- name: list_jobs_ended_last
ORDER BY finished_at DESC, seq DESC LIMIT ?

-- name: retry_all_dead
UPDATE jobs SET state = 'pending', attempts = 0, run_at = :now, updated_at = :now,
                cancel_requested_at = NULL, blocked_by = NULL
 WHERE state = 'dead'
RETURNING id

-- name: retry_dead_among
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?,
                cancel_requested_at = NULL, blocked_by = NULL
 WHERE +state = 'dead' AND id IN (?, ...)
RETURNING id

-- name: retry_finished_among
-- Dead and cancelled jobs go back to pending with a fresh retry budget.
UPDATE jobs SET state = 'pending', attempts = 0, run_at = ?, updated_at = ?,
                cancel_requested_at = NULL, blocked_by = NULL
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
 WHERE +state IN ('pending', 'failed', 'waiting') AND id IN (?, ...)
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
 WHERE state = :state AND finished_at < :before ORDER BY finished_at LIMIT :limit

-- name: count_prunable
SELECT count(*) FROM jobs INDEXED BY jobs_finished WHERE state = :state AND finished_at < :before

-- name: delete_seqs
DELETE FROM jobs WHERE state <> 'processing' AND seq IN (?, ...)


-- == live output =============================================================================

-- name: append_output
-- Fenced: a piece is kept only while its run is the job's run under that worker.
INSERT OR IGNORE INTO output_chunks (job_seq, run, seq, stream, byte_offset, body, at)
SELECT seq, :run, :seq, :stream, :byte_offset, :body, :at FROM jobs
 WHERE id = :job_id AND state = 'processing' AND worker_id = :worker_id AND runs = :run

-- name: forget_output
-- The pieces of runs before the one before (a follower may still be reading that one), and
-- this run's below the first one kept.
DELETE FROM output_chunks
 WHERE job_seq = (SELECT seq FROM jobs WHERE id = :job_id)
   AND (run < :before_run OR (run = :run AND seq < :keep_from))

-- name: output_chunks
SELECT c.seq, c.stream, c.body AS text, c.at, c.byte_offset
  FROM output_chunks c JOIN jobs j ON j.seq = c.job_seq
 WHERE j.id = :id AND c.run = :run AND c.seq > :after_seq
 ORDER BY c.seq LIMIT :limit


-- == error groups ============================================================================

-- name: error_groups
-- The groups of one state's jobs, largest first, each with its latest job (jobs_error_groups).
SELECT g.error_group, count(*), min(g.finished_at), max(g.finished_at),
       (SELECT e.id FROM jobs e
         WHERE e.state = g.state AND e.error_group = g.error_group
         ORDER BY e.finished_at DESC LIMIT 1)
  FROM jobs g
 WHERE g.state = :state AND g.error_group IS NOT NULL
 GROUP BY g.state, g.error_group
 ORDER BY count(*) DESC, g.error_group
 LIMIT :limit

-- name: error_group_ids
SELECT id FROM jobs WHERE state = :state AND error_group = :fingerprint ORDER BY seq


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
INSERT INTO queues (name, paused, updated_at) VALUES (:name, :value, :now)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: set_queue_limit
INSERT INTO queues (name, max_running, updated_at) VALUES (:name, :value, :now)
    ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
                                     updated_at = excluded.updated_at

-- name: waiting_queues
-- Queues with jobs waiting (pending or failed).
SELECT DISTINCT queue FROM queue_counts WHERE state IN ('pending', 'failed') AND n > 0

-- name: limited_queues
-- Queues with a limit on their running jobs: a run that ends in one makes room.
SELECT name FROM queues WHERE max_running IS NOT NULL

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
INSERT INTO audit (at, face, actor, host, action, subject, touched) VALUES (:at, :face, :actor, :host, :action, :subject, :touched)

-- name: list_actions
SELECT id, at, face, actor, host, action, subject, touched FROM audit
 WHERE (:before IS NULL OR id < :before) ORDER BY id DESC LIMIT :limit


-- == counts and statistics ===================================================================

-- name: state_counts
SELECT state, sum(n) FROM queue_counts GROUP BY state

-- name: queue_state_counts
SELECT state, n FROM queue_counts WHERE queue = :queue

-- name: count_active_workers
SELECT count(*) FROM workers WHERE status IN ('idle', 'busy', 'stopping')

-- name: outcomes_since
SELECT outcome = 'completed', count(*) FROM attempts
 WHERE finished_at > :since AND outcome NOT IN ('cancelled', 'interrupted')
 GROUP BY outcome = 'completed'

-- name: queue_outcomes_since
SELECT a.outcome = 'completed', count(*) FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE a.finished_at > :since AND a.outcome NOT IN ('cancelled', 'interrupted') AND j.queue = :queue
 GROUP BY a.outcome = 'completed'

-- name: attempt_totals
-- Of every queue (?1 NULL) or of one.
SELECT outcome, sum(n), sum(retries) FROM attempt_totals
 WHERE :queue IS NULL OR queue = :queue
 GROUP BY outcome

-- name: latest_timings
SELECT started_at - scheduled_at, finished_at - started_at FROM attempts
 WHERE outcome NOT IN ('cancelled', 'interrupted') ORDER BY id DESC LIMIT :limit

-- name: queue_latest_timings
-- One queue's attempts among the latest ?2 of every queue (the newest ?3 of them): attempts
-- carry no queue of their own, so the look back is bounded to keep the read cheap.
SELECT a.started_at - a.scheduled_at, a.finished_at - a.started_at
  FROM attempts a JOIN jobs j ON j.seq = a.job_seq
 WHERE a.id > (SELECT coalesce(max(id), 0) FROM attempts) - :look_back
   AND a.outcome NOT IN ('cancelled', 'interrupted') AND j.queue = :queue
 ORDER BY a.id DESC LIMIT :limit

-- name: attempt_rates
-- Of every queue (?3 NULL) or of one.
SELECT slot, sum(completed), sum(failed) FROM attempt_rates
 WHERE slot >= :first AND slot <= :last AND (:queue IS NULL OR queue = :queue)
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
UPDATE jobs SET state = 'processing', worker_id = :worker_id, worker_pid = :worker_pid, claimed_at = :now,
                updated_at = :now, attempts = attempts + 1, runs = runs + 1
 WHERE seq = (SELECT seq FROM jobs INDEXED BY jobs_ready
               WHERE queue = :queue AND state IN ('pending', 'failed')
               ORDER BY priority DESC, run_at, seq LIMIT 1)
   AND run_at <= :now
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by

-- name: first_waiting
-- The first job of one queue in claim order, due or not (see claim_next).
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = :queue AND state IN ('pending', 'failed')
 ORDER BY priority DESC, run_at, seq LIMIT 1

-- name: first_of_level
-- The first job of one priority level of one queue: the earliest run_at, then creation order.
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = :queue AND state IN ('pending', 'failed') AND priority = :priority
 ORDER BY run_at, seq LIMIT 1

-- name: waiting_levels
-- Each priority level of one queue's waiting jobs (at most ?3 of them, highest first), with
-- its earliest run_at and its earliest run_at after ?2. Each next level is one seek in the
-- ready index (the highest priority below the last), so the cost grows with the number of
-- levels, not of jobs; past ?3 levels the reader falls back to the scans below.
WITH RECURSIVE level(p) AS (
    SELECT max(priority) FROM jobs INDEXED BY jobs_ready
     WHERE queue = :queue AND state IN ('pending', 'failed')
    UNION ALL
    SELECT (SELECT max(priority) FROM jobs INDEXED BY jobs_ready
             WHERE queue = :queue AND state IN ('pending', 'failed') AND priority < level.p)
      FROM level WHERE level.p IS NOT NULL
     LIMIT :most
)
SELECT p,
       (SELECT min(run_at) FROM jobs INDEXED BY jobs_ready
         WHERE queue = :queue AND state IN ('pending', 'failed') AND priority = level.p),
       (SELECT min(run_at) FROM jobs INDEXED BY jobs_ready
         WHERE queue = :queue AND state IN ('pending', 'failed') AND priority = level.p
           AND run_at > :now)
  FROM level WHERE p IS NOT NULL

-- name: best_due_scan
-- For a queue of very many priority levels: the claim order's first due job, walking the
-- ready index past the jobs scheduled for later.
SELECT priority, run_at, seq FROM jobs INDEXED BY jobs_ready
 WHERE queue = :queue AND state IN ('pending', 'failed') AND run_at <= :now
 ORDER BY priority DESC, run_at, seq LIMIT 1

-- name: earliest_scan
-- For a queue of very many priority levels: its earliest run_at, and the earliest after ?2.
SELECT min(run_at), min(CASE WHEN run_at > :after THEN run_at END) FROM jobs INDEXED BY jobs_ready
 WHERE queue = :queue AND state IN ('pending', 'failed')

-- name: claim_seq
UPDATE jobs SET state = 'processing', worker_id = :worker_id, worker_pid = :worker_pid, claimed_at = :now,
                updated_at = :now, attempts = attempts + 1, runs = runs + 1
 WHERE seq = :seq AND state IN ('pending', 'failed')
RETURNING seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
          idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
          finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by

-- name: active_workers_among
SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping') AND id IN (?, ...)

-- name: complete_job
-- The fence, here and in job_to_settle: still processing, still ours, still this run.
-- Completed changes nothing but the state (see lifecycle.after_attempt), so it is
-- written without reading the row first: the hot path of a busy pool.
UPDATE jobs SET state = 'completed', worker_id = NULL, worker_pid = NULL,
                finished_at = :now, exit_code = :exit_code, last_error = :error, updated_at = :now
 WHERE seq = :seq AND state = 'processing' AND worker_id = :worker_id AND runs = :runs
RETURNING run_at, has_dependents

-- name: job_to_settle
SELECT run_at, attempts, max_retries, cancel_requested_at IS NOT NULL, has_dependents FROM jobs
 WHERE seq = :seq AND state = 'processing' AND worker_id = :worker_id AND runs = :runs

-- name: settle_job
-- After job_to_settle found the row within the fence, in the same transaction.
UPDATE jobs SET state = :state, run_at = :run_at, attempts = :attempts, worker_id = NULL, worker_pid = NULL,
                finished_at = :now, exit_code = :exit_code, last_error = :error, error_group = :error_group, updated_at = :now
 WHERE seq = :seq

-- name: record_attempt
INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at, finished_at,
                      exit_code, outcome, output, error)
VALUES (:job_seq, :number, :worker_id, :scheduled_at, :started_at, :finished_at, :exit_code, :outcome, :output, :error)

-- name: touch_worker
-- Each worker's current job (busy) or none (idle), and its counters; a worker that is
-- stopping keeps that status.
UPDATE workers SET current_job = :current_job, last_heartbeat = :now,
                   jobs_done = jobs_done + :done, jobs_failed = jobs_failed + :failed,
                   status = CASE WHEN status IN ('idle', 'busy') THEN :status ELSE status END
 WHERE id = :id

-- name: mark_workers_lost
UPDATE workers SET status = 'lost', stopped_at = ?, current_job = NULL
 WHERE status IN ('idle', 'busy', 'stopping') AND id IN (?, ...)

-- name: orphaned_jobs
SELECT seq, id, command, state, priority, run_at, max_retries, timeout, attempts, runs,
       idempotency_key, created_at, updated_at, claimed_at, worker_id, worker_pid,
       finished_at, exit_code, last_error, queue, cancel_requested_at,
       job_type, payload, error_group, cwd, env, after_any_end, blocked_by
  FROM jobs
 WHERE state = 'processing'
   AND worker_id NOT IN (SELECT id FROM workers WHERE status IN ('idle', 'busy', 'stopping'))


-- == workers =================================================================================

-- name: register_worker
INSERT OR REPLACE INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat,
                                stopped_at, current_job, jobs_done, jobs_failed,
                                pid_namespace)
VALUES (:id, :pool_id, :pid, :host, :status, :started_at, :last_heartbeat, :stopped_at, :current_job, :jobs_done, :jobs_failed, :pid_namespace)

-- name: heartbeat_among
UPDATE workers SET last_heartbeat = ?
 WHERE id IN (?, ...) AND status IN ('idle', 'busy', 'stopping')

-- name: set_worker_status
UPDATE workers SET status = :status, current_job = :current_job, last_heartbeat = :now,
                   stopped_at = CASE WHEN :ended THEN :now ELSE stopped_at END,
                   jobs_done = jobs_done + :done, jobs_failed = jobs_failed + :failed
 WHERE id = :id

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
DELETE FROM workers WHERE status NOT IN ('idle', 'busy', 'stopping') AND stopped_at < :before

-- name: request_stop
INSERT INTO stop_requests (requested_at, pool_id, forced) VALUES (:now, :pool_id, :forced)

-- name: latest_stop_request
SELECT coalesce(max(id), 0) FROM stop_requests

-- name: stop_requested_after
-- The strongest request for one pool after a given one: NULL none, 0 graceful, 1 forced.
SELECT max(forced) FROM stop_requests WHERE id > :request_id AND (pool_id IS NULL OR pool_id = :pool_id)

-- name: stop_requested_since
SELECT max(forced) FROM stop_requests
 WHERE requested_at >= :since AND (pool_id IS NULL OR pool_id = :pool_id)


-- == submissions and metrics' counters =======================================================

-- name: waiting_depth
-- Jobs waiting to run, every queue: what backpressure measures.
SELECT coalesce(sum(n), 0) FROM queue_counts WHERE state IN ('pending', 'failed')

-- name: waiting_of_type
-- Waiting jobs of one type; the partial index holds only those, so the count reads no more
-- entries than there are (and admission stops them at the type's limit).
SELECT count(*) FROM jobs INDEXED BY jobs_waiting_type
 WHERE job_type = :job_type AND state IN ('pending', 'failed')

-- name: add_to_counter
UPDATE counters SET n = n + :n WHERE name = :name


-- == the text index (queuectl search-index) ==================================================
-- Free text goes through an FTS5 trigram index of each job's id, command and last error when
-- an operator turned it on: a rare match among a million jobs in milliseconds instead of a
-- scan, for enqueueing at about half the speed. The triggers keep it for every writer.

-- name: list_jobs_matching_indexed
-- The same matches as list_jobs_matching, for texts of three characters or more: each the
-- phrase of its trigrams, in any of the three, whatever the case; all of them in one MATCH
-- (`"a" AND "b"`), which the index answers together.
seq IN (SELECT rowid FROM job_text WHERE job_text MATCH ?)

-- name: text_index_present
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_text'

-- name: text_index_table
CREATE VIRTUAL TABLE job_text USING fts5(
    id, command, last_error, content = 'jobs', content_rowid = 'seq', tokenize = 'trigram'
)

-- name: text_index_on_insert
CREATE TRIGGER job_text_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO job_text (rowid, id, command, last_error)
        VALUES (NEW.seq, NEW.id, NEW.command, NEW.last_error);
END

-- name: text_index_on_delete
CREATE TRIGGER job_text_delete AFTER DELETE ON jobs BEGIN
    INSERT INTO job_text (job_text, rowid, id, command, last_error)
        VALUES ('delete', OLD.seq, OLD.id, OLD.command, OLD.last_error);
END

-- name: text_index_on_update
CREATE TRIGGER job_text_update AFTER UPDATE OF id, command, last_error ON jobs
    WHEN OLD.id IS NOT NEW.id OR OLD.command IS NOT NEW.command
      OR OLD.last_error IS NOT NEW.last_error BEGIN
    INSERT INTO job_text (job_text, rowid, id, command, last_error)
        VALUES ('delete', OLD.seq, OLD.id, OLD.command, OLD.last_error);
    INSERT INTO job_text (rowid, id, command, last_error)
        VALUES (NEW.seq, NEW.id, NEW.command, NEW.last_error);
END

-- name: text_index_rebuild
INSERT INTO job_text (job_text) VALUES ('rebuild')

-- name: text_index_drop_table
DROP TABLE IF EXISTS job_text

-- name: text_index_drop_insert
DROP TRIGGER IF EXISTS job_text_insert

-- name: text_index_drop_delete
DROP TRIGGER IF EXISTS job_text_delete

-- name: text_index_drop_update
DROP TRIGGER IF EXISTS job_text_update


-- == jobs that run after others (store/dependencies.py) =========================================
-- Parameters by name; a list comes as JSON text (links.py).

-- name: dep_find_parents
SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: dep_mark_parents
UPDATE jobs SET has_dependents = 1 WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, state

-- name: dep_link
INSERT INTO job_parents (job_seq, position, parent_id, parent_state)
VALUES (:child, :position, :parent, :parent_state)

-- name: dep_any_end
UPDATE jobs SET after_any_end = 1 WHERE seq = :seq

-- name: dep_end_links
UPDATE job_parents SET parent_state = :end WHERE parent_id IN (SELECT value FROM json_each(:parents))

-- name: dep_drop_links
UPDATE job_parents SET parent_state = 'deleted'
 WHERE parent_id IN (SELECT value FROM json_each(:parents)) AND parent_state IS NULL

-- name: dep_children
SELECT seq, id, after_any_end, blocked_by FROM jobs
 WHERE seq IN (SELECT job_seq FROM job_parents
                WHERE parent_id IN (SELECT value FROM json_each(:parents)))
   AND state = :state
 ORDER BY seq

-- name: dep_links_of
SELECT job_seq, parent_id, parent_state FROM job_parents
 WHERE job_seq IN (SELECT value FROM json_each(:seqs))
 ORDER BY job_seq, position

-- name: dep_still_waiting
-- Two probes of partial indexes per job (job_parents_open, job_parents_failed).
SELECT seq FROM jobs j
 WHERE seq IN (SELECT value FROM json_each(:seqs))
   AND EXISTS (SELECT 1 FROM job_parents p WHERE p.job_seq = j.seq AND p.parent_state IS NULL)
   AND (j.after_any_end
        OR NOT EXISTS (SELECT 1 FROM job_parents p
                        WHERE p.job_seq = j.seq AND p.parent_state <> 'completed'))

-- name: dep_set_state
-- A job that waited, or was cancelled by a parent's end, moves: its reason goes with it (a
-- job cancelled by an operator keeps its own).
UPDATE jobs SET state = :state, blocked_by = :blocked_by,
                last_error = CASE WHEN :state = 'cancelled' OR blocked_by IS NOT NULL
                                  THEN :error ELSE last_error END,
                finished_at = CASE WHEN :state = 'cancelled' THEN :now END,
                updated_at = :now
 WHERE seq = :seq

-- name: dep_linked_among
SELECT id, seq, after_any_end FROM jobs
 WHERE id IN (SELECT value FROM json_each(:ids))
   AND EXISTS (SELECT 1 FROM job_parents p WHERE p.job_seq = jobs.seq)

-- name: dep_blocked_by
SELECT blocked_by FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: dep_forget_deleted
DELETE FROM job_parents
 WHERE job_seq IN (SELECT value FROM json_each(:seqs)) AND parent_state = 'deleted'

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

-- name: dep_parents_with_children
SELECT DISTINCT parent_id FROM job_parents WHERE parent_id IN (SELECT value FROM json_each(:ids))

-- name: job_parents_of
SELECT p.parent_id, j.state, p.parent_state
  FROM jobs c JOIN job_parents p ON p.job_seq = c.seq
  LEFT JOIN jobs j ON j.id = p.parent_id
 WHERE c.id = :id
 ORDER BY p.position

-- name: job_children_of
SELECT c.id, c.state
  FROM job_parents p JOIN jobs c ON c.seq = p.job_seq
 WHERE p.parent_id = :id
 ORDER BY c.seq
 LIMIT :limit
