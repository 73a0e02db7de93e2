-- Migration 13: periodic schedules. Each row is a schedule's definition (JSON, see
-- schedules.py), its next tick (epoch ms), whether it is paused, and its last job. A pool
-- fires a tick by moving next_at on with a compare-and-set in the same transaction as the
-- insert of the tick's job, so that one job is made per tick however many pools race.
-- origin: who made it (cli, console, http, api), or config for those a pool keeps in step
-- with its config file.

CREATE TABLE schedules (
    name          TEXT    PRIMARY KEY,
    origin        TEXT    NOT NULL,
    definition    TEXT    NOT NULL,
    next_at       INTEGER,
    paused        INTEGER NOT NULL DEFAULT 0,
    last_job_id   TEXT,
    last_fired_at INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;
