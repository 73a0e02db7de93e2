-- Migration 4: error groups. A failed or dead job's fingerprint (error_groups.py), written as
-- its failed run is settled; groups are read per state through the index.

ALTER TABLE jobs ADD COLUMN error_group text COLLATE "C";
CREATE INDEX jobs_error_groups ON jobs (state, error_group, finished_at)
    WHERE error_group IS NOT NULL;
