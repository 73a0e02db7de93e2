-- Migration 4: the attempt totals and rates per queue, so that `stats --queue` takes the
-- same time at any size as `stats`. The totals count every attempt ever recorded, jobs
-- deleted since included, so they are split, not recounted: the attempts still on record
-- go to their job's queue, and what is left of each total (the attempts of jobs deleted
-- since, whose queue is no longer known) is counted under 'default'.

-- The trigger that keeps them names them: it goes first and is made again at the end.
DROP TRIGGER attempts_count_insert;

CREATE TABLE attempt_totals_v4 (
    queue   TEXT    NOT NULL,
    outcome TEXT    NOT NULL,
    n       INTEGER NOT NULL,
    retries INTEGER NOT NULL,  -- of them, runs after a job's first
    PRIMARY KEY (queue, outcome)
) WITHOUT ROWID;
INSERT INTO attempt_totals_v4 (queue, outcome, n, retries)
    SELECT j.queue, a.outcome, count(*), sum(a.number > 1)
      FROM attempts a JOIN jobs j ON j.seq = a.job_seq
     WHERE j.queue <> 'default'
     GROUP BY j.queue, a.outcome;
INSERT INTO attempt_totals_v4 (queue, outcome, n, retries)
    SELECT 'default', t.outcome,
           t.n - coalesce((SELECT sum(n) FROM attempt_totals_v4 o WHERE o.outcome = t.outcome), 0),
           t.retries - coalesce((SELECT sum(retries) FROM attempt_totals_v4 o
                                  WHERE o.outcome = t.outcome), 0)
      FROM attempt_totals t;
DROP TABLE attempt_totals;
ALTER TABLE attempt_totals_v4 RENAME TO attempt_totals;

-- Finished attempts per 10 s of the clock and queue, split the same way.
CREATE TABLE attempt_rates_v4 (
    slot      INTEGER NOT NULL,
    queue     TEXT    NOT NULL,
    completed INTEGER NOT NULL,
    failed    INTEGER NOT NULL,  -- failed, timeout or lost
    PRIMARY KEY (slot, queue)
) WITHOUT ROWID;
INSERT INTO attempt_rates_v4 (slot, queue, completed, failed)
    SELECT a.finished_at / 10000, j.queue, sum(a.outcome = 'completed'),
           sum(a.outcome <> 'completed')
      FROM attempts a JOIN jobs j ON j.seq = a.job_seq
     WHERE j.queue <> 'default' AND a.outcome NOT IN ('cancelled', 'interrupted')
     GROUP BY a.finished_at / 10000, j.queue;
INSERT INTO attempt_rates_v4 (slot, queue, completed, failed)
    SELECT r.slot, 'default',
           r.completed - coalesce((SELECT sum(completed) FROM attempt_rates_v4 o
                                    WHERE o.slot = r.slot), 0),
           r.failed - coalesce((SELECT sum(failed) FROM attempt_rates_v4 o
                                 WHERE o.slot = r.slot), 0)
      FROM attempt_rates r;
DROP TABLE attempt_rates;
ALTER TABLE attempt_rates_v4 RENAME TO attempt_rates;

CREATE TRIGGER attempts_count_insert AFTER INSERT ON attempts BEGIN
    INSERT INTO attempt_totals (queue, outcome, n, retries)
        SELECT queue, NEW.outcome, 1, NEW.number > 1 FROM jobs WHERE seq = NEW.job_seq
        ON CONFLICT (queue, outcome) DO UPDATE SET n = n + 1,
                                                   retries = retries + excluded.retries;
    INSERT INTO attempt_rates (slot, queue, completed, failed)
        SELECT NEW.finished_at / 10000, queue, NEW.outcome = 'completed',
               NEW.outcome <> 'completed'
          FROM jobs WHERE seq = NEW.job_seq AND NEW.outcome NOT IN ('cancelled', 'interrupted')
        ON CONFLICT (slot, queue) DO UPDATE SET completed = completed + excluded.completed,
                                                failed = failed + excluded.failed;
END;
