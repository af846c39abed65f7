-- The Settings portal's links: each opens the portal of one workspace until it
-- expires, and its session cookie carries it. Kept only as hashes, like API keys.
CREATE TABLE portal_links (
    -- Hex SHA-256 of the whole token; the token itself is never stored.
    token_hash TEXT NOT NULL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX portal_links_by_expiry ON portal_links (expires_at);
