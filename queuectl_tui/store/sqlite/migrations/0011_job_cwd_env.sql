-- Migration 11: a job's own working directory and environment (JSON: names to values), for
-- its runs; NULL: the pool's.

ALTER TABLE jobs ADD COLUMN cwd TEXT;
ALTER TABLE jobs ADD COLUMN env TEXT;
