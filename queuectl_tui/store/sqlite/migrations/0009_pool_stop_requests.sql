-- Migration 9: a stop request may name one pool (NULL: every pool) and ask it to cancel its
-- running jobs instead of letting them finish.

ALTER TABLE stop_requests ADD COLUMN pool_id TEXT;
ALTER TABLE stop_requests ADD COLUMN forced INTEGER NOT NULL DEFAULT 0;
