//! The request-body parsers, reachable from `fuzz/` (feature `fuzzing`): each
//! runs the exact code a request's body goes through, short of the database.

use hookline_domain::{EventPayload, WorkspaceId};

/// A `POST /api/v1/hooks` body, as the public API reads it; `true` when it is
/// accepted.
pub fn new_hook_body(bytes: &[u8]) -> bool {
    let Ok(body) = serde_json::from_slice(bytes) else {
        return false;
    };
    // The default policy is public targets only, as production's.
    crate::api::handlers::parse_new_hook(&body, None, &hookline_app::AppConfig::default()).is_ok()
}

/// A `POST /admin/v1/workspaces/:ws/events` body, as HTTP ingest reads it, and
/// the payload made of it; `true` when it is accepted.
pub fn ingest_body(bytes: &[u8]) -> bool {
    let Ok(body) = serde_json::from_slice(bytes) else {
        return false;
    };
    let Ok(body) = crate::input::EMIT.read(body) else {
        return false;
    };
    let Ok((event, data)) = crate::admin::emit_body(&body) else {
        return false;
    };
    EventPayload::new(event, WorkspaceId::generate(), data).is_ok()
}
