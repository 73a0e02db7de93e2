-- The statements of periodic schedules (schedules.py says what a schedule is).

-- name: schedules
SELECT name, origin, definition, next_at, paused, last_job_id, last_fired_at, created_at,
       updated_at
  FROM schedules ORDER BY name

-- name: schedule_by_name
SELECT name, origin, definition, next_at, paused, last_job_id, last_fired_at, created_at,
       updated_at
  FROM schedules WHERE name = :name

-- name: insert_schedule
-- A name that is taken inserts nothing: the store says so.
INSERT INTO schedules (name, origin, definition, next_at, paused, last_job_id, last_fired_at,
                       created_at, updated_at)
VALUES (:name, :origin, :definition, :next_at, :paused, :last_job_id, :last_fired_at, :created_at, :updated_at)
ON CONFLICT (name) DO NOTHING

-- name: redefine_schedule
UPDATE schedules SET definition = :definition, next_at = :next_at, updated_at = :now WHERE name = :name

-- name: delete_schedule
DELETE FROM schedules WHERE name = :name

-- name: pause_schedule
UPDATE schedules SET paused = 1, updated_at = :now WHERE name = :name

-- name: resume_schedule
-- Resumed, a schedule goes on from its next tick after now: the ticks it was paused for pass.
UPDATE schedules SET paused = 0, next_at = :next_at, updated_at = :now WHERE name = :name

-- name: advance_schedule
-- The compare-and-set of a tick: only the transaction that still sees the tick it fires as
-- the schedule's next one moves it on; a pool whose view is stale changes nothing.
UPDATE schedules SET next_at = :next_at, last_job_id = coalesce(:job_id, last_job_id),
                     last_fired_at = coalesce(:fired_at, last_fired_at), updated_at = :now
 WHERE name = :name AND next_at = :expected AND paused = 0

-- name: schedule_ran
UPDATE schedules SET last_job_id = :job_id, last_fired_at = :fired_at, updated_at = :now WHERE name = :name
