ALTER TABLE webhooks DROP COLUMN headers;
ALTER TABLE webhooks DROP COLUMN header_names;
