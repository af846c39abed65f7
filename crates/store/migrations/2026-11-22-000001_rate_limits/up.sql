-- The current fixed rate-limit window of each API key. Kept in the database so every
-- server on a PostgreSQL database counts against the same window.
CREATE TABLE rate_limit_windows (
    key_id TEXT NOT NULL PRIMARY KEY REFERENCES api_keys (id) ON DELETE CASCADE,
    window_start BIGINT NOT NULL,
    request_count BIGINT NOT NULL
);
