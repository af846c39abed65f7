//! One migrations folder serves both backends; this keeps them in step (but
//! for what PostgreSQL's partitions need beside them).

use hookline_store::Backend;
use hookline_testdb::TestDb;

// Slow: a database of each backend is migrated from nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_end_with_the_same_tables_and_columns() {
    let sqlite = TestDb::new(Backend::Sqlite).await.columns().await;
    let postgres = TestDb::new(Backend::Postgres).await.columns().await;
    // PostgreSQL's own, made beside its partitions: the claims' pending floor.
    let (floor, postgres): (Vec<_>, Vec<_>) =
        postgres.into_iter().partition(|column| column.table_name == "pending_floor");
    assert_eq!(floor.len(), 3, "{floor:?}");

    // Names, types (as each dialect spells them, lower case) and nullability.
    assert_eq!(sqlite, postgres);

    let tables: std::collections::BTreeSet<_> =
        sqlite.iter().map(|c| c.table_name.as_str()).collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        [
            "accounts",
            "admin_tokens",
            "api_keys",
            "deliveries",
            "delivery_attempts",
            "event_samples",
            "events",
            "idempotency_keys",
            "portal_links",
            "rate_limit_windows",
            "webhook_stats",
            "webhooks",
            "workspaces"
        ]
    );
}
