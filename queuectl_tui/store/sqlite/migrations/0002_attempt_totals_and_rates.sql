-- Migration 2: attempt totals and outcomes per 10 s, kept by trigger, so that `stats` and the
-- console's rates take the same time at any size. They count every attempt ever recorded
-- (a counter never goes down), whatever later becomes of its job.

CREATE TABLE attempt_totals (
    outcome TEXT    PRIMARY KEY,
    n       INTEGER NOT NULL,
    retries INTEGER NOT NULL  -- of them, runs after a job's first
) WITHOUT ROWID;
INSERT INTO attempt_totals (outcome, n, retries)
    SELECT outcome, count(*), sum(number > 1) FROM attempts GROUP BY outcome;

-- Finished attempts per 10 s of the clock (finished_at / 10000), cancelled ones apart:
-- fine enough for per-minute rates over a window that ends now.
CREATE TABLE attempt_rates (
    slot      INTEGER PRIMARY KEY,
    completed INTEGER NOT NULL,
    failed    INTEGER NOT NULL  -- failed, timeout or lost
);
INSERT INTO attempt_rates (slot, completed, failed)
    SELECT finished_at / 10000, sum(outcome = 'completed'), sum(outcome <> 'completed')
      FROM attempts WHERE outcome <> 'cancelled' GROUP BY finished_at / 10000;

CREATE TRIGGER attempts_count_insert AFTER INSERT ON attempts BEGIN
    INSERT INTO attempt_totals (outcome, n, retries) VALUES (NEW.outcome, 1, NEW.number > 1)
        ON CONFLICT (outcome) DO UPDATE SET n = n + 1, retries = retries + excluded.retries;
    INSERT INTO attempt_rates (slot, completed, failed)
        SELECT NEW.finished_at / 10000, NEW.outcome = 'completed', NEW.outcome <> 'completed'
         WHERE NEW.outcome <> 'cancelled'
        ON CONFLICT (slot) DO UPDATE SET completed = completed + excluded.completed,
                                           failed = failed + excluded.failed;
END;
