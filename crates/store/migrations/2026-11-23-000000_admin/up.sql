-- The admin API: its tokens, the idempotency keys of HTTP ingest, and what the
-- admin Webhook object shows.

-- The back office's credentials; like API keys, kept only as hashes.
CREATE TABLE admin_tokens (
    id TEXT NOT NULL PRIMARY KEY,
    name TEXT NOT NULL,
    -- Hex SHA-256 of the whole token; the token itself is never stored.
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);

-- An emit's Idempotency-Key, kept 24 h: the same key for the same workspace
-- answers the first event's payload again. Written in the outbox transaction.
CREATE TABLE idempotency_keys (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    idempotency_key TEXT NOT NULL,
    event_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, idempotency_key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- Why a webhook is disabled ('manual', 'gone', 'failing'; NULL while enabled),
-- and when it last changed.
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;
ALTER TABLE webhooks ADD COLUMN updated_at BIGINT NOT NULL DEFAULT 0;
UPDATE webhooks SET updated_at = created_at;
UPDATE webhooks SET disabled_reason = 'manual' WHERE NOT enabled;
