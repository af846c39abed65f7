-- One schema for SQLite and PostgreSQL: only the DDL the two dialects share.
-- Time is Unix milliseconds in BIGINT; ids are prefixed ULIDs in TEXT.

CREATE TABLE workspaces (
    id TEXT NOT NULL PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE accounts (
    id TEXT NOT NULL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    username TEXT NOT NULL,
    connected_at BIGINT NOT NULL,
    -- NULL while connected; a reconnect clears it and keeps the id events refer to.
    disconnected_at BIGINT,
    UNIQUE (workspace_id, username)
);

CREATE TABLE api_keys (
    id TEXT NOT NULL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    -- Hex SHA-256 of the whole key; the key itself is never stored.
    key_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_keys_by_workspace ON api_keys (workspace_id, created_at);

CREATE TABLE webhooks (
    id TEXT NOT NULL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    -- Subscribed event names, comma-separated, in the subscriber's order.
    events TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    description TEXT NOT NULL,
    -- 'api' or 'settings': decides what a 410 Gone does.
    source TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id, created_at);

CREATE TABLE events (
    id TEXT NOT NULL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    event TEXT NOT NULL,
    -- The payload exactly as delivered and signed.
    payload TEXT NOT NULL,
    occurred_at BIGINT NOT NULL
);
CREATE INDEX events_recent ON events (workspace_id, event, occurred_at);

-- The outbox: one row per webhook an event must reach, written with the event.
CREATE TABLE deliveries (
    event_id TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    -- 'pending', 'delivered', 'failed' (gave up) or 'cancelled'.
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (event_id, webhook_id)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_by_webhook ON deliveries (webhook_id);

CREATE TABLE delivery_attempts (
    event_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    event TEXT NOT NULL,
    attempted_at BIGINT NOT NULL,
    -- The receiver's HTTP status, or NULL with `error` saying why there was none.
    status BIGINT,
    error TEXT,
    duration_ms BIGINT NOT NULL,
    -- At most the first 4 KiB of the response body.
    response_body TEXT,
    PRIMARY KEY (event_id, webhook_id, attempt),
    FOREIGN KEY (event_id, webhook_id) REFERENCES deliveries (event_id, webhook_id) ON DELETE CASCADE
);
CREATE INDEX delivery_attempts_by_webhook ON delivery_attempts (webhook_id, attempted_at);
