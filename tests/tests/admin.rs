//! The admin API against a real server on free ports, once per backend: the token
//! rules, every endpoint this version serves, pagination, bad input, and HTTP
//! ingest with idempotency keys under concurrent duplicates.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

mod harness;

use std::time::Duration;

use hookline_delivery::DeliveryConfig;
use hookline_domain::{DeliveryAttempt, EventName, Outcome, Timestamp};
use hookline_testdb::{TestDb, backend_tests};
use hookline_tests::{Receiver, Reply as Answer};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Admin, assert_error, attempts, delivery, read_until};

fn is_timestamp(value: &Value) -> bool {
    value.as_str().is_some_and(|t| t.len() == 24 && t.ends_with('Z'))
}

backend_tests!(
    a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends,
    test_events_recover_and_redeliver_make_real_deliveries,
    a_webhooks_health_counts_its_attempts_and_says_its_state,
    the_event_catalog_gives_each_events_description_schema_and_example,
    a_webhook_failing_for_the_disable_period_is_disabled_and_enabling_clears_it,
    tokens_are_checked_before_anything_else,
    workspaces_are_created_read_changed_and_paged,
    accounts_and_keys_follow_the_contract,
    settings_webhooks_are_made_changed_and_deleted,
    the_attempt_log_is_paged_newest_first,
    ingest_emits_once_per_idempotency_key_even_under_concurrency
);

async fn a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends(db: TestDb) {
    let receiver = Receiver::start().await;
    let admin = Admin::delivering(db, delivery(&receiver, 3)).await;
    let ws = admin.workspace("STUDIO").await;
    let (hook, old) =
        admin.hook(&ws, json!({"url": receiver.url("/in"), "event": "dm.sent"})).await;
    let rotate = format!("/admin/v1/hooks/{hook}/secret/rotate");
    for (body, says) in [
        (json!({"graceSeconds": -1}), "`graceSeconds`"),
        (json!({"graceSeconds": 604_801}), "at most"),
        (json!({"grace": 5}), "`grace`"),
    ] {
        assert_error(&admin.post(&rotate, body).await, StatusCode::BAD_REQUEST, says);
    }
    assert_error(
        &admin.post("/admin/v1/hooks/wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R/secret/rotate", json!({})).await,
        StatusCode::NOT_FOUND,
        "no webhook",
    );
    let rotated = admin.post(&rotate, json!({"graceSeconds": 2})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.body);
    let new = rotated.body["data"]["secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    assert!(
        admin.get(&format!("/admin/v1/hooks/{hook}")).await.body["data"].get("secret").is_none()
    );

    let emit = format!("/admin/v1/workspaces/{ws}/events");
    admin.post(&emit, json!({"event": "dm.sent", "data": {}})).await;
    let during = receiver.wait_for(1, Duration::from_secs(20)).await;
    let signature = during[0].headers["webhook-signature"].to_str().unwrap().to_owned();
    assert_eq!(signature.split(' ').count(), 2, "{signature}");
    for secret in [&old, &new] {
        let verifier = standardwebhooks::Webhook::new(secret).unwrap();
        verifier
            .verify(&during[0].body, &during[0].headers)
            .expect("either secret verifies during the grace");
    }
    admin.db.clock().advance(Duration::from_secs(3));
    admin.post(&emit, json!({"event": "dm.sent", "data": {}})).await;
    let after = receiver.wait_for(2, Duration::from_secs(20)).await;
    let (body, headers) = (&after[1].body, &after[1].headers);
    assert_eq!(headers["webhook-signature"].to_str().unwrap().split(' ').count(), 1);
    standardwebhooks::Webhook::new(&new)
        .unwrap()
        .verify(body, headers)
        .expect("the new secret verifies");
    assert!(
        standardwebhooks::Webhook::new(&old).unwrap().verify(body, headers).is_err(),
        "the old secret no longer signs"
    );
    admin.stop().await;
}

async fn test_events_recover_and_redeliver_make_real_deliveries(db: TestDb) {
    let receiver = Receiver::start().await;
    // Two failures give up (one retry); what comes after succeeds.
    receiver.script("/in", [Answer::status(500), Answer::status(503)]);
    let admin = Admin::delivering(db, delivery(&receiver, 1)).await;
    let ws = admin.workspace("STUDIO").await;
    let (hook, secret) =
        admin.hook(&ws, json!({"url": receiver.url("/in"), "event": "link.clicked"})).await;

    // A test event: any event, its example payload, to this webhook.
    let test =
        admin.post(&format!("/admin/v1/hooks/{hook}/test"), json!({"event": "dm.sent"})).await;
    assert_eq!(test.status, StatusCode::ACCEPTED, "{}", test.body);
    let event = test.body["data"]["eventId"].as_str().unwrap().to_owned();
    let log = attempts(&admin, &hook, 2).await;
    assert_eq!(log.len(), 2, "gave up after two attempts");
    assert_eq!(
        (log[0]["eventId"].as_str(), log[0]["status"].as_u64()),
        (Some(event.as_str()), Some(503))
    );
    let received = receiver.received();
    assert_eq!(received[0].headers["webhook-id"], event.as_str());
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&received[0].body, &received[0].headers)
        .unwrap();
    let payload: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(
        (payload["event"].as_str(), payload["workspaceId"].as_str()),
        (Some("dm.sent"), Some(ws.as_str()))
    );

    // Recover: the delivery that gave up goes again, with a fresh count.
    let recover = format!("/admin/v1/hooks/{hook}/recover");
    assert_error(
        &admin.post(&recover, json!({"since": "yesterday"})).await,
        StatusCode::BAD_REQUEST,
        "`since`",
    );
    assert_error(&admin.post(&recover, json!({})).await, StatusCode::BAD_REQUEST, "`since`");
    let since = Timestamp::now().plus_millis(-60_000).to_string();
    let recovered = admin.post(&recover, json!({"since": since})).await;
    assert_eq!(
        (recovered.status, recovered.body["data"]["queued"].as_u64()),
        (StatusCode::ACCEPTED, Some(1)),
        "{}",
        recovered.body
    );
    let log = attempts(&admin, &hook, 3).await;
    assert_eq!((log[0]["attempt"].as_u64(), log[0]["status"].as_u64()), (Some(3), Some(200)));
    let again = admin.post(&recover, json!({"since": since})).await;
    assert_eq!(again.body["data"]["queued"].as_u64(), Some(0), "nothing gave up since");

    // Redeliver: sent again though it was delivered.
    let redeliver = format!("/admin/v1/events/{event}/redeliver");
    let redelivered = admin.post(&redeliver, json!({})).await;
    assert_eq!(
        (redelivered.status, redelivered.body["data"]["queued"].as_u64()),
        (StatusCode::ACCEPTED, Some(1)),
        "{}",
        redelivered.body
    );
    let log = attempts(&admin, &hook, 4).await;
    assert_eq!((log[0]["attempt"].as_u64(), log[0]["status"].as_u64()), (Some(4), Some(200)));
    assert_eq!(receiver.received()[3].headers["webhook-id"], event.as_str());
    let to_hook = admin.post(&redeliver, json!({"hookId": hook})).await;
    assert_eq!(to_hook.body["data"]["queued"].as_u64(), Some(1));
    attempts(&admin, &hook, 5).await;
    assert_error(
        &admin.post("/admin/v1/events/evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R/redeliver", json!({})).await,
        StatusCode::NOT_FOUND,
        "no event",
    );
    assert_error(
        &admin.post(&redeliver, json!({"hookId": "wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R"})).await,
        StatusCode::NOT_FOUND,
        "no webhook",
    );
    assert_error(
        &admin.post(&redeliver, json!({"hookId": 7})).await,
        StatusCode::BAD_REQUEST,
        "`hookId`",
    );
    // A disabled webhook is refused, by name.
    admin
        .call(Method::PATCH, &format!("/admin/v1/hooks/{hook}"), Some(json!({"enabled": false})))
        .await;
    assert_error(
        &admin.post(&format!("/admin/v1/hooks/{hook}/test"), json!({"event": "dm.sent"})).await,
        StatusCode::BAD_REQUEST,
        "disabled",
    );
    admin.stop().await;
}

async fn a_webhooks_health_counts_its_attempts_and_says_its_state(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/in", [Answer::status(200), Answer::status(200), Answer::status(500)]);
    let admin = Admin::delivering(db, delivery(&receiver, 0)).await;
    let ws = admin.workspace("STUDIO").await;
    let (hook, _) = admin.hook(&ws, json!({"url": receiver.url("/in"), "event": "dm.sent"})).await;
    let stats = format!("/admin/v1/hooks/{hook}/stats");
    let empty = admin.get(&stats).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    let data = &empty.body["data"];
    assert_eq!(
        (data["window"].as_str(), data["buckets"].as_array().unwrap().len()),
        (Some("24h"), 24)
    );
    assert_eq!(
        (data["attempts"].as_u64(), data["successRate"].is_null(), data["lastAttempt"].is_null()),
        (Some(0), true, true)
    );
    assert_eq!(data["state"], "healthy");

    // Two delivered, one failed (no retries): counted as they were recorded.
    for n in 1..=3 {
        admin.app.ingest(ws.parse().unwrap(), EventName::DmSent, json!({}), None).await.unwrap();
        attempts(&admin, &hook, n).await;
    }
    // The run of failures is noted just after the outcome is recorded.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let data = loop {
        let data = admin.get(&stats).await.body["data"].clone();
        if data["state"] == "failing" {
            break data;
        }
        assert!(tokio::time::Instant::now() < deadline, "never failing: {data}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (data["attempts"].as_u64(), data["succeeded"].as_u64(), data["failed"].as_u64()),
        (Some(3), Some(2), Some(1)),
        "{data}"
    );
    assert_eq!(data["successRate"].as_f64(), Some(0.667));
    let last = &data["buckets"][23];
    assert_eq!(
        (last["succeeded"].as_u64(), last["failed"].as_u64()),
        (Some(2), Some(1)),
        "this hour's bucket, the last: {data}"
    );
    assert!(
        data["buckets"].as_array().unwrap()[..23]
            .iter()
            .all(|b| b["succeeded"] == 0 && b["failed"] == 0)
    );
    assert_eq!(data["lastAttempt"]["status"].as_u64(), Some(500));
    assert_eq!(
        (data["state"].as_str(), data["failingSince"].is_string()),
        (Some("failing"), true),
        "{data}"
    );
    assert!(data["restingUntil"].is_null() && data["disabledReason"].is_null());

    let week = admin.get(&format!("{stats}?window=7d")).await.body["data"].clone();
    assert_eq!(
        (week["window"].as_str(), week["buckets"].as_array().unwrap().len()),
        (Some("7d"), 7)
    );
    assert_eq!(
        (week["buckets"][6]["succeeded"].as_u64(), week["attempts"].as_u64()),
        (Some(2), Some(3))
    );
    assert_error(
        &admin.get(&format!("{stats}?window=1h")).await,
        StatusCode::BAD_REQUEST,
        "24h or 7d",
    );
    assert_error(
        &admin.get("/admin/v1/hooks/wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R/stats").await,
        StatusCode::NOT_FOUND,
        "no webhook",
    );

    admin
        .call(Method::PATCH, &format!("/admin/v1/hooks/{hook}"), Some(json!({"enabled": false})))
        .await;
    let disabled = admin.get(&stats).await.body["data"].clone();
    assert_eq!(
        (disabled["state"].as_str(), disabled["disabledReason"].as_str()),
        (Some("disabled"), Some("manual"))
    );
    admin.stop().await;
}

async fn the_event_catalog_gives_each_events_description_schema_and_example(db: TestDb) {
    let admin = Admin::start(db).await;
    let catalog = admin.get("/admin/v1/events").await;
    assert_eq!(catalog.status, StatusCode::OK, "{}", catalog.body);
    let events = catalog.body["data"].as_array().unwrap();
    let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, EventName::ALL.map(|e| e.as_str()));
    for (entry, event) in events.iter().zip(EventName::ALL) {
        assert_eq!(entry["description"], event.description());
        assert_eq!(entry["schema"], event.payload_schema());
        assert_eq!(entry["example"]["event"], event.as_str());
        assert_eq!(entry["example"]["data"], Value::Object(event.example_data()));
        assert!(entry["example"]["id"].as_str().unwrap().starts_with("evt_"));
    }
    admin.stop().await;
}

// Slow: the upkeep looks for failing webhooks once a period (1 s here), in real time.
async fn a_webhook_failing_for_the_disable_period_is_disabled_and_enabling_clears_it(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/down", vec![Answer::status(500); 200]);
    let config =
        DeliveryConfig { disable_after: Some(Duration::from_secs(1)), ..delivery(&receiver, 100) };
    let admin = Admin::delivering(db, config).await;
    let ws = admin.workspace("STUDIO").await;
    let (hook, _) =
        admin.hook(&ws, json!({"url": receiver.url("/down"), "event": "dm.sent"})).await;
    let emitted =
        admin.post(&format!("/admin/v1/workspaces/{ws}/events"), json!({"event": "dm.sent"})).await;
    let event: hookline_domain::EventId =
        emitted.body["data"]["id"].as_str().unwrap().parse().unwrap();
    let path = format!("/admin/v1/hooks/{hook}");
    // Its run of failures starts with the first failed attempt; then the period
    // passes on the clock, and the upkeep's next round disables it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let stats = format!("{path}/stats");
    let failing = read_until(
        deadline,
        async || admin.get(&stats).await.body["data"]["failingSince"].clone(),
        |since| !since.is_null(),
    )
    .await;
    assert!(!failing.is_null(), "no failure recorded in 20 s");
    admin.db.clock().advance(Duration::from_secs(2));
    let read = read_until(
        deadline,
        async || admin.get(&path).await,
        |read| read.body["data"]["enabled"] != true,
    )
    .await;
    assert_eq!(
        (read.body["data"]["enabled"].as_bool(), read.body["data"]["disabledReason"].as_str()),
        (Some(false), Some("failing")),
        "{}",
        read.body
    );
    // Its pending delivery is cancelled by the upkeep's settle, which follows
    // the disable's own commit (in turns on both backends): wait for it.
    let state = read_until(
        deadline,
        async || admin.db.store().events().deliveries(event).await.unwrap()[0].state,
        |state| *state != hookline_domain::DeliveryState::Pending,
    )
    .await;
    assert_eq!(state, hookline_domain::DeliveryState::Cancelled, "its pending delivery stopped");
    let enabled = admin.call(Method::PATCH, &path, Some(json!({"enabled": true}))).await;
    assert_eq!(
        (
            enabled.body["data"]["enabled"].as_bool(),
            enabled.body["data"]["disabledReason"].is_null()
        ),
        (Some(true), true)
    );
    // Its run of failures starts over: enabled, nothing is left for the upkeep
    // to disable it for (it disables only a run older than the period).
    let stats = admin.get(&stats).await;
    assert!(stats.body["data"]["failingSince"].is_null(), "{}", stats.body);
    assert_eq!(admin.get(&path).await.body["data"]["enabled"], true);
    admin.stop().await;
}

async fn tokens_are_checked_before_anything_else(db: TestDb) {
    let admin = Admin::start(db).await;
    let path = "/admin/v1/workspaces";
    // No token, a malformed one, a workspace API key: 401 with WWW-Authenticate.
    let ws = admin.workspace("STUDIO").await;
    let key = admin
        .post(&format!("/admin/v1/workspaces/{ws}/keys"), json!({"name": "Zapier"}))
        .await
        .body["data"]["key"]
        .as_str()
        .unwrap()
        .to_owned();
    for token in [None, Some("nope"), Some(key.as_str())] {
        let reply = Admin::send_to(admin.admin, Method::GET, path, token, &[], String::new()).await;
        assert_error(&reply, StatusCode::UNAUTHORIZED, "admin token");
        assert_eq!(reply.headers["www-authenticate"], "Bearer");
    }
    // The admin token is refused by the public API.
    let reply = Admin::send_to(
        admin.public,
        Method::GET,
        "/api/v1/me",
        Some(&admin.token),
        &[],
        String::new(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    // A bad token is refused before its body is read: 401, not 413.
    let huge = "x".repeat(200_000);
    let reply = Admin::send_to(admin.admin, Method::POST, path, Some("nope"), &[], huge).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    // The documents: the public one to anyone, the admin one behind the token.
    let public =
        Admin::send_to(admin.public, Method::GET, "/api/v1/openapi.json", None, &[], String::new())
            .await;
    assert_eq!((public.status, public.body["openapi"].as_str()), (StatusCode::OK, Some("3.1.0")));
    assert_eq!(public.body["webhooks"].as_object().map(|w| w.len()), Some(7));
    let document = admin.get("/admin/v1/openapi.json").await;
    assert!(document.body["paths"]["/admin/v1/workspaces/{ws}/events"]["post"].is_object());
    let anonymous = Admin::send_to(
        admin.admin,
        Method::GET,
        "/admin/v1/openapi.json",
        None,
        &[],
        String::new(),
    )
    .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    // Revoked: refused from the next request on.
    let tokens = admin.app.admin_tokens().await.unwrap();
    assert_eq!(tokens.len(), 1);
    assert!(tokens[0].last_used_at.is_some());
    admin.app.revoke_admin_token(tokens[0].id).await.unwrap();
    assert_error(&admin.get(path).await, StatusCode::UNAUTHORIZED, "admin token");
    admin.stop().await;
}

async fn workspaces_are_created_read_changed_and_paged(db: TestDb) {
    let admin = Admin::start(db).await;
    let created = admin.post("/admin/v1/workspaces", json!({"name": "Acme"})).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let data = &created.body["data"];
    assert_eq!(data["plan"], "FREE");
    assert!(is_timestamp(&data["createdAt"]));
    let id = data["id"].as_str().unwrap().to_owned();
    assert_eq!(admin.get(&format!("/admin/v1/workspaces/{id}")).await.body["data"], *data);
    let patched = admin
        .call(
            Method::PATCH,
            &format!("/admin/v1/workspaces/{id}"),
            Some(json!({"name": "Acme Inc", "plan": "STUDIO"})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK);
    assert_eq!(
        (patched.body["data"]["name"].as_str(), patched.body["data"]["plan"].as_str()),
        (Some("Acme Inc"), Some("STUDIO"))
    );
    for _ in 0..4 {
        admin.workspace("FREE").await;
    }
    // Five workspaces, two at a time, oldest first, following the cursor.
    let mut seen = Vec::new();
    let mut path = "/admin/v1/workspaces?limit=2".to_owned();
    loop {
        let page = admin.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let items = page.body["data"].as_array().unwrap();
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|w| w["id"].as_str().unwrap().to_owned()));
        match page.body["nextCursor"].as_str() {
            Some(cursor) => path = format!("/admin/v1/workspaces?limit=2&after={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0], id);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
    // Bad input: a clear 400 naming the field, and nothing changes.
    assert_error(
        &admin.post("/admin/v1/workspaces", json!({"name": "A", "plan": "GOLD"})).await,
        StatusCode::BAD_REQUEST,
        "plan",
    );
    assert_error(
        &admin.post("/admin/v1/workspaces", json!({"plan": "FREE"})).await,
        StatusCode::BAD_REQUEST,
        "`name`",
    );
    assert_error(
        &admin.post("/admin/v1/workspaces", json!({"name": 5})).await,
        StatusCode::BAD_REQUEST,
        "`name` must be a string",
    );
    assert_error(
        &admin.post("/admin/v1/workspaces", json!({"name": "A", "colour": "red"})).await,
        StatusCode::BAD_REQUEST,
        "`colour`",
    );
    assert_error(
        &admin.call(Method::POST, "/admin/v1/workspaces", None).await,
        StatusCode::BAD_REQUEST,
        "JSON",
    );
    assert_error(
        &admin.get("/admin/v1/workspaces?limit=0").await,
        StatusCode::BAD_REQUEST,
        "limit",
    );
    assert_error(
        &admin.get("/admin/v1/workspaces/ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R").await,
        StatusCode::NOT_FOUND,
        "no workspace",
    );
    assert_error(
        &admin.get("/admin/v1/workspaces/undefined").await,
        StatusCode::NOT_FOUND,
        "no workspace",
    );
    assert_error(&admin.get("/admin/v1/nope").await, StatusCode::NOT_FOUND, "No such endpoint");
    let reply = admin.call(Method::DELETE, "/admin/v1/workspaces", None).await;
    assert_error(&reply, StatusCode::METHOD_NOT_ALLOWED, "allowed");
    assert_eq!(reply.headers["allow"], "GET, POST");
    assert_eq!(
        admin.get("/admin/v1/workspaces?limit=250").await.body["data"].as_array().unwrap().len(),
        5
    );
    admin.stop().await;
}

async fn accounts_and_keys_follow_the_contract(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let account = admin
        .post(&format!("/admin/v1/workspaces/{ws}/accounts"), json!({"username": "@Acme.Shop"}))
        .await;
    assert_eq!(account.status, StatusCode::CREATED);
    assert_eq!(account.body["data"]["username"], "acme.shop");
    let again = admin
        .post(&format!("/admin/v1/workspaces/{ws}/accounts"), json!({"username": "acme.shop"}))
        .await;
    assert_error(&again, StatusCode::CONFLICT, "already connected");
    let listed = admin.get(&format!("/admin/v1/workspaces/{ws}/accounts")).await;
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 1);
    let account_id = account.body["data"]["id"].as_str().unwrap();
    let gone = admin.call(Method::DELETE, &format!("/admin/v1/accounts/{account_id}"), None).await;
    assert_eq!((gone.status, gone.body.clone()), (StatusCode::OK, json!({"success": true})));
    assert!(
        admin.get(&format!("/admin/v1/workspaces/{ws}/accounts")).await.body["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Keys: shown once, listed newest first without the key, revoked at once.
    let mut keys = Vec::new();
    for n in 0..10 {
        let created = admin
            .post(&format!("/admin/v1/workspaces/{ws}/keys"), json!({"name": format!("k{n}")}))
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let data = &created.body["data"];
        assert_eq!((data["status"].as_str(), data["lastUsedAt"].is_null()), (Some("active"), true));
        keys.push((
            data["id"].as_str().unwrap().to_owned(),
            data["key"].as_str().unwrap().to_owned(),
        ));
    }
    let eleventh =
        admin.post(&format!("/admin/v1/workspaces/{ws}/keys"), json!({"name": "k10"})).await;
    assert_error(&eleventh, StatusCode::BAD_REQUEST, "10 active API keys");
    let page = admin.get(&format!("/admin/v1/workspaces/{ws}/keys?limit=3")).await;
    let first: Vec<&str> =
        page.body["data"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap()).collect();
    assert_eq!(first, [&keys[9].0, &keys[8].0, &keys[7].0]);
    assert!(page.body["data"][0].get("key").is_none());
    let cursor = page.body["nextCursor"].as_str().unwrap();
    let next = admin.get(&format!("/admin/v1/workspaces/{ws}/keys?limit=3&before={cursor}")).await;
    assert_eq!(next.body["data"][0]["id"].as_str(), Some(keys[6].0.as_str()));
    let me_with_first_key = async || {
        let key = Some(keys[0].1.as_str());
        Admin::send_to(admin.public, Method::GET, "/api/v1/me", key, &[], String::new()).await
    };
    assert_eq!(me_with_first_key().await.status, StatusCode::OK);
    let revoked = admin.call(Method::DELETE, &format!("/admin/v1/keys/{}", keys[0].0), None).await;
    assert_eq!(
        revoked.body,
        json!({"success": true, "data": {"id": keys[0].0, "status": "revoked"}})
    );
    assert_eq!(me_with_first_key().await.status, StatusCode::UNAUTHORIZED);
    // A plan change counts on the public API's next request.
    admin
        .call(
            Method::PATCH,
            &format!("/admin/v1/workspaces/{ws}"),
            Some(json!({"plan": "CREATOR"})),
        )
        .await;
    let me = Admin::send_to(
        admin.public,
        Method::GET,
        "/api/v1/me",
        Some(&keys[1].1),
        &[],
        String::new(),
    )
    .await;
    assert_eq!(me.status, StatusCode::FORBIDDEN);
    assert_error(
        &admin.call(Method::DELETE, "/admin/v1/keys/key_01JD3Z6Q8T4X2K9V7B5N1M0C3R", None).await,
        StatusCode::NOT_FOUND,
        "no API key",
    );
    admin.stop().await;
}

async fn settings_webhooks_are_made_changed_and_deleted(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let hooks = format!("/admin/v1/workspaces/{ws}/hooks");
    let created = admin
        .post(
            &hooks,
            json!({"url": "https://a.example.com/h", "events": ["dm.sent"], "description": "CRM"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let data = created.body["data"].clone();
    assert!(data["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(
        (data["source"].as_str(), data["disabledReason"].is_null(), data["enabled"].as_bool()),
        (Some("settings"), true, Some(true))
    );
    assert!(is_timestamp(&data["updatedAt"]));
    let id = data["id"].as_str().unwrap().to_owned();
    let path = format!("/admin/v1/hooks/{id}");
    let read = admin.get(&path).await;
    assert!(read.body["data"].get("secret").is_none(), "{}", read.body);
    assert_eq!(read.body["data"]["url"], "https://a.example.com/h");

    // A pending delivery, then disabling: cancelled, reason manual.
    let emitted =
        admin.app.ingest(ws.parse().unwrap(), EventName::DmSent, json!({}), None).await.unwrap();
    let hookline_delivery::Emission::Emitted(emitted) = emitted else { panic!("replayed") };
    let disabled = admin.call(Method::PATCH, &path, Some(json!({"enabled": false}))).await;
    assert_eq!(
        (
            disabled.body["data"]["enabled"].as_bool(),
            disabled.body["data"]["disabledReason"].as_str()
        ),
        (Some(false), Some("manual"))
    );
    let deliveries = admin.db.store().events().deliveries(emitted.payload.id).await.unwrap();
    assert_eq!(deliveries[0].state, hookline_domain::DeliveryState::Cancelled);
    let change = json!({
        "enabled": true,
        "url": "https://b.example.com/",
        "events": ["link.clicked", "dm.sent"],
        "description": "New",
    });
    let patched = admin.call(Method::PATCH, &path, Some(change)).await;
    let data = &patched.body["data"];
    assert_eq!((data["enabled"].as_bool(), data["disabledReason"].is_null()), (Some(true), true));
    assert_eq!(
        (data["url"].as_str(), data["description"].as_str()),
        (Some("https://b.example.com/"), Some("New"))
    );
    assert_eq!(data["events"], json!(["link.clicked", "dm.sent"]));
    // Headers: their values in the answer that set them, then hidden.
    let with_headers =
        admin.call(Method::PATCH, &path, Some(json!({"headers": {"X-Auth": "gateway-key"}}))).await;
    assert_eq!(
        with_headers.body["data"]["headers"],
        json!({"X-Auth": "gateway-key"}),
        "{}",
        with_headers.body
    );
    assert_eq!(admin.get(&path).await.body["data"]["headers"], json!({"X-Auth": "••••"}));
    let made = admin
        .post(
            &hooks,
            json!({"url": "https://c.example.com/", "event": "dm.sent", "headers": {"X-Key": "k"}}),
        )
        .await;
    assert_eq!(made.body["data"]["headers"], json!({"X-Key": "k"}), "{}", made.body);
    assert_eq!(
        admin
            .call(
                Method::DELETE,
                &format!("/admin/v1/hooks/{}", made.body["data"]["id"].as_str().unwrap()),
                None
            )
            .await
            .status,
        StatusCode::OK
    );
    // Bad input changes nothing.
    for (body, says) in [
        (json!({"headers": {"Host": "evil.example.com"}}), "`Host` is set by hookline"),
        (json!({"headers": {"X-Auth": ""}}), "the value of `X-Auth`"),
        (json!({"url": "http://b.example.com/"}), "`url`"),
        (json!({"url": "https://10.0.0.1/"}), "private"),
        (json!({"events": ["dm.read"]}), "dm.read"),
        (json!({"enabled": "yes"}), "`enabled`"),
        (json!({"secret": "x"}), "`secret`"),
    ] {
        assert_error(
            &admin.call(Method::PATCH, &path, Some(body)).await,
            StatusCode::BAD_REQUEST,
            says,
        );
    }
    assert_eq!(admin.get(&path).await.body["data"]["url"], "https://b.example.com/");
    assert_eq!(admin.get(&path).await.body["data"]["headers"], json!({"X-Auth": "••••"}));
    // Both sources are listed; the 11th webhook is refused.
    for n in 1..10 {
        let made = admin
            .post(&hooks, json!({"url": format!("https://h{n}.example.com/"), "event": "dm.sent"}))
            .await;
        assert_eq!(made.status, StatusCode::CREATED);
    }
    let eleventh =
        admin.post(&hooks, json!({"url": "https://h11.example.com/", "event": "dm.sent"})).await;
    assert_error(&eleventh, StatusCode::BAD_REQUEST, "10 webhooks");
    let page = admin.get(&format!("{hooks}?limit=4")).await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 4);
    assert_eq!(page.body["data"][0]["id"].as_str(), Some(id.as_str()));
    let deleted = admin.call(Method::DELETE, &path, None).await;
    assert_eq!((deleted.status, deleted.body.clone()), (StatusCode::OK, json!({"success": true})));
    assert_error(&admin.get(&path).await, StatusCode::NOT_FOUND, "no webhook");
    assert_error(
        &admin.call(Method::DELETE, &path, None).await,
        StatusCode::NOT_FOUND,
        "no webhook",
    );
    assert_error(
        &admin.post(&format!("{path}/test"), json!({"event": "dm.sent"})).await,
        StatusCode::NOT_FOUND,
        "no webhook",
    );
    admin.stop().await;
}

async fn the_attempt_log_is_paged_newest_first(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let ws_id = ws.parse().unwrap();
    let (hook, _) = admin
        .db
        .webhook(
            ws_id,
            "https://a.example.com/",
            &[EventName::DmSent],
            hookline_domain::WebhookSource::Settings,
        )
        .await
        .unwrap();
    for n in 0..3u32 {
        let emission = admin.app.ingest(ws_id, EventName::DmSent, json!({}), None).await.unwrap();
        let hookline_delivery::Emission::Emitted(emitted) = emission else { panic!("replayed") };
        let attempt = DeliveryAttempt {
            event_id: emitted.payload.id,
            webhook_id: hook.id,
            event: EventName::DmSent,
            attempt: 1,
            at: Timestamp::now().plus_millis(i64::from(n)),
            status: Some(500),
            error: None,
            duration_ms: 12,
            response_body: Some(format!("oops {n}")),
        };
        admin.db.record_attempt(&attempt, Outcome::GaveUp).await;
    }
    let path = format!("/admin/v1/hooks/{}/attempts", hook.id);
    let page = admin.get(&format!("{path}?limit=2")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let items = page.body["data"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["responseBody"], "oops 2");
    assert_eq!(
        (items[0]["status"].as_u64(), items[0]["durationMs"].as_u64()),
        (Some(500), Some(12))
    );
    let cursor = page.body["nextCursor"].as_str().unwrap().replace(':', "%3A");
    let rest = admin.get(&format!("{path}?limit=2&before={cursor}")).await;
    assert_eq!(rest.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(rest.body["data"][0]["responseBody"], "oops 0");
    assert!(rest.body["nextCursor"].is_null());
    assert_error(
        &admin.get(&format!("{path}?before=nonsense")).await,
        StatusCode::BAD_REQUEST,
        "before",
    );
    admin.stop().await;
}

async fn ingest_emits_once_per_idempotency_key_even_under_concurrency(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let path = format!("/admin/v1/workspaces/{ws}/events");
    let plain = admin.post(&path, json!({"event": "link.clicked", "data": {"linkId": "l1"}})).await;
    assert_eq!(plain.status, StatusCode::ACCEPTED, "{}", plain.body);
    assert_eq!(plain.body["data"]["event"], "link.clicked");
    assert_eq!(plain.body["data"]["data"], json!({"linkId": "l1"}));
    // `null` is absent, as everywhere in the APIs' bodies: no data.
    let null = admin.post(&path, json!({"event": "dm.failed", "data": null})).await;
    assert_eq!((null.status, &null.body["data"]["data"]), (StatusCode::ACCEPTED, &json!({})));
    // Twenty concurrent duplicates: one event, every answer its payload.
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let (addr, token, path) = (admin.admin, admin.token.clone(), path.clone());
            tokio::spawn(async move {
                let body = json!({"event": "dm.sent", "data": {"messageId": "m1"}}).to_string();
                Admin::send_to(
                    addr,
                    Method::POST,
                    &path,
                    Some(&token),
                    &[("idempotency-key", "order-42")],
                    body,
                )
                .await
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
        ids.insert(reply.body["data"]["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let samples = admin.app.samples(ws.parse().unwrap(), EventName::DmSent).await.unwrap();
    assert_eq!(samples.len(), 1);
    assert!(samples[0].contains(ids.first().unwrap().as_str()));
    // The same key in another workspace is another event.
    let other = admin.workspace("STUDIO").await;
    let reply = Admin::send_to(
        admin.admin,
        Method::POST,
        &format!("/admin/v1/workspaces/{other}/events"),
        Some(&admin.token),
        &[("idempotency-key", "order-42")],
        json!({"event": "dm.sent"}).to_string(),
    )
    .await;
    assert_ne!(reply.body["data"]["id"].as_str(), ids.first().map(String::as_str));
    // Bad input: 400 naming the field, nothing stored.
    for (body, says) in [
        (json!({"data": {}}), "`event`"),
        (json!({"event": "dm.read"}), "dm.read"),
        (json!({"event": "dm.sent", "data": []}), "data"),
        (json!({"event": "contact.email_captured", "data": {"contact": {}}}), "contact"),
        (json!({"event": "dm.sent", "extra": 1}), "`extra`"),
    ] {
        assert_error(&admin.post(&path, body).await, StatusCode::BAD_REQUEST, says);
    }
    assert_error(
        &admin
            .post(
                "/admin/v1/workspaces/ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R/events",
                json!({"event": "dm.sent"}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "no workspace",
    );
    let too_big = json!({"event": "dm.sent", "data": {"x": "y".repeat(70_000)}}).to_string();
    let reply =
        Admin::send_to(admin.admin, Method::POST, &path, Some(&admin.token), &[], too_big).await;
    assert_error(&reply, StatusCode::PAYLOAD_TOO_LARGE, "larger than");
    assert_eq!(admin.app.samples(ws.parse().unwrap(), EventName::DmSent).await.unwrap().len(), 1);
    admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_key_answers_the_first_payload_byte_for_byte() {
    let admin = Admin::start(TestDb::new(hookline_testdb::Backend::Sqlite).await).await;
    let ws = admin.workspace("STUDIO").await;
    let path = format!("/admin/v1/workspaces/{ws}/events");
    let send = |data: Value| {
        let body = json!({"event": "dm.sent", "data": data}).to_string();
        Admin::send_to(
            admin.admin,
            Method::POST,
            &path,
            Some(&admin.token),
            &[("idempotency-key", "k")],
            body,
        )
    };
    let first = send(json!({"n": 1})).await;
    let second = send(json!({"n": 2})).await;
    assert_eq!(first.body, second.body);
    assert_eq!(second.body["data"]["data"], json!({"n": 1}));
    admin.stop().await;
}
