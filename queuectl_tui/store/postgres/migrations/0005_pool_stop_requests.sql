-- Migration 5: a stop request may name one pool (NULL: every pool) and ask it to cancel its
-- running jobs instead of letting them finish.

ALTER TABLE stop_requests ADD COLUMN pool_id text;
ALTER TABLE stop_requests ADD COLUMN forced integer NOT NULL DEFAULT 0;
