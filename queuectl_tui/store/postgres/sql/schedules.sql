-- The statements of periodic schedules (schedules.py says what a schedule is).

-- name: schedules
SELECT name, origin, definition, next_at, paused, last_job_id, last_fired_at, created_at,
       updated_at
  FROM schedules ORDER BY name

-- name: schedule_by_name
SELECT name, origin, definition, next_at, paused, last_job_id, last_fired_at, created_at,
       updated_at
  FROM schedules WHERE name = %(name)s

-- name: insert_schedule
-- A name that is taken inserts nothing: the store says so.
INSERT INTO schedules (name, origin, definition, next_at, paused, last_job_id, last_fired_at,
                       created_at, updated_at)
VALUES (%(name)s, %(origin)s, %(definition)s, %(next_at)s, %(paused)s, %(last_job_id)s, %(last_fired_at)s, %(created_at)s, %(updated_at)s)
ON CONFLICT (name) DO NOTHING

-- name: redefine_schedule
UPDATE schedules SET definition = %(definition)s, next_at = %(next_at)s, updated_at = %(now)s WHERE name = %(name)s

-- name: delete_schedule
DELETE FROM schedules WHERE name = %(name)s

-- name: pause_schedule
UPDATE schedules SET paused = true, updated_at = %(now)s WHERE name = %(name)s

-- name: resume_schedule
-- Resumed, a schedule goes on from its next tick after now: the ticks it was paused for pass.
UPDATE schedules SET paused = false, next_at = %(next_at)s, updated_at = %(now)s WHERE name = %(name)s

-- name: advance_schedule
-- The compare-and-set of a tick: only the transaction that still sees the tick it fires as
-- the schedule's next one moves it on; a pool whose view is stale changes nothing.
UPDATE schedules SET next_at = %(next_at)s, last_job_id = coalesce(%(job_id)s, last_job_id),
                     last_fired_at = coalesce(%(fired_at)s, last_fired_at), updated_at = %(now)s
 WHERE name = %(name)s AND next_at = %(expected)s AND NOT paused

-- name: schedule_ran
UPDATE schedules SET last_job_id = %(job_id)s, last_fired_at = %(fired_at)s, updated_at = %(now)s WHERE name = %(name)s

-- name: schedules_lock
-- Pools that start together keep their config's schedules in step one at a time.
SELECT pg_advisory_xact_lock(hashtext('queuectl.schedules.' || current_schema()))
