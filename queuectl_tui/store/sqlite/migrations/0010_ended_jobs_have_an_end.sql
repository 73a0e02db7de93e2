-- Migration 10: a job that has ended has an end time. Every path that ends a job stamps it;
-- the trigger keeps it so for a row changed by hand too, as lists by time of death (dead
-- letters) rely on it, and the update gives one to the rows that ended without.

UPDATE jobs SET finished_at = updated_at
 WHERE state IN ('completed', 'dead', 'cancelled') AND finished_at IS NULL;
CREATE TRIGGER jobs_ended_at AFTER UPDATE OF state ON jobs
    WHEN NEW.finished_at IS NULL AND NEW.state IN ('completed', 'dead', 'cancelled') BEGIN
    UPDATE jobs SET finished_at = NEW.updated_at WHERE seq = NEW.seq;
END;
