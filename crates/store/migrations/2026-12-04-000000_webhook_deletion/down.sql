DROP INDEX webhooks_being_deleted;
ALTER TABLE webhooks DROP COLUMN deleted_at;
