-- Migration 12: jobs that run after other jobs. A job given `after` waits in the new state
-- 'waiting' until the jobs it names have ended; each link records how its parent ended, so
-- that a parent pruned since still counts as it ended.
--
-- The state's CHECK admits one more value. SQLite cannot alter a CHECK; rather than rebuild
-- the jobs table (every index and trigger on it, for a million rows), its definition is
-- edited in place, by SQLite's documented procedure for a constraint that only loosens: every
-- stored row still satisfies it. schema.py moves the schema version on after
-- `writable_schema` is turned off, so that every connection reads the new definition.

PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, '''dead'',''cancelled'')', '''dead'',''cancelled'',''waiting'')')
 WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = OFF;

ALTER TABLE jobs ADD COLUMN after_any_end INTEGER NOT NULL DEFAULT 0;
-- The job whose end cancelled this one: retrying it brings this one back.
ALTER TABLE jobs ADD COLUMN blocked_by TEXT;
-- Some job runs after this one: its end is looked at for them (the others pay nothing).
ALTER TABLE jobs ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;

-- One row per (job, job it runs after). The parent is named by id, without a reference:
-- it may be pruned once it has ended, and its end stays here (parent_state: completed, dead,
-- cancelled or deleted; NULL while it has not ended).
CREATE TABLE job_parents (
    job_seq      INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    position     INTEGER NOT NULL,  -- its place in the job's `after`
    parent_id    TEXT    NOT NULL,
    parent_state TEXT,
    PRIMARY KEY (job_seq, position)
) WITHOUT ROWID;
CREATE INDEX job_parents_parent ON job_parents (parent_id);
-- Whether a job must wait on, without reading its thousand links as each parent ends: one
-- probe for a parent that has not ended, one for one that failed.
CREATE INDEX job_parents_open ON job_parents (job_seq) WHERE parent_state IS NULL;
CREATE INDEX job_parents_failed ON job_parents (job_seq) WHERE parent_state <> 'completed';
