-- A worker claims a due delivery by leasing it: until lease_until no other worker
-- takes it, and only the holder of lease_token may record its outcome. A crashed
-- worker's lease simply runs out and the delivery is due again.
ALTER TABLE deliveries ADD COLUMN lease_until BIGINT;
ALTER TABLE deliveries ADD COLUMN lease_token TEXT;
CREATE INDEX events_by_age ON events (occurred_at);
