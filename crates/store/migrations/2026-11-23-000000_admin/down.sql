ALTER TABLE webhooks DROP COLUMN updated_at;
ALTER TABLE webhooks DROP COLUMN disabled_reason;
DROP TABLE idempotency_keys;
DROP TABLE admin_tokens;
