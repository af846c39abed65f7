//! Diesel's view of `migrations/`: kept by hand, checked against the migrated
//! databases of both backends by `tests/schema.rs`.

diesel::table! {
    workspaces (id) {
        id -> Text,
        name -> Text,
        plan -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    accounts (id) {
        id -> Text,
        workspace_id -> Text,
        username -> Text,
        connected_at -> BigInt,
        disconnected_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Text,
        workspace_id -> Text,
        name -> Text,
        key_hash -> Text,
        created_at -> BigInt,
        last_used_at -> Nullable<BigInt>,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhooks (id) {
        id -> Text,
        workspace_id -> Text,
        url -> Text,
        events -> Text,
        enabled -> Bool,
        description -> Text,
        source -> Text,
        secret -> Text,
        created_at -> BigInt,
        disabled_reason -> Nullable<Text>,
        updated_at -> BigInt,
        previous_secret -> Nullable<Text>,
        previous_secret_until -> Nullable<BigInt>,
        failing_since -> Nullable<BigInt>,
        header_names -> Text,
        headers -> Text,
        resting_until -> Nullable<BigInt>,
        resting_after -> Nullable<Integer>,
        streamed_at -> Nullable<BigInt>,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhook_stats (webhook_id, hour_start) {
        webhook_id -> Text,
        hour_start -> BigInt,
        succeeded -> BigInt,
        failed -> BigInt,
    }
}

diesel::table! {
    events (id) {
        id -> Text,
        workspace_id -> Text,
        event -> Text,
        payload -> Text,
        occurred_at -> BigInt,
    }
}

diesel::table! {
    deliveries (event_id, webhook_id) {
        event_id -> Text,
        webhook_id -> Text,
        state -> Text,
        attempts -> BigInt,
        next_attempt_at -> BigInt,
        created_at -> BigInt,
        lease_until -> Nullable<BigInt>,
        lease_token -> Nullable<Text>,
        attempts_before_retry_round -> BigInt,
    }
}

diesel::table! {
    delivery_attempts (event_id, webhook_id, attempt) {
        event_id -> Text,
        webhook_id -> Text,
        attempt -> BigInt,
        event -> Text,
        attempted_at -> BigInt,
        status -> Nullable<BigInt>,
        error -> Nullable<Text>,
        duration_ms -> BigInt,
        response_body -> Nullable<Text>,
    }
}

diesel::table! {
    rate_limit_windows (key_id) {
        key_id -> Text,
        window_start -> BigInt,
        request_count -> BigInt,
    }
}

diesel::table! {
    admin_tokens (id) {
        id -> Text,
        name -> Text,
        token_hash -> Text,
        created_at -> BigInt,
        last_used_at -> Nullable<BigInt>,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    idempotency_keys (workspace_id, idempotency_key) {
        workspace_id -> Text,
        idempotency_key -> Text,
        event_id -> Text,
        payload -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    portal_links (token_hash) {
        token_hash -> Text,
        workspace_id -> Text,
        created_at -> BigInt,
        expires_at -> BigInt,
    }
}

diesel::table! {
    event_samples (workspace_id, event, event_id) {
        workspace_id -> Text,
        event -> Text,
        event_id -> Text,
        payload -> Text,
        occurred_at -> BigInt,
    }
}

diesel::joinable!(accounts -> workspaces (workspace_id));
diesel::joinable!(api_keys -> workspaces (workspace_id));
diesel::joinable!(webhooks -> workspaces (workspace_id));
diesel::joinable!(events -> workspaces (workspace_id));
diesel::joinable!(portal_links -> workspaces (workspace_id));
diesel::joinable!(deliveries -> events (event_id));
diesel::joinable!(deliveries -> webhooks (webhook_id));

diesel::allow_tables_to_appear_in_same_query!(
    workspaces,
    accounts,
    api_keys,
    webhooks,
    events,
    deliveries,
    delivery_attempts,
    rate_limit_windows,
    admin_tokens,
    idempotency_keys,
    portal_links,
    event_samples,
    webhook_stats,
);
