-- A webhook deleted is marked at once and is gone from every read; its
-- deliveries, attempt log and row go after the delete, in write turns (the
-- upkeep finishes a deletion cut short, found through this index).
ALTER TABLE webhooks ADD COLUMN deleted_at BIGINT;
CREATE INDEX webhooks_being_deleted ON webhooks (id) WHERE deleted_at IS NOT NULL;
