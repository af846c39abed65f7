-- History that is cheap to keep and to forget, and claims that never walk a backlog.

-- The samples that outlive retention: of each event name in each workspace, the
-- last three events, copied here by the retention round before it forgets them,
-- so that forgetting never has to look past the events it forgets.
CREATE TABLE event_samples (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    event TEXT NOT NULL,
    event_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, event, event_id)
);

-- The samples are the newest by id (ids sort by time of emit): the index probes
-- one (workspace, event) pair from its newest end.
DROP INDEX events_recent;
CREATE INDEX events_recent ON events (workspace_id, event, id);
-- Retention goes by event id (the primary key), not by this.
DROP INDEX events_by_age;

-- A claim asks each webhook with due work for its own oldest due rows, so the
-- rows of a webhook it skips (resting, at its cap) are never read.
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (webhook_id, next_attempt_at, event_id)
    WHERE state = 'pending';
