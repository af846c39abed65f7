ALTER TABLE deliveries DROP COLUMN attempts_before_retry_round;
ALTER TABLE webhooks DROP COLUMN failing_since;
ALTER TABLE webhooks DROP COLUMN previous_secret_until;
ALTER TABLE webhooks DROP COLUMN previous_secret;
