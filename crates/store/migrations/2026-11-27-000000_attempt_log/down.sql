DROP INDEX delivery_attempts_by_webhook;
CREATE INDEX delivery_attempts_by_webhook ON delivery_attempts (webhook_id, attempted_at);
