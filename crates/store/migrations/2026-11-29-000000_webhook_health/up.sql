-- Each webhook's attempts per hour, by outcome: counted as attempts are recorded,
-- so a webhook's health over a day or a week reads at most 168 rows, however
-- long its attempt log. Rows older than the longest window are forgotten by the
-- upkeep (by hour_start).
CREATE TABLE webhook_stats (
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    hour_start BIGINT NOT NULL,
    succeeded BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (webhook_id, hour_start)
);
CREATE INDEX webhook_stats_by_hour ON webhook_stats (hour_start);
-- The breaker's rest, as the worker that opened it saw it, for the health view.
ALTER TABLE webhooks ADD COLUMN resting_until BIGINT;
ALTER TABLE webhooks ADD COLUMN resting_after INTEGER;
