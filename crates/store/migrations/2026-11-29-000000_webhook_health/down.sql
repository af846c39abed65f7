ALTER TABLE webhooks DROP COLUMN resting_after;
ALTER TABLE webhooks DROP COLUMN resting_until;
DROP TABLE webhook_stats;
