//! Each example runs as its doc comment says, on a fresh database of each
//! backend, and says what it did.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use hookline_testdb::{TestDb, backend_tests};

/// Runs the example `name` on `db`; its stdout, once it succeeded.
async fn run(name: &str, db: Option<&TestDb>) -> String {
    let program = match name {
        "validate-input" => env!("CARGO_BIN_EXE_validate-input"),
        "emit-event" => env!("CARGO_BIN_EXE_emit-event"),
        _ => env!("CARGO_BIN_EXE_worker-in-process"),
    };
    let mut command = tokio::process::Command::new(program);
    if let Some(db) = db {
        command.env("DATABASE_URL", db.url());
    }
    let out = command.output().await.unwrap();
    assert!(out.status.success(), "{name}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn validate_input_accepts_and_refuses_as_the_apis_do() {
    let out = run("validate-input", None).await;
    assert!(out.contains("ok   url https://hooks.zapier.com/hooks/catch/1/abc"), "{out}");
    assert!(out.contains("no   url http://example.com/hook: "), "{out}");
    assert!(out.contains("no   url https://10.0.0.7/hook: "), "{out}");
    assert!(out.contains("unknown event `dm.read`"), "{out}");
    assert!(out.contains("ok   payload {\"id\":\"evt_"), "{out}");
    assert!(out.contains("no   payload: "), "{out}");
}

backend_tests!(emit_event_stores_the_event_and_its_delivery);

async fn emit_event_stores_the_event_and_its_delivery(db: TestDb) {
    let out = run("emit-event", Some(&db)).await;
    assert!(out.contains(" to 1 webhook(s)"), "{out}");
    let id = out.split_whitespace().nth(1).unwrap();
    let deliveries = db.store().events().deliveries(id.parse().unwrap()).await.unwrap();
    assert_eq!(deliveries.len(), 1);
}

backend_tests!(worker_in_process_records_an_attempt_and_stops);

async fn worker_in_process_records_an_attempt_and_stops(db: TestDb) {
    let out = run("worker-in-process", Some(&db)).await;
    assert!(out.starts_with("attempt 1 of evt_"), "{out}");
    assert!(out.ends_with("worker stopped\n"), "{out}");
}
