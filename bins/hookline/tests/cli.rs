//! The operator CLI as outside tools use it: the built binary, run against a fresh
//! database of each backend, checked by its `--json` output and exit status.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::process::Output;

use hookline_domain::{DeliveryAttempt, Outcome};
use hookline_testdb::backend_tests;
use hookline_testdb::{Backend, Database, TestDb};
use serde_json::{Value, json};

/// Runs `hookline ARGS` against the test database, with no setting leaking in from
/// the environment of the test run.
async fn hookline(db: &TestDb, args: &[&str]) -> Output {
    command(db).args(args).output().await.unwrap()
}

fn command(db: &TestDb) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"));
    command
        .env("DATABASE_URL", db.url())
        .env_remove("HOOKLINE_KEY_PREFIX")
        .env_remove("HOOKLINE_ALLOW_PRIVATE_TARGETS")
        .env_remove("HOOKLINE_PUBLIC_URL")
        .env_remove("HOOKLINE_LISTEN");
    command
}

/// The one JSON value a successful `--json` command prints.
async fn ok_json(db: &TestDb, args: &[&str]) -> Value {
    let out = hookline(db, args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hookline {args:?} failed: {stderr}");
    assert!(stderr.is_empty(), "hookline {args:?} wrote to stderr: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("hookline {args:?} printed no single JSON value ({e})"))
}

/// `hookline hook create <ws> <rest…> --json`, which must succeed: the webhook.
async fn create_hook(db: &TestDb, ws: &str, rest: &[&str]) -> Value {
    let args = [&["hook", "create", ws][..], rest, &["--json"]].concat();
    ok_json(db, &args).await
}

/// A failed command: non-zero exit, nothing on stdout, one line on stderr holding
/// `expected`.
async fn fails(db: &TestDb, args: &[&str], expected: &str) {
    let out = hookline(db, args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "hookline {args:?} succeeded");
    assert!(
        out.stdout.is_empty(),
        "hookline {args:?} printed {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr.lines().count(), 1, "hookline {args:?} stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "hookline {args:?} stderr: {stderr}");
    assert!(stderr.contains(expected), "hookline {args:?}: expected {expected:?} in {stderr}");
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap()
}

fn is_timestamp(value: &Value) -> bool {
    // 2026-11-22T10:04:05.123Z
    let t = text(value);
    t.len() == 24 && t.ends_with('Z') && &t[10..11] == "T" && &t[19..20] == "."
}

async fn new_workspace(db: &TestDb, plan: &str) -> String {
    let ws =
        ok_json(db, &["workspace", "create", "--name", "Acme", "--plan", plan, "--json"]).await;
    text(&ws["id"]).to_owned()
}

async fn counts(db: &TestDb, ws: &str) -> (usize, usize) {
    let keys = ok_json(db, &["key", "list", ws, "--json"]).await;
    let hooks = ok_json(db, &["hook", "list", ws, "--json"]).await;
    (keys.as_array().unwrap().len(), hooks.as_array().unwrap().len())
}

backend_tests!(
    workspace_commands_print_the_workspace_shape,
    account_commands_print_the_account_shape,
    key_commands_print_the_key_once_and_list_it_without,
    hook_commands_print_the_webhook_shape_and_the_secret_once,
    delivery_operations_print_their_answers,
    a_mistyped_command_keeps_the_suggestion,
    errors_escape_control_and_separator_characters,
    hook_update_changes_what_it_is_given_and_keeps_the_rest,
    hook_headers_are_set_shown_once_replaced_and_cleared,
    admin_tokens_are_shown_once_listed_without_and_revoked,
    portal_link_prints_a_link_that_expires,
    event_emit_with_an_idempotency_key_emits_once,
    event_emit_prints_the_payload_a_webhook_receives,
    hook_deliveries_prints_the_attempt_log_newest_first,
    failures_say_why_in_one_line_and_write_nothing,
    thirty_concurrent_hook_creates_leave_exactly_ten
);

async fn workspace_commands_print_the_workspace_shape(db: TestDb) {
    let created = ok_json(&db, &["--json", "workspace", "create", "--name", "Studio Maria"]).await;
    let id = text(&created["id"]).to_owned();
    assert!(id.starts_with("ws_"));
    assert_eq!(created, json!({"id": id, "name": "Studio Maria", "plan": "FREE"}));

    let moved = ok_json(&db, &["workspace", "plan", &id, "STUDIO", "--json"]).await;
    assert_eq!(moved, json!({"id": id, "name": "Studio Maria", "plan": "STUDIO"}));
    let shown = ok_json(&db, &["workspace", "--json", "show", &id]).await;
    assert_eq!(shown, moved);

    let human = hookline(&db, &["workspace", "show", &id]).await;
    assert!(String::from_utf8_lossy(&human.stdout).contains("Studio Maria"));
}

async fn account_commands_print_the_account_shape(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let account =
        ok_json(&db, &["account", "connect", &ws, "--username", "@Maria", "--json"]).await;
    let id = text(&account["id"]).to_owned();
    assert!(id.starts_with("acc_"));
    assert_eq!(account, json!({"id": id, "username": "maria"}));
    let gone = ok_json(&db, &["account", "disconnect", &id, "--json"]).await;
    assert_eq!(gone, account);
    let back = ok_json(&db, &["account", "connect", &ws, "--username", "maria", "--json"]).await;
    assert_eq!(back["id"], account["id"]);
}

async fn key_commands_print_the_key_once_and_list_it_without(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let created = ok_json(&db, &["key", "create", &ws, "--name", "Zapier", "--json"]).await;
    let object = created.as_object().unwrap();
    assert_eq!(object.keys().collect::<Vec<_>>(), ["id", "name", "key", "createdAt"]);
    let id = text(&created["id"]).to_owned();
    assert!(id.starts_with("key_"));
    assert_eq!(created["name"], "Zapier");
    let key = text(&created["key"]);
    assert!(key.starts_with("hl_") && key.len() == 3 + 43, "{key}");
    assert!(is_timestamp(&created["createdAt"]));

    let listed = ok_json(&db, &["key", "list", &ws, "--json"]).await;
    assert_eq!(
        listed,
        json!([{"id": id, "name": "Zapier", "status": "active", "lastUsedAt": null,
                "createdAt": created["createdAt"]}])
    );
    assert!(!listed.to_string().contains(&key[3..]), "the key must not be listed");

    let revoked = ok_json(&db, &["key", "revoke", &id, "--json"]).await;
    assert_eq!(revoked, json!({"id": id, "status": "revoked"}));
    let listed = ok_json(&db, &["key", "list", &ws, "--json"]).await;
    assert_eq!(listed[0]["status"], "revoked");
    // Revoking again is harmless.
    assert_eq!(ok_json(&db, &["key", "revoke", &id, "--json"]).await, revoked);

    // The prefix is a setting.
    let out = command(&db)
        .args(["key", "create", &ws, "--name", "live", "--json"])
        .env("HOOKLINE_KEY_PREFIX", "hl_live")
        .output()
        .await
        .unwrap();
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(text(&created["key"]).starts_with("hl_live_"));
}

async fn hook_commands_print_the_webhook_shape_and_the_secret_once(db: TestDb) {
    let ws = new_workspace(&db, "FREE").await;
    let created = create_hook(
        &db,
        &ws,
        &[
            "--url",
            "https://hooks.example.com/in",
            "--event",
            "dm.sent",
            "--event",
            "link.clicked,dm.sent",
        ],
    )
    .await;
    let id = text(&created["id"]).to_owned();
    assert!(id.starts_with("wh_"));
    let secret = text(&created["secret"]).to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(is_timestamp(&created["createdAt"]));
    let mut without_secret = created.clone();
    without_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(
        without_secret,
        json!({"id": id, "url": "https://hooks.example.com/in", "events": ["dm.sent", "link.clicked"],
               "enabled": true, "description": "hooks.example.com", "createdAt": created["createdAt"]})
    );

    let described = create_hook(
        &db,
        &ws,
        &[
            "--url",
            "https://b.example.com/",
            "--event",
            "bio.subscribed",
            "--description",
            "Orders",
        ],
    )
    .await;
    assert_eq!(described["description"], "Orders");

    let listed = ok_json(&db, &["hook", "list", &ws, "--json"]).await;
    assert_eq!(
        listed,
        json!([without_secret, {
        "id": described["id"], "url": "https://b.example.com/", "events": ["bio.subscribed"],
        "enabled": true, "description": "Orders", "createdAt": described["createdAt"]}])
    );
    assert!(!listed.to_string().contains(&secret));

    let disabled = ok_json(&db, &["hook", "disable", &id, "--json"]).await;
    assert_eq!(disabled["enabled"], false);
    assert!(disabled.get("secret").is_none());
    let enabled = ok_json(&db, &["hook", "enable", &id, "--json"]).await;
    assert_eq!(enabled["enabled"], true);

    let deleted = ok_json(&db, &["hook", "delete", &id, "--json"]).await;
    assert_eq!(deleted, json!({"id": id, "deleted": true}));
    assert_eq!(ok_json(&db, &["hook", "list", &ws, "--json"]).await.as_array().unwrap().len(), 1);
}

async fn delivery_operations_print_their_answers(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let created =
        create_hook(&db, &ws, &["--url", "https://hooks.example.com/in", "--event", "dm.sent"])
            .await;
    let id = text(&created["id"]).to_owned();
    let rotated = ok_json(&db, &["hook", "rotate-secret", &id, "--grace", "1h", "--json"]).await;
    assert_eq!(rotated["id"], id.as_str());
    let secret = text(&rotated["secret"]);
    assert!(secret.starts_with("whsec_") && secret != text(&created["secret"]));
    fails(&db, &["hook", "rotate-secret", &id, "--grace", "8d"], "at most").await;

    let test = ok_json(&db, &["hook", "test", &id, "--event", "link.clicked", "--json"]).await;
    let event = text(&test["eventId"]).to_owned();
    assert!(event.starts_with("evt_"), "{test}");
    let again = ok_json(&db, &["event", "redeliver", &event, "--json"]).await;
    assert_eq!(again, json!({"queued": 0}), "still pending: left alone");
    let recovered =
        ok_json(&db, &["hook", "recover", &id, "--since", "2026-01-01T00:00:00Z", "--json"]).await;
    assert_eq!(recovered, json!({"queued": 0}));
    fails(&db, &["hook", "recover", &id, "--since", "yesterday"], "RFC 3339").await;
    fails(&db, &["event", "redeliver", "evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "no event").await;
    ok_json(&db, &["hook", "disable", &id, "--json"]).await;
    fails(&db, &["hook", "test", &id, "--event", "dm.sent"], "disabled").await;
}

async fn a_mistyped_command_keeps_the_suggestion(db: TestDb) {
    let out = hookline(&db, &["serv"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'serve'"), "{stderr}");
}

async fn errors_escape_control_and_separator_characters(db: TestDb) {
    for (args, shown) in [
        (vec!["workspace", "show", "ws_\r01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "ws_\\r01JD"),
        (vec!["key", "list", "ws_01\u{2028}X"], "ws_01\\u{2028}X"),
        (vec!["workspace", "create", "--name", "Acme", "--plan", "GOLD\u{202e}"], "GOLD\\u{202e}"),
        (
            vec![
                "hook",
                "create",
                "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R",
                "--url",
                "https://a.example.com/\u{1b}[2J",
                "--event",
                "dm.sent",
            ],
            "control characters",
        ),
    ] {
        let out = hookline(&db, &args).await;
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(stderr.matches('\n').count(), 1, "{args:?}: {stderr:?}");
        assert!(stderr.ends_with('\n'), "{stderr:?}");
        let line = stderr.trim_end_matches('\n');
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{2028}' || c == '\u{202e}'),
            "{args:?}: {line:?}"
        );
        assert!(line.contains(shown), "{args:?}: expected {shown:?} in {line:?}");
    }
}

async fn hook_update_changes_what_it_is_given_and_keeps_the_rest(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let created = create_hook(
        &db,
        &ws,
        &["--url", "https://a.example.com/", "--event", "dm.sent", "--description", "CRM"],
    )
    .await;
    let id = text(&created["id"]).to_owned();
    let updated =
        ok_json(&db, &["hook", "update", &id, "--event", "link.clicked,dm.sent", "--json"]).await;
    assert_eq!(updated["events"], json!(["link.clicked", "dm.sent"]));
    assert_eq!(
        (updated["url"].as_str(), updated["description"].as_str()),
        (Some("https://a.example.com/"), Some("CRM"))
    );
    assert!(updated.get("secret").is_none());
    let moved = ok_json(
        &db,
        &[
            "hook",
            "update",
            &id,
            "--url",
            "https://b.example.com/x",
            "--description",
            "New",
            "--json",
        ],
    )
    .await;
    assert_eq!(
        (moved["url"].as_str(), moved["description"].as_str()),
        (Some("https://b.example.com/x"), Some("New"))
    );
    assert_eq!(moved["events"], json!(["link.clicked", "dm.sent"]));
    fails(&db, &["hook", "update", &id, "--url", "http://b.example.com/"], "https").await;
    fails(
        &db,
        &["hook", "update", "wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R", "--description", "x"],
        "no webhook",
    )
    .await;
    assert_eq!(
        ok_json(&db, &["hook", "list", &ws, "--json"]).await[0]["url"],
        "https://b.example.com/x"
    );
}

async fn hook_headers_are_set_shown_once_replaced_and_cleared(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let created = create_hook(
        &db,
        &ws,
        &[
            "--url",
            "https://a.example.com/",
            "--event",
            "dm.sent",
            "--header",
            "X-Auth: first secret",
            "--header",
            "X-Tenant:acme",
        ],
    )
    .await;
    assert_eq!(created["headers"], json!({"X-Auth": "first secret", "X-Tenant": "acme"}));
    let id = text(&created["id"]).to_owned();
    let listed = ok_json(&db, &["hook", "list", &ws, "--json"]).await;
    assert_eq!(listed[0]["headers"], json!({"X-Auth": "••••", "X-Tenant": "••••"}));
    let replaced =
        ok_json(&db, &["hook", "update", &id, "--header", "X-Auth: second", "--json"]).await;
    assert_eq!(replaced["headers"], json!({"X-Auth": "second"}));
    let kept = ok_json(&db, &["hook", "update", &id, "--description", "CRM", "--json"]).await;
    assert_eq!(kept["headers"], json!({"X-Auth": "••••"}));
    fails(&db, &["hook", "update", &id, "--header", "Content-Length: 3"], "set by hookline").await;
    fails(&db, &["hook", "update", &id, "--header", "no colon"], "Name: value").await;
    let cleared = ok_json(&db, &["hook", "update", &id, "--clear-headers", "--json"]).await;
    assert!(cleared.get("headers").is_none(), "{cleared}");
}

async fn admin_tokens_are_shown_once_listed_without_and_revoked(db: TestDb) {
    let created = ok_json(&db, &["admin-token", "create", "--name", "Back office", "--json"]).await;
    let id = text(&created["id"]).to_owned();
    assert!(id.starts_with("adm_"));
    assert!(text(&created["token"]).starts_with("hladmin_"));
    assert!(is_timestamp(&created["createdAt"]));
    let listed = ok_json(&db, &["admin-token", "list", "--json"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let entry = &listed[0];
    assert_eq!(
        (entry["id"].as_str(), entry["name"].as_str(), entry["status"].as_str()),
        (Some(id.as_str()), Some("Back office"), Some("active"))
    );
    assert!(entry["lastUsedAt"].is_null() && entry.get("token").is_none());
    let revoked = ok_json(&db, &["admin-token", "revoke", &id, "--json"]).await;
    assert_eq!(revoked, json!({"id": id, "status": "revoked"}));
    assert_eq!(ok_json(&db, &["admin-token", "list", "--json"]).await[0]["status"], "revoked");
    fails(&db, &["admin-token", "revoke", "adm_01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "no admin token")
        .await;
    fails(&db, &["admin-token", "create", "--name", " "], "name").await;
}

async fn portal_link_prints_a_link_that_expires(db: TestDb) {
    let ws = new_workspace(&db, "FREE").await;
    let link = ok_json(&db, &["portal-link", &ws, "--json"]).await;
    let url = text(&link["url"]);
    assert!(
        url.starts_with(&format!("http://127.0.0.1:8080/settings/{ws}/open?token=hlportal_")),
        "{url}"
    );
    assert!(is_timestamp(&link["expiresAt"]));
    assert_eq!(link.as_object().unwrap().len(), 2, "{link}");
    let left =
        hookline_domain::Timestamp::parse_iso(text(&link["expiresAt"])).unwrap().unix_millis()
            - hookline_domain::Timestamp::now().unix_millis();
    assert!((3_590_000..=3_600_000).contains(&left), "an hour by default: {left}");
    let other = ok_json(
        &db,
        &[
            "portal-link",
            &ws,
            "--ttl",
            "10m",
            "--public-url",
            "https://hooks.example.com",
            "--json",
        ],
    )
    .await;
    let other_url = text(&other["url"]);
    assert!(other_url.starts_with("https://hooks.example.com/settings/"), "{other_url}");
    assert_ne!(
        other_url.split("token=").nth(1),
        url.split("token=").nth(1),
        "each link its own token"
    );
    let listening =
        ok_json(&db, &["portal-link", &ws, "--listen", "127.0.0.1:9999", "--json"]).await;
    assert!(text(&listening["url"]).starts_with("http://127.0.0.1:9999/settings/"));
    fails(&db, &["portal-link", &ws, "--ttl", "2d"], "--ttl").await;
    fails(
        &db,
        &["portal-link", &ws, "--public-url", "https://hooks.example.com/base"],
        "origin only",
    )
    .await;
    fails(&db, &["portal-link", "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "no workspace").await;
    fails(&db, &["portal-link", "acme"], "workspace").await;
}

async fn event_emit_with_an_idempotency_key_emits_once(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let args = [
        "event",
        "emit",
        &ws,
        "dm.sent",
        "--data",
        r#"{"messageId":"m1"}"#,
        "--idempotency-key",
        "order-9",
        "--json",
    ];
    let first = ok_json(&db, &args).await;
    let again = ok_json(&db, &args).await;
    assert_eq!(first, again);
    let human = hookline(&db, &args[..args.len() - 1]).await;
    assert!(String::from_utf8_lossy(&human.stdout).contains("nothing queued"));
}

async fn event_emit_prints_the_payload_a_webhook_receives(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let hook =
        create_hook(&db, &ws, &["--url", "https://a.example.com/", "--event", "link.clicked"])
            .await;
    let data = r#"{"linkId":"lnk_1","url":"https://shop.example.com"}"#;
    let payload =
        ok_json(&db, &["event", "emit", &ws, "link.clicked", "--data", data, "--json"]).await;
    let object = payload.as_object().unwrap();
    // The payload's fields in the order it is signed and delivered.
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["id", "event", "workspaceId", "occurredAt", "data"]
    );
    assert!(text(&payload["id"]).starts_with("evt_"));
    assert_eq!(payload["event"], "link.clicked");
    assert_eq!(payload["workspaceId"], ws.as_str());
    assert!(is_timestamp(&payload["occurredAt"]));
    assert_eq!(payload["data"], serde_json::from_str::<Value>(data).unwrap());

    // Stored byte for byte as printed, with one delivery for the subscribed webhook.
    let event_id = text(&payload["id"]).parse().unwrap();
    let out = hookline(&db, &["event", "emit", &ws, "dm.sent", "--json"]).await;
    assert!(out.status.success());
    let quiet: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(quiet["data"], json!({}));
    let stored = db.store().events().payload(event_id).await.unwrap().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&stored).unwrap(), payload);
    let deliveries = db.store().events().deliveries(event_id).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].webhook_id.to_string(), text(&hook["id"]));

    let contact = r#"{"contact":{"id":"ct_1","igUserId":"1784","username":"maria","email":"maria@example.com","accountId":"acc_1","automationId":"auto_1"}}"#;
    let captured = ok_json(
        &db,
        &["event", "emit", &ws, "contact.email_captured", "--data", contact, "--json"],
    )
    .await;
    assert_eq!(captured["data"]["contact"]["email"], "maria@example.com");
}

async fn hook_deliveries_prints_the_attempt_log_newest_first(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let hook =
        create_hook(&db, &ws, &["--url", "https://a.example.com/", "--event", "dm.sent"]).await;
    let hook_id = text(&hook["id"]).to_owned();
    assert_eq!(ok_json(&db, &["hook", "deliveries", &hook_id, "--json"]).await, json!([]));

    let payload = ok_json(&db, &["event", "emit", &ws, "dm.sent", "--json"]).await;
    let first = DeliveryAttempt {
        event_id: text(&payload["id"]).parse().unwrap(),
        webhook_id: hook_id.parse().unwrap(),
        event: hookline_domain::EventName::DmSent,
        attempt: 1,
        at: hookline_domain::Timestamp::now(),
        status: None,
        error: Some("connection refused".into()),
        duration_ms: 12,
        response_body: None,
    };
    let second = DeliveryAttempt {
        attempt: 2,
        at: first.at.plus_millis(5000),
        status: Some(200),
        error: None,
        duration_ms: 40,
        ..first.clone()
    };
    db.record_attempt(&first, Outcome::RetryAt(second.at)).await;
    db.record_attempt(&second, Outcome::Delivered).await;

    let log = ok_json(&db, &["hook", "deliveries", &hook_id, "--json"]).await;
    assert_eq!(
        log,
        json!([
            {"eventId": payload["id"], "event": "dm.sent", "attempt": 2, "at": second.at.to_string(),
             "status": 200, "error": null, "durationMs": 40},
            {"eventId": payload["id"], "event": "dm.sent", "attempt": 1, "at": first.at.to_string(),
             "status": null, "error": "connection refused", "durationMs": 12},
        ])
    );
}

async fn failures_say_why_in_one_line_and_write_nothing(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    let unknown_ws = "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R";
    let unknown_hook = "wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R";
    fails(&db, &["workspace", "show", unknown_ws], "no workspace").await;
    fails(&db, &["workspace", "plan", unknown_ws, "STUDIO"], "no workspace").await;
    fails(&db, &["workspace", "plan", &ws, "PRO"], "unknown plan").await;
    fails(&db, &["workspace", "create", "--name", "X", "--plan", "studio"], "unknown plan").await;
    fails(&db, &["workspace", "create", "--name", "   "], "must not be empty").await;
    fails(&db, &["workspace", "show", "nope"], "not a valid workspace id").await;
    fails(&db, &["account", "connect", unknown_ws, "--username", "maria"], "no workspace").await;
    fails(&db, &["account", "connect", &ws, "--username", "two words"], "invalid username").await;
    fails(&db, &["account", "disconnect", "acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "no account").await;
    fails(&db, &["key", "create", unknown_ws, "--name", "k"], "no workspace").await;
    fails(&db, &["key", "list", unknown_ws], "no workspace").await;
    fails(&db, &["key", "revoke", "key_01JD3Z6Q8T4X2K9V7B5N1M0C3R"], "no API key").await;
    for (ws, url, event, says) in [
        (unknown_ws, "https://a.example.com/", "dm.sent", "no workspace"),
        (&ws, "http://a.example.com/", "dm.sent", "https"),
        (&ws, "https://10.0.0.1/", "dm.sent", "private"),
        (&ws, "https://localhost/", "dm.sent", "local"),
        (&ws, "https://a.example.com/", "dm.read", "unknown event"),
    ] {
        fails(&db, &["hook", "create", ws, "--url", url, "--event", event], says).await;
    }
    fails(&db, &["hook", "create", &ws, "--url", "https://a.example.com/"], "--event").await;
    let long = "x".repeat(121);
    fails(
        &db,
        &[
            "hook",
            "create",
            &ws,
            "--url",
            "https://a.example.com/",
            "--event",
            "dm.sent",
            "--description",
            &long,
        ],
        "at most 120",
    )
    .await;
    fails(&db, &["hook", "list", unknown_ws], "no workspace").await;
    fails(&db, &["hook", "enable", unknown_hook], "no webhook").await;
    fails(&db, &["hook", "disable", unknown_hook], "no webhook").await;
    fails(&db, &["hook", "delete", unknown_hook], "no webhook").await;
    fails(&db, &["hook", "deliveries", unknown_hook], "no webhook").await;
    fails(&db, &["event", "emit", unknown_ws, "dm.sent"], "no workspace").await;
    fails(&db, &["event", "emit", &ws, "dm.read"], "unknown event").await;
    fails(&db, &["event", "emit", &ws, "dm.sent", "--data", "{nope"], "not JSON").await;
    fails(&db, &["event", "emit", &ws, "dm.sent", "--data", "[1]"], "JSON object").await;
    fails(
        &db,
        &["event", "emit", &ws, "contact.email_captured", "--data", r#"{"contact":{"id":"1"}}"#],
        "contact.igUserId",
    )
    .await;
    fails(
        &db,
        &["key", "create", &ws, "--name", "k", "--key-prefix", "BAD"],
        "HOOKLINE_KEY_PREFIX",
    )
    .await;
    fails(&db, &["--database-url", "mysql://h/db", "workspace", "show", &ws], "DATABASE_URL").await;
    fails(&db, &["frobnicate"], "frobnicate").await;
    assert_eq!(counts(&db, &ws).await, (0, 0));
    let shown = ok_json(&db, &["workspace", "show", &ws, "--json"]).await;
    assert_eq!(shown["plan"], "STUDIO");

    // The limits: the 11th key and the 11th webhook are refused, and change nothing.
    for i in 0..10 {
        ok_json(&db, &["key", "create", &ws, "--name", &format!("k{i}"), "--json"]).await;
        create_hook(
            &db,
            &ws,
            &["--url", &format!("https://h{i}.example.com/"), "--event", "dm.sent"],
        )
        .await;
    }
    fails(&db, &["key", "create", &ws, "--name", "eleventh"], "10 active API keys").await;
    fails(
        &db,
        &["hook", "create", &ws, "--url", "https://h10.example.com/", "--event", "dm.sent"],
        "10 webhooks",
    )
    .await;
    assert_eq!(counts(&db, &ws).await, (10, 10));
}

async fn thirty_concurrent_hook_creates_leave_exactly_ten(db: TestDb) {
    let ws = new_workspace(&db, "STUDIO").await;
    // All thirty processes are started before any is waited for.
    let children: Vec<_> = (0..30)
        .map(|i| {
            command(&db)
                .args(["hook", "create", &ws, "--url", &format!("https://r{i}.example.com/")])
                .args(["--event", "dm.sent", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut outputs = Vec::new();
    for child in children {
        outputs.push(child.wait_with_output().await.unwrap());
    }
    let succeeded = outputs.iter().filter(|out| out.status.success()).count();
    for out in outputs.iter().filter(|out| !out.status.success()) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("10 webhooks"), "unexpected failure: {stderr}");
    }
    assert_eq!(succeeded, 10);
    assert_eq!(counts(&db, &ws).await.1, 10);
}

// Slow: the 5 s wait for the writer lock runs out for real, in a separate process.
/// Another process's SQLite writer that never lets go of its turn (stopped, say):
/// a write waits for it at most 5 s, then goes ahead on SQLite's own lock, and the
/// process exits: nothing of its wait is left running (a blocked `flock` was).
#[tokio::test]
async fn a_write_outwaits_a_lock_file_that_is_never_released() {
    let db = TestDb::new(Backend::Sqlite).await;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("{}-writer.lock", db.url()))
        .unwrap();
    lock.lock().unwrap();
    let created = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        ok_json(&db, &["workspace", "create", "--name", "Acme", "--plan", "STUDIO", "--json"]),
    )
    .await
    .expect("hookline hung behind the lock file");
    assert_eq!(created["name"], "Acme");
    drop(lock);
}

#[tokio::test]
async fn migrate_creates_the_schema_of_a_new_sqlite_file() {
    let path = std::env::temp_dir().join(format!("hookline-migrate-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["migrate", "--json"])
        .env("DATABASE_URL", &path)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let applied: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!applied["applied"].as_array().unwrap().is_empty());
    let again = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["migrate", "--json"])
        .env("DATABASE_URL", &path)
        .output()
        .await
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&again.stdout).unwrap(), json!({"applied": []}));
    for suffix in hookline_store::SQLITE_FILE_SUFFIXES {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The README's quick tour starts `serve &` and runs a command at once, on a
/// database that does not exist yet: every process migrates, together. Each start
/// must succeed, each migration be applied once, and the schema end whole.
async fn fresh_databases_race_their_migrations(backend: Backend) {
    const RACES: usize = 50;
    for race in 0..RACES {
        let database = Database::new(backend).await;
        let run = |args: &'static [&'static str]| {
            let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"));
            command.args(args).env("DATABASE_URL", database.url()).output()
        };
        let (migrate, first, second) = tokio::join!(
            run(&["migrate", "--json"]),
            run(&["workspace", "create", "--name", "Acme", "--json"]),
            run(&["workspace", "create", "--name", "Beta", "--json"]),
        );
        for (name, out) in [("migrate", &migrate), ("create", &first), ("create", &second)] {
            let out = out.as_ref().unwrap();
            assert!(
                out.status.success(),
                "race {race}: {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let again = run(&["migrate", "--json"]).await.unwrap();
        let again: Value = serde_json::from_slice(&again.stdout).unwrap();
        assert_eq!(again, json!({"applied": []}), "race {race}");
    }
}

// Slow: fifty databases migrated by fifty processes racing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_fresh_sqlite_databases_race_their_migrations() {
    fresh_databases_race_their_migrations(Backend::Sqlite).await;
}

// Slow: fifty databases made and migrated, by fifty processes racing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_fresh_postgres_databases_race_their_migrations() {
    fresh_databases_race_their_migrations(Backend::Postgres).await;
}
