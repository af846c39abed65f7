DROP TABLE delivery_attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE webhooks;
DROP TABLE api_keys;
DROP TABLE accounts;
DROP TABLE workspaces;
