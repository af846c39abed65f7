-- Delivery operations: secret rotation, auto-disable, recover.

-- The secret a rotation replaced: it signs beside the new one until
-- previous_secret_until (ms since the epoch), so receivers can switch over.
ALTER TABLE webhooks ADD COLUMN previous_secret TEXT;
ALTER TABLE webhooks ADD COLUMN previous_secret_until BIGINT;
-- When the webhook's current run of failed attempts began; NULL after a success.
-- The upkeep disables a webhook whose run is older than HOOKLINE_DISABLE_AFTER.
ALTER TABLE webhooks ADD COLUMN failing_since BIGINT;
-- Attempts made before the delivery was last recovered or redelivered: the retry
-- schedule counts only the attempts after, while the attempt log keeps numbering.
ALTER TABLE deliveries ADD COLUMN attempts_before_retry_round BIGINT NOT NULL DEFAULT 0;
