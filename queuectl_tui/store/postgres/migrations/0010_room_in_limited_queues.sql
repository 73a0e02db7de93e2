-- Migration 10: a run that ends in a queue with a limit makes room for one more of its jobs,
-- which a pool serving that queue may be waiting for. Listeners are told, as they are of a
-- job made due (the rest of the function is migration 1's).

CREATE OR REPLACE FUNCTION jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n)
        SELECT queue, state, sum(n) FROM (
            SELECT o.queue, o.state, -1 AS n FROM old_rows o JOIN new_rows w USING (seq)
             WHERE o.state <> w.state OR o.queue <> w.queue
            UNION ALL
            SELECT w.queue, w.state, 1 FROM old_rows o JOIN new_rows w USING (seq)
             WHERE o.state <> w.state OR o.queue <> w.queue
        ) moved GROUP BY queue, state HAVING sum(n) <> 0;
    INSERT INTO counter_deltas (name, n)
        SELECT 'dead_lettered', count(*) FROM old_rows o JOIN new_rows w USING (seq)
         WHERE w.state = 'dead' AND o.state <> 'dead' HAVING count(*) > 0;
    -- Work that may be claimed now: a job back to pending, or a failed one made due; or room
    -- in a queue with a limit, where a run ended.
    IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows w USING (seq)
                WHERE w.state IN ('pending', 'failed') AND w.run_at <= w.updated_at
                  AND (o.state <> w.state OR o.run_at <> w.run_at))
       OR EXISTS (SELECT 1 FROM old_rows o JOIN new_rows w USING (seq)
                    JOIN queues q ON q.name = o.queue
                   WHERE o.state = 'processing' AND w.state <> 'processing'
                     AND q.max_running IS NOT NULL) THEN
        PERFORM pg_notify(queuectl_channel(), '');
    END IF;
    RETURN NULL;
END $$;
