-- Migration 8: jobs that run after other jobs. A job given `after` waits in the new state
-- 'waiting' until the jobs it names have ended; each link records how its parent ended, so
-- that a parent pruned since still counts as it ended.

ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN
    ('pending','processing','completed','failed','dead','cancelled','waiting'));

ALTER TABLE jobs
    ADD COLUMN after_any_end  boolean NOT NULL DEFAULT false,
    -- The job whose end cancelled this one: retrying it brings this one back.
    ADD COLUMN blocked_by     text,
    -- Some job runs after this one: its end is looked at for them (the others pay nothing).
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

-- One row per (job, job it runs after). The parent is named by id, without a reference:
-- it may be pruned once it has ended, and its end stays here (parent_state: completed, dead,
-- cancelled or deleted; NULL while it has not ended).
CREATE TABLE job_parents (
    job_seq      bigint NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    position     integer NOT NULL,
    parent_id    text COLLATE "C" NOT NULL,
    parent_state text COLLATE "C",
    PRIMARY KEY (job_seq, position)
);
CREATE INDEX job_parents_parent ON job_parents (parent_id);
-- Whether a job must wait on, without reading its thousand links as each parent ends: one
-- probe for a parent that has not ended, one for one that failed.
CREATE INDEX job_parents_open ON job_parents (job_seq) WHERE parent_state IS NULL;
CREATE INDEX job_parents_failed ON job_parents (job_seq) WHERE parent_state <> 'completed';
