DROP INDEX webhooks_listeners_by_streamed_at;
ALTER TABLE webhooks DROP COLUMN streamed_at;
