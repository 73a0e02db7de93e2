-- Migration 2: the PID namespace a worker's pid belongs to ("BOOT_ID:INODE", see
-- engine/identity.py), so that a pool judges another pool by its pid only when both share a
-- process table. Rows of earlier pools have '' and are judged by their heartbeats alone.

ALTER TABLE workers ADD COLUMN pid_namespace text NOT NULL DEFAULT '';
