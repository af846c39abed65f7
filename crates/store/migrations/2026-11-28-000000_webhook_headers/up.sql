-- A webhook's own request headers. Their names are shown in lists; their values
-- are secrets read only to deliver, so they live in a column of their own that
-- only the claim and the write that sets them touch.
ALTER TABLE webhooks ADD COLUMN header_names TEXT NOT NULL DEFAULT '';
-- One `Name: value` a line, in order.
ALTER TABLE webhooks ADD COLUMN headers TEXT NOT NULL DEFAULT '';
