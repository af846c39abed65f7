//! One migrations folder serves both backends; this keeps them in step.

use hookline_store::Backend;
use hookline_store::testing::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_end_with_the_same_tables_and_columns() {
    let sqlite = TestDb::new(Backend::Sqlite).await.columns().await;
    let postgres = TestDb::new(Backend::Postgres).await.columns().await;

    // PostgreSQL spells the types out; the rest must match exactly.
    let normalise = |data_type: &str| match data_type {
        "character varying" => "text".to_owned(),
        other => other.to_owned(),
    };
    let sqlite: Vec<_> = sqlite
        .into_iter()
        .map(|c| {
            (
                c.table_name,
                c.column_name,
                normalise(&c.data_type),
                c.not_null,
            )
        })
        .collect();
    let postgres: Vec<_> = postgres
        .into_iter()
        .map(|c| {
            (
                c.table_name,
                c.column_name,
                normalise(&c.data_type),
                c.not_null,
            )
        })
        .collect();
    assert_eq!(sqlite, postgres);

    let tables: std::collections::BTreeSet<_> = sqlite.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        [
            "accounts",
            "api_keys",
            "deliveries",
            "delivery_attempts",
            "events",
            "rate_limit_windows",
            "webhooks",
            "workspaces"
        ]
    );
}
