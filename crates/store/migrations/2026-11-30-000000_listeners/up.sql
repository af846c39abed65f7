-- Listeners are webhooks of source 'listener' whose deliveries go down a stream
-- to `hookline listen`. When one was last streamed (set at its creation too), for
-- the upkeep that removes those unused for a day through this index.
ALTER TABLE webhooks ADD COLUMN streamed_at BIGINT;
CREATE INDEX webhooks_listeners_by_streamed_at ON webhooks (streamed_at) WHERE source = 'listener';
