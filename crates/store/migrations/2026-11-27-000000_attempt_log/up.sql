-- The attempt log is read newest first by (attempted_at, event_id, attempt), a
-- page at a time from a cursor: with the whole order in the index, a page seeks
-- to its cursor and reads its own rows, however deep it is and however many
-- attempts share a millisecond.
DROP INDEX delivery_attempts_by_webhook;
CREATE INDEX delivery_attempts_by_webhook
    ON delivery_attempts (webhook_id, attempted_at, event_id, attempt);
