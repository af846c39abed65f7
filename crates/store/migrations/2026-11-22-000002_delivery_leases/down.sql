DROP INDEX events_by_age;
ALTER TABLE deliveries DROP COLUMN lease_token;
ALTER TABLE deliveries DROP COLUMN lease_until;
