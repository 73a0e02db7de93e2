-- Migration 6: a job that has ended has an end time. Every path that ends a job stamps it;
-- the trigger keeps it so for a row changed by hand too, as lists by time of death (dead
-- letters) rely on it, and the update gives one to the rows that ended without. Its WHEN
-- is checked without calling the function: the paths that stamp the time pay nothing more.

UPDATE jobs SET finished_at = updated_at
 WHERE state IN ('completed', 'dead', 'cancelled') AND finished_at IS NULL;
CREATE FUNCTION jobs_ended_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.finished_at := NEW.updated_at;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_ended_at BEFORE UPDATE OF state ON jobs FOR EACH ROW
    WHEN (NEW.finished_at IS NULL AND NEW.state IN ('completed', 'dead', 'cancelled'))
    EXECUTE FUNCTION jobs_ended_at();
