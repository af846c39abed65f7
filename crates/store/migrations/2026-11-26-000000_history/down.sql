DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX events_by_age ON events (occurred_at);
DROP INDEX events_recent;
CREATE INDEX events_recent ON events (workspace_id, event, occurred_at);
DROP TABLE event_samples;
