-- Migration 9: periodic schedules. Each row is a schedule's definition (JSON, see
-- schedules.py), its next tick (epoch ms), whether it is paused, and its last job. A pool
-- fires a tick by moving next_at on with a compare-and-set in the same transaction as the
-- insert of the tick's job, so that one job is made per tick however many pools race.
-- origin: who made it (cli, console, http, api), or config for those a pool keeps in step
-- with its config file.

CREATE TABLE schedules (
    name          text    PRIMARY KEY,
    origin        text    NOT NULL,
    definition    text    NOT NULL,
    next_at       bigint,
    paused        boolean NOT NULL DEFAULT false,
    last_job_id   text,
    last_fired_at bigint,
    created_at    bigint  NOT NULL,
    updated_at    bigint  NOT NULL
);

-- A schedule added, paused or removed is news for the faces that show schedules.
CREATE FUNCTION schedules_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(queuectl_channel(), '');
    RETURN NULL;
END $$;
CREATE TRIGGER schedules_changed AFTER INSERT OR UPDATE OR DELETE ON schedules
    FOR EACH STATEMENT EXECUTE FUNCTION schedules_changed();
