//! The store's behaviour, each test once per backend on a fresh database.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use hookline_domain::limits::{MAX_ACTIVE_API_KEYS, MAX_WEBHOOKS};
use hookline_domain::{
    AccountId, ApiKeyId, ApiKeyRecord, ApiKeyStatus, AttemptCursor, ClaimedDelivery,
    DeliveryAttempt, DeliveryState, DisabledReason, EventName, EventPayload, Finished, HistoryDay,
    KeyHash, KeyName, Outcome, Plan, Refusal, Timestamp, Username, Webhook, WebhookId,
    WebhookSource, WorkspaceId, WorkspaceName,
};
use hookline_store::{
    ClaimRequest, Error, KeyRequest, NewEvent, Reclaimed, Recorded, Store, StoreConfig, UsedKey,
    WorkspaceRead, WorkspaceReading,
};
use hookline_testdb::TestDb;
use hookline_testdb::{Backend, backend_tests};
use serde_json::json;

fn key_hash(seed: u8) -> KeyHash {
    KeyHash::from_digest([seed; 32])
}

/// Key checks of these hashes that read nothing with the check.
fn checks(hashes: &[KeyHash]) -> Vec<KeyRequest> {
    hashes
        .iter()
        .map(|hash| KeyRequest { hash: hash.clone(), read: WorkspaceRead::Nothing })
        .collect()
}

/// A new API key of `ws` named `name`, its hash made of `seed`.
async fn api_key(store: &Store, ws: WorkspaceId, name: &str, seed: u8) -> ApiKeyRecord {
    store.api_keys().create(ws, &KeyName::parse(name).unwrap(), &key_hash(seed)).await.unwrap()
}

/// Of racing creations, how many succeeded; each other one must be the limit's refusal.
async fn created_under_a_limit<T>(
    tasks: Vec<tokio::task::JoinHandle<Result<T, Error>>>,
    is_the_limit: fn(&Refusal) -> bool,
) -> usize {
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => created += 1,
            Err(Error::Refused(refusal)) if is_the_limit(&refusal) => {}
            Err(other) => panic!("unexpected failure: {other}"),
        }
    }
    created
}

async fn webhook(
    store: &Store,
    ws: WorkspaceId,
    url: &str,
    events: &[EventName],
) -> Result<Webhook, Error> {
    hookline_testdb::create_webhook(store, ws, url, events, WebhookSource::Api)
        .await
        .map(|(hook, _)| hook)
}

/// The outbox write of an event without an idempotency key: the webhooks it reaches.
async fn record(store: &Store, payload: &EventPayload) -> hookline_store::Result<Vec<WebhookId>> {
    let new = NewEvent { payload: payload.clone(), idempotency_key: None };
    match store.events().record(new).await? {
        Recorded::Stored(webhooks) => Ok(webhooks),
        Recorded::Replayed(_) => panic!("an event without a key was replayed"),
    }
}

async fn emit(store: &Store, ws: WorkspaceId, event: EventName) -> (EventPayload, Vec<WebhookId>) {
    let payload = EventPayload::new(event, ws, json!({"n": 1})).unwrap();
    let reached = record(store, &payload).await.unwrap();
    (payload, reached)
}

/// Records `event` as made at `at` (its id and time), as history written long
/// ago would be.
async fn emit_at(store: &Store, ws: WorkspaceId, event: EventName, at: Timestamp) -> EventPayload {
    let mut payload = EventPayload::new(event, ws, json!({"n": 1})).unwrap();
    let ulid = ulid::Ulid::from_parts(u64::try_from(at.unix_millis()).unwrap(), rand_bits());
    payload.id = hookline_domain::EventId::from_ulid(ulid);
    payload.occurred_at = at;
    record(store, &payload).await.unwrap();
    payload
}

/// A ULID's random part, from a fresh ULID.
fn rand_bits() -> u128 {
    hookline_domain::EventId::generate().ulid().random()
}

const DAY_MS: i64 = 86_400_000;

/// Makes the day partitions of the `days` before `now` and of today (each call
/// makes a day's and those just after it), as a database kept that long holds.
async fn partitions_for_days(store: &Store, now: Timestamp, days: i64) {
    for days_back in (0..=days).rev().step_by(2) {
        store.upkeep().prepare_partitions(now.plus_millis(-days_back * DAY_MS)).await.unwrap();
    }
}

/// The next attempt of `claimed`, which `webhook`'s receiver answered with 200
/// at `at`.
fn delivered(claimed: &ClaimedDelivery, webhook: WebhookId, at: Timestamp) -> Finished {
    let attempt = DeliveryAttempt {
        event_id: claimed.event_id,
        webhook_id: webhook,
        event: claimed.event,
        attempt: claimed.attempts + 1,
        at,
        status: Some(200),
        error: None,
        duration_ms: 1,
        response_body: None,
    };
    Finished { claimed: claimed.clone(), attempt, outcome: Outcome::Delivered }
}

/// Records a delivered attempt of `claimed`.
async fn deliver(store: &Store, claimed: &ClaimedDelivery, webhook: WebhookId, at: Timestamp) {
    let finished = [delivered(claimed, webhook, at)];
    assert_eq!(
        store.queue().finish(&finished).await.unwrap(),
        [hookline_store::Recording::Recorded]
    );
}

/// The number after `key` (say `rows=`) in a plan line, if it has one.
fn plan_number(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// `(rows, loops)` of every step of an `EXPLAIN ANALYZE` plan that reads a
/// table or its index. A `Materialize` is left out: each of its loops reads
/// again, in memory, the rows its step below read once (a nested loop over the
/// claimed rows may be planned that way, say when they span two days).
fn rows_read(plan: &[String]) -> Vec<(u64, u64)> {
    plan.iter()
        .filter(|line| !line.contains("Materialize"))
        .filter_map(|line| Some((plan_number(line, "rows=")?, plan_number(line, "loops=")?)))
        .collect()
}

/// `N` of a plan line's `Rows Removed by Filter: N`.
fn rows_removed(line: &str) -> u64 {
    line.rsplit(": ").next().and_then(|n| n.trim().parse().ok()).unwrap_or(u64::MAX)
}

/// Claims up to 10 due deliveries, with no per-webhook limit and nothing skipped.
async fn claim(
    store: &Store,
    now: Timestamp,
    lease_until: Timestamp,
    token: &str,
) -> Vec<ClaimedDelivery> {
    let request = ClaimRequest {
        now,
        lease_until,
        limit: 10,
        per_webhook: 10,
        skip: &[],
        fast: &[],
        lease_token: token,
    };
    store.queue().claim(&request).await.unwrap()
}

/// A claim now, for a minute, of up to `limit` deliveries, 10 of each webhook,
/// skipping `skip`.
fn claim_now(limit: u32, skip: &[WebhookId]) -> ClaimRequest<'_> {
    ClaimRequest {
        now: Timestamp::now(),
        lease_until: Timestamp::now().plus_millis(60_000),
        limit,
        per_webhook: 10,
        skip,
        fast: &[],
        lease_token: "t",
    }
}

/// A claim answers each delivery with its event, looked up once for all of its
/// deliveries the claim takes (PostgreSQL: the loops of the lookups by id).
async fn a_claim_looks_each_event_up_once_however_many_of_its_deliveries_it_takes(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    for n in 0..5 {
        db.api_webhook(ws, &format!("https://{n}.example.com/"), &[EventName::DmSent]).await;
    }
    for _ in 0..2 {
        emit(store, ws, EventName::DmSent).await;
    }
    let request = claim_now(100, &[]);
    if db.backend() == Backend::Postgres {
        let plan = store.queue().explain_claim(&request).await.unwrap();
        let looked_up: u64 = plan
            .iter()
            .filter(|line| line.contains(" on events_p") && line.contains("_pkey"))
            .filter_map(|line| plan_number(line, "loops="))
            .sum();
        assert_eq!(looked_up, 2, "{}", plan.join("\n"));
        let leased = plan.iter().find(|line| line.contains("Update on deliveries d"));
        assert_eq!(leased.and_then(|line| plan_number(line, "rows=")), Some(10));
    } else {
        let claimed = store.queue().claim(&request).await.unwrap();
        assert_eq!(claimed.len(), 10);
        assert!(claimed.iter().all(|c| c.event == EventName::DmSent), "{claimed:?}");
    }
}

/// Asserts that no step of the claim's plan reads more than `most` rows in all.
async fn assert_claim_reads_at_most(
    store: &Store,
    request: &ClaimRequest<'_>,
    most: u64,
) -> Vec<String> {
    let plan = store.queue().explain_claim(request).await.unwrap();
    let read = rows_read(&plan);
    assert!(read.iter().all(|&(rows, loops)| rows * loops <= most), "{}", plan.join("\n"));
    plan
}

backend_tests!(
    claims_take_a_few_of_each_webhook_and_skip_what_they_are_told,
    a_fast_webhook_takes_its_even_part_of_a_claim,
    a_claim_looks_each_event_up_once_however_many_of_its_deliveries_it_takes,
    an_attempt_ending_after_its_webhook_was_disabled_leaves_the_delivery_stopped,
    workspaces_are_created_read_and_moved_between_plans,
    accounts_connect_disconnect_and_reconnect_with_the_same_id,
    api_keys_are_kept_by_hash_and_revoked_once,
    at_most_ten_active_keys_and_revoking_frees_a_place,
    key_limit_holds_under_concurrent_creation,
    webhooks_are_listed_oldest_first_without_their_secret,
    at_most_ten_webhooks_enabled_or_not,
    webhook_limit_holds_under_concurrent_creation,
    delete_is_scoped_to_the_workspace_and_takes_deliveries_along,
    a_disabled_or_deleted_webhooks_backlog_goes_in_short_write_turns,
    a_cancel_turn_reads_only_the_rows_it_cancels,
    a_disable_with_a_long_history_and_few_pending_settles_before_it_answers,
    an_event_fans_out_to_subscribed_enabled_webhooks_of_its_workspace,
    payloads_are_stored_byte_for_byte,
    an_event_for_an_unknown_workspace_writes_nothing,
    the_outbox_write_wakes_the_listening_workers,
    an_emit_beside_a_disable_under_way_waits_and_delivers_nothing_to_it,
    a_delete_beside_a_record_under_way_waits_for_it,
    disabling_cancels_pending_deliveries_and_enabling_does_not_revive_them,
    a_disabled_webhook_is_sent_nothing_again,
    attempts_are_logged_newest_first,
    concurrent_emits_share_transactions_and_fail_alone,
    migrating_again_applies_nothing,
    keys_are_found_by_hash_with_their_workspace,
    last_use_is_kept_to_the_minute,
    rate_windows_count_per_key_and_restart_after_they_end,
    a_batch_of_key_uses_finds_touches_and_counts_by_the_rules,
    a_key_check_reads_the_workspace_of_each_counted_request,
    concurrent_counts_are_exact,
    commits_without_the_flush_leave_their_session_as_it_was,
    samples_are_the_last_three_payloads_newest_first,
    unstarted_claims_are_handed_back_one_by_one,
    a_full_queue_never_analyzed_gets_statistics_once,
    a_queue_analyzed_empty_gets_statistics_again_once_it_fills,
    retention_forgets_whole_days_keeps_the_samples_and_anything_pending,
    the_backlog_counts_due_deliveries_up_to_a_cap_and_finds_the_oldest,
    a_claim_beside_a_resting_backlog_reads_only_the_rows_it_takes,
    claims_read_only_the_days_from_the_oldest_with_a_pending_delivery_on,
    a_claim_walks_none_of_a_drained_backlog,
    a_claim_walks_none_of_what_its_handle_took_before,
    a_record_finds_each_delivery_by_its_key_beside_a_backlog,
    a_claim_finds_what_fell_due_behind_where_the_last_left_off,
    a_claim_looks_behind_the_positions_only_now_and_then,
    the_look_for_samples_probes_each_pair_beside_a_day_of_one_busy_workspace,
    the_attempt_log_pages_through_attempts_of_one_millisecond_each_once,
    the_attempt_log_pages_keep_one_plan_each,
    a_record_is_planned_for_its_events_days_only,
    a_claim_is_planned_once_per_connection,
    a_record_kept_while_its_day_is_small_looks_deliveries_up_by_key,
    forgetting_goes_in_turns_of_a_bounded_number_of_events,
    an_idempotency_key_stores_one_event_across_stores_and_batches,
    portal_links_are_found_by_hash_until_the_upkeep_removes_the_expired,
    a_workspace_update_sets_what_it_is_given_at_once
);

async fn claims_take_a_few_of_each_webhook_and_skip_what_they_are_told(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let mut hooks = Vec::new();
    for host in ["a", "b", "c"] {
        let url = format!("https://{host}.example.com/");
        hooks.push(db.api_webhook(ws, &url, &[EventName::DmSent]).await.0.id);
    }
    // Six events: each reaches all three webhooks; the first webhook's six
    // deliveries are as old as anyone's.
    for _ in 0..6 {
        emit(store, ws, EventName::DmSent).await;
    }
    let now = Timestamp::now().plus_millis(1);
    let lease_until = now.plus_millis(60_000);
    let request = ClaimRequest {
        now,
        lease_until,
        limit: 100,
        per_webhook: 2,
        skip: &hooks[..1],
        fast: &[],
        lease_token: "t",
    };
    let claimed = store.queue().claim(&request).await.unwrap();
    let count = |hook: WebhookId| claimed.iter().filter(|c| c.webhook_id == hook).count();
    assert_eq!((count(hooks[0]), count(hooks[1]), count(hooks[2])), (0, 2, 2));
    // A limit smaller than the webhooks' shares takes each one's oldest first.
    let request = ClaimRequest { limit: 3, per_webhook: 4, skip: &[], ..request };
    let claimed = store.queue().claim(&request).await.unwrap();
    assert_eq!(claimed.len(), 3);
    // A webhook known to be fast is not limited to its share.
    let fast = [hooks[2]];
    let request = ClaimRequest { limit: 100, per_webhook: 1, fast: &fast, ..request };
    let claimed = store.queue().claim(&request).await.unwrap();
    let count = |hook: WebhookId| claimed.iter().filter(|c| c.webhook_id == hook).count();
    assert_eq!(
        (count(hooks[0]), count(hooks[1]), count(hooks[2])),
        (1, 1, 3),
        "all the fast one has left"
    );
    let request = ClaimRequest { limit: 100, per_webhook: 100, fast: &[], ..request };
    assert_eq!(store.queue().claim(&request).await.unwrap().len(), 18 - 4 - 3 - 5);
}

async fn a_fast_webhook_takes_its_even_part_of_a_claim(db: TestDb) {
    let store = db.store();
    let queue = store.queue();
    let ws = db.workspace(Plan::Studio).await;
    let (short, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::LinkClicked]).await;
    let (long, _) = db.api_webhook(ws, "https://b.example.com/", &[EventName::DmSent]).await;
    let (busy, _) = db.api_webhook(ws, "https://c.example.com/", &[EventName::BioSubscribed]).await;
    // The third fast webhook's one pending row is leased by another worker:
    // pending, but not due, so it is not among those the claim is divided among.
    emit(store, ws, EventName::BioSubscribed).await;
    let now = Timestamp::now().plus_millis(1);
    assert_eq!(claim(store, now, now.plus_millis(60_000), "other").await.len(), 1);
    emit(store, ws, EventName::LinkClicked).await;
    for _ in 0..6 {
        emit(store, ws, EventName::DmSent).await;
    }
    let now = Timestamp::now().plus_millis(1);
    let fast = [short.id, long.id, busy.id];
    let request = ClaimRequest {
        now,
        lease_until: now.plus_millis(60_000),
        limit: 6,
        per_webhook: 1,
        skip: &[],
        fast: &fast,
        lease_token: "t",
    };
    let taken = |claimed: &[ClaimedDelivery]| {
        let of = |hook: WebhookId| claimed.iter().filter(|c| c.webhook_id == hook).count();
        (of(short.id), of(long.id), of(busy.id))
    };
    // Two fast webhooks with rows due: each may take half the claim, however
    // long its backlog (a claim reads no more than it may take), and the one
    // that took all of its half may have more.
    let claimed = queue.claim(&request).await.unwrap();
    assert_eq!(taken(&claimed), (1, 3, 0));
    assert!(queue.took_all_of_a_webhook(&request, &claimed));
    let claimed = queue.claim(&request).await.unwrap();
    assert_eq!(taken(&claimed), (0, 3, 0), "the rest, in the claim that follows");
    // SQLite knows the claim was all the one fast webhook's; PostgreSQL takes
    // the part at its least (a third: another worker may have held the rest
    // locked), so it claims once more, and finds nothing.
    assert_eq!(queue.took_all_of_a_webhook(&request, &claimed), db.backend() == Backend::Postgres);
    assert!(queue.claim(&request).await.unwrap().is_empty());
    // Not fast, a webhook that took its cap may have more.
    let slow = ClaimRequest { fast: &[], ..request };
    let one = &claimed[..1];
    assert!(queue.took_all_of_a_webhook(&slow, one));
    assert!(!queue.took_all_of_a_webhook(&slow, &[]));
}

async fn an_attempt_ending_after_its_webhook_was_disabled_leaves_the_delivery_stopped(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let event = emit(store, ws, EventName::DmSent).await.0;
    let now = Timestamp::now().plus_millis(1);
    let claimed = claim(store, now, now.plus_millis(60_000), "t").await;
    assert_eq!(claimed.len(), 1);
    // Disabled while the attempt is in flight: its pending delivery stops.
    store.webhooks().set_enabled(hook.id, false).await.unwrap();
    let attempt = DeliveryAttempt {
        event_id: claimed[0].event_id,
        webhook_id: hook.id,
        event: claimed[0].event,
        attempt: 1,
        at: now,
        status: Some(500),
        error: None,
        duration_ms: 1,
        response_body: None,
    };
    let finished = [Finished {
        claimed: claimed[0].clone(),
        attempt,
        outcome: Outcome::RetryAt(now.plus_millis(1_000)),
    }];
    assert_eq!(
        store.queue().finish(&finished).await.unwrap(),
        [hookline_store::Recording::Stopped]
    );
    let deliveries = store.events().deliveries(event.id).await.unwrap();
    assert_eq!(deliveries[0].state, DeliveryState::Cancelled, "the retry did not bring it back");
}

async fn workspaces_are_created_read_and_moved_between_plans(db: TestDb) {
    let store = db.store();
    let name = WorkspaceName::parse("  Studio Maria ").unwrap();
    let created = store.workspaces().create(&name, Plan::Free).await.unwrap();
    assert_eq!(created.name.as_str(), "Studio Maria");
    assert_eq!(store.workspaces().get(created.id).await.unwrap(), Some(created.clone()));

    let moved = store.workspaces().set_plan(created.id, Plan::Studio).await.unwrap().unwrap();
    assert_eq!(moved.plan, Plan::Studio);
    assert_eq!(store.workspaces().get(created.id).await.unwrap().unwrap().plan, Plan::Studio);

    let unknown = WorkspaceId::generate();
    assert_eq!(store.workspaces().get(unknown).await.unwrap(), None);
    assert_eq!(store.workspaces().set_plan(unknown, Plan::Studio).await.unwrap(), None);
}

async fn accounts_connect_disconnect_and_reconnect_with_the_same_id(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let maria = Username::parse("@Maria").unwrap();
    let account = store.accounts().connect(ws, &maria).await.unwrap();
    assert_eq!(account.username.as_str(), "maria");
    let shop = store.accounts().connect(ws, &Username::parse("shop").unwrap()).await.unwrap();
    assert_eq!(store.accounts().connected(ws).await.unwrap(), [account.clone(), shop.clone()]);

    let again = store.accounts().connect(ws, &maria).await.unwrap_err();
    assert!(matches!(again, Error::Refused(Refusal::AlreadyConnected { .. })), "{again}");

    let gone = store.accounts().disconnect(account.id).await.unwrap().unwrap();
    assert_eq!(gone.id, account.id);
    assert_eq!(store.accounts().connected(ws).await.unwrap(), std::slice::from_ref(&shop));
    // Disconnecting twice is harmless.
    assert!(store.accounts().disconnect(account.id).await.unwrap().is_some());

    let back = store.accounts().connect(ws, &maria).await.unwrap();
    assert_eq!(back.id, account.id);
    assert_eq!(store.accounts().connected(ws).await.unwrap().len(), 2);

    // Another workspace may connect the same handle: it is its own account.
    let other = db.workspace(Plan::Free).await;
    let theirs = store.accounts().connect(other, &maria).await.unwrap();
    assert_ne!(theirs.id, account.id);

    assert_eq!(store.accounts().disconnect(AccountId::generate()).await.unwrap(), None);
    let err = store.accounts().connect(WorkspaceId::generate(), &maria).await.unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::NotFound { kind: "workspace", .. })), "{err}");
}

async fn api_keys_are_kept_by_hash_and_revoked_once(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let name = KeyName::parse("Zapier").unwrap();
    let key = store.api_keys().create(ws, &name, &key_hash(1)).await.unwrap();
    assert_eq!(key.status(), ApiKeyStatus::Active);
    assert_eq!(key.last_used_at, None);
    assert_eq!(store.api_keys().list(ws).await.unwrap(), std::slice::from_ref(&key));

    let revoked = store.api_keys().revoke(key.id).await.unwrap().unwrap();
    assert_eq!(revoked.status(), ApiKeyStatus::Revoked);
    let first_revocation = revoked.revoked_at;
    let again = store.api_keys().revoke(key.id).await.unwrap().unwrap();
    assert_eq!(again.revoked_at, first_revocation);
    assert_eq!(store.api_keys().revoke(ApiKeyId::generate()).await.unwrap(), None);

    // The same key (hash) cannot be recorded twice.
    assert!(store.api_keys().create(ws, &name, &key_hash(1)).await.is_err());
    let err =
        store.api_keys().create(WorkspaceId::generate(), &name, &key_hash(2)).await.unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::NotFound { kind: "workspace", .. })), "{err}");
}

async fn at_most_ten_active_keys_and_revoking_frees_a_place(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let name = KeyName::parse("k").unwrap();
    let mut keys = Vec::new();
    for seed in 0..MAX_ACTIVE_API_KEYS as u8 {
        keys.push(store.api_keys().create(ws, &name, &key_hash(seed)).await.unwrap());
    }
    let err = store.api_keys().create(ws, &name, &key_hash(100)).await.unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::TooManyApiKeys { limit: 10, .. })), "{err}");
    assert!(err.to_string().contains("revoke one"), "{err}");
    assert_eq!(store.api_keys().list(ws).await.unwrap().len(), 10);

    store.api_keys().revoke(keys[3].id).await.unwrap();
    store.api_keys().create(ws, &name, &key_hash(101)).await.unwrap();
    assert_eq!(store.api_keys().list(ws).await.unwrap().len(), 11);
    // Another workspace has its own ten.
    let other = db.workspace(Plan::Studio).await;
    store.api_keys().create(other, &name, &key_hash(102)).await.unwrap();
}

async fn key_limit_holds_under_concurrent_creation(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let tasks: Vec<_> = (0..30u8)
        .map(|seed| {
            let store = store.clone();
            tokio::spawn(async move {
                let name = KeyName::parse("racer").unwrap();
                store.api_keys().create(ws, &name, &key_hash(seed)).await
            })
        })
        .collect();
    let created =
        created_under_a_limit(tasks, |refusal| matches!(refusal, Refusal::TooManyApiKeys { .. }))
            .await;
    assert_eq!(created, MAX_ACTIVE_API_KEYS);
    assert_eq!(store.api_keys().list(ws).await.unwrap().len(), MAX_ACTIVE_API_KEYS);
}

async fn webhooks_are_listed_oldest_first_without_their_secret(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (first, first_secret) = hookline_testdb::create_webhook(
        store,
        ws,
        "https://a.example.com/1",
        &[EventName::DmSent],
        WebhookSource::Api,
    )
    .await
    .unwrap();
    let second =
        webhook(store, ws, "https://b.example.com/2", &[EventName::LinkClicked, EventName::DmSent])
            .await
            .unwrap();
    assert!(first.enabled);
    assert_eq!(first.source, WebhookSource::Api);
    assert_eq!(second.events, [EventName::LinkClicked, EventName::DmSent]);
    assert_eq!(store.webhooks().list(ws).await.unwrap(), [first.clone(), second.clone()]);
    assert_eq!(store.webhooks().get(second.id).await.unwrap(), Some(second.clone()));
    let secret = store.webhooks().secret(first.id).await.unwrap().unwrap();
    assert_eq!(secret, first_secret);

    let other = db.workspace(Plan::Studio).await;
    assert!(store.webhooks().list(other).await.unwrap().is_empty());
    // Read at once, most often in one batch of the two workspaces (a list, where
    // one workspace alone is one value): each gets its own.
    let webhooks = store.webhooks();
    let (mine, theirs) = tokio::join!(webhooks.list(ws), webhooks.list(other));
    assert_eq!(mine.unwrap(), [first.clone(), second.clone()]);
    assert!(theirs.unwrap().is_empty());
    assert_eq!(store.webhooks().get(WebhookId::generate()).await.unwrap(), None);
    assert_eq!(store.webhooks().secret(WebhookId::generate()).await.unwrap(), None);
    let err =
        webhook(store, WorkspaceId::generate(), "https://x.example.com", &[EventName::DmSent])
            .await
            .unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::NotFound { kind: "workspace", .. })), "{err}");
}

async fn at_most_ten_webhooks_enabled_or_not(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    for i in 0..MAX_WEBHOOKS {
        let hook = webhook(store, ws, &format!("https://h{i}.example.com/"), &[EventName::DmSent])
            .await
            .unwrap();
        if i % 2 == 0 {
            store.webhooks().set_enabled(hook.id, false).await.unwrap();
        }
    }
    let err =
        webhook(store, ws, "https://eleven.example.com/", &[EventName::DmSent]).await.unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::TooManyWebhooks { limit: 10, .. })), "{err}");
    assert_eq!(store.webhooks().list(ws).await.unwrap().len(), MAX_WEBHOOKS);

    let first = store.webhooks().list(ws).await.unwrap()[0].id;
    assert!(store.webhooks().delete(first, None).await.unwrap());
    webhook(store, ws, "https://eleven.example.com/", &[EventName::DmSent]).await.unwrap();
}

async fn webhook_limit_holds_under_concurrent_creation(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                webhook(&store, ws, &format!("https://r{i}.example.com/"), &[EventName::DmSent])
                    .await
            })
        })
        .collect();
    let created =
        created_under_a_limit(tasks, |refusal| matches!(refusal, Refusal::TooManyWebhooks { .. }))
            .await;
    assert_eq!(created, MAX_WEBHOOKS);
    assert_eq!(store.webhooks().list(ws).await.unwrap().len(), MAX_WEBHOOKS);
}

async fn delete_is_scoped_to_the_workspace_and_takes_deliveries_along(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let other = db.workspace(Plan::Studio).await;
    let hook = webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (payload, reached) = emit(store, ws, EventName::DmSent).await;
    assert_eq!(reached, [hook.id]);

    assert!(!store.webhooks().delete(hook.id, Some(other)).await.unwrap());
    assert!(store.webhooks().get(hook.id).await.unwrap().is_some());
    assert!(store.webhooks().delete(hook.id, Some(ws)).await.unwrap());
    // Gone from every read and change, and with a few deliveries, its rows
    // too before the delete answers.
    assert!(!store.webhooks().delete(hook.id, Some(ws)).await.unwrap());
    assert_eq!(store.webhooks().get(hook.id).await.unwrap(), None);
    assert_eq!(store.webhooks().list(ws).await.unwrap(), []);
    assert_eq!(store.webhooks().secret(hook.id).await.unwrap(), None);
    assert_eq!(store.webhooks().set_enabled(hook.id, true).await.unwrap(), None);
    assert_eq!(store.upkeep().settle_disabled().await.unwrap(), Default::default());
    assert!(store.events().deliveries(payload.id).await.unwrap().is_empty());
    assert_eq!(db.rows_of_webhook(hook.id).await, 0);
    // The event itself stays: samples are made of it.
    assert!(store.events().payload(payload.id).await.unwrap().is_some());
}

/// Disabling or deleting a webhook with a backlog changes its deliveries a
/// bounded number at a time (each write turn short, others write between),
/// whoever does it: the change by hand, or the upkeep settling what a disable
/// cut short left.
async fn a_disabled_or_deleted_webhooks_backlog_goes_in_short_write_turns(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let dm = [EventName::DmSent];
    let hours_ago = |hours: i64| Timestamp::now().plus_millis(-3_600_000 * hours);
    // Each backlog's events an hour apart from the others'.
    let backlog = |webhook, hours| {
        hookline_testdb::History::pending(ws, vec![webhook], 5_000, hours_ago(hours), hours_ago(1))
    };
    let pending = async || store.events().backlog(Timestamp::now(), 100_000).await.unwrap().0;

    // Disabled by hand: every pending delivery cancelled.
    let (disabled, _) = db.api_webhook(ws, "https://off.example.com/", &dm).await;
    db.write_history(&backlog(disabled.id, 4)).await;
    assert_eq!(pending().await, 5_000);
    store.webhooks().set_enabled(disabled.id, false).await.unwrap();
    // A backlog is settled after the change answers, in the background; the
    // upkeep's settle waits for that one (or does it, if it comes first).
    store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(pending().await, 0);

    // A disable cut short (its rows written after it, as a crash would leave
    // them): the upkeep cancels them, at most 2,000 a write turn.
    db.write_history(&backlog(disabled.id, 3)).await;
    let settled = store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(settled.deliveries, 5_000);
    assert_eq!(settled.webhooks_deleted, 0);
    assert!(settled.turns >= 3, "{settled:?}");
    assert!(settled.largest_turn <= 2_000, "{settled:?}");
    assert_eq!(pending().await, 0);
    assert_eq!(store.upkeep().settle_disabled().await.unwrap(), Default::default(), "settled");
    // Enabled again: nothing of it is cancelled any more.
    store.webhooks().set_enabled(disabled.id, true).await.unwrap();
    db.write_history(&backlog(disabled.id, 2)).await;
    assert_eq!(store.upkeep().settle_disabled().await.unwrap(), Default::default());
    assert_eq!(pending().await, 5_000);

    // Deleted: the webhook and every delivery of it.
    assert!(store.webhooks().delete(disabled.id, Some(ws)).await.unwrap());
    assert_eq!(store.webhooks().get(disabled.id).await.unwrap(), None);
    store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(db.rows_of_webhook(disabled.id).await, 0);
    assert_eq!(pending().await, 0);

    // A delete cut short by a crash (its mark made, none of its rows gone):
    // the upkeep deletes them in turns as bounded, then the webhook.
    let (deleted, _) = db.api_webhook(ws, "https://deleted.example.com/", &dm).await;
    db.write_history(&backlog(deleted.id, 7)).await;
    db.mark_deleted(deleted.id).await;
    assert_eq!(store.webhooks().get(deleted.id).await.unwrap(), None);
    let settled = store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(settled.deliveries, 5_000, "{settled:?}");
    assert_eq!(settled.webhooks_deleted, 1, "{settled:?}");
    assert!(settled.turns >= 3, "{settled:?}");
    assert!(settled.largest_turn <= 2_000, "{settled:?}");
    assert_eq!(db.rows_of_webhook(deleted.id).await, 0);
    assert_eq!(pending().await, 0);

    // A 410's record cut short by a crash: the upkeep deletes the API webhook
    // (as its 410 asks) and only cancels the Settings one's deliveries.
    let (api, _) = db.api_webhook(ws, "https://api.example.com/", &dm).await;
    let settings = db
        .webhook(ws, "https://settings.example.com/", &dm, WebhookSource::Settings)
        .await
        .unwrap()
        .0;
    db.write_history(&backlog(api.id, 5)).await;
    db.write_history(&backlog(settings.id, 6)).await;
    db.disable_for_gone(api.id).await;
    db.disable_for_gone(settings.id).await;
    let settled = store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(settled.webhooks_deleted, 1, "{settled:?}");
    assert_eq!(settled.deliveries, 10_000, "{settled:?}");
    assert_eq!(store.webhooks().get(api.id).await.unwrap(), None);
    let kept = store.webhooks().get(settings.id).await.unwrap().unwrap();
    assert_eq!(kept.disabled_reason, Some(DisabledReason::Gone));
    assert_eq!(pending().await, 0);
    assert_eq!(store.upkeep().settle_disabled().await.unwrap(), Default::default(), "settled");
}

/// PostgreSQL cancels a disabled webhook's backlog in turns that read only the
/// rows they cancel: the turn's keys from the webhook's range of the due-index,
/// read on from where the turn before left off, then its rows by key within
/// their days. Neither the webhook's whole range of the due-index (walked by an
/// `UPDATE` bounded by its order) nor every day's partition (the keys joined),
/// however large the backlog beside it, its own or another webhook's.
async fn a_cancel_turn_reads_only_the_rows_it_cancels(db: TestDb) {
    if db.backend() != Backend::Postgres {
        return;
    }
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let dm = [EventName::DmSent];
    let (off, _) = db.api_webhook(ws, "https://off.example.com/", &dm).await;
    let (other, _) = db.api_webhook(ws, "https://other.example.com/", &dm).await;
    let hours_ago = |hours: i64| Timestamp::now().plus_millis(-3_600_000 * hours);
    // The statistics are taken with nothing pending, as at rest; then both
    // webhooks fall behind by 20,000 deliveries, all due at once.
    let both = vec![off.id, other.id];
    db.write_history(&hookline_testdb::History::delivered(ws, both.clone(), 20_000, hours_ago(3)))
        .await;
    db.analyze().await;
    db.write_history(&hookline_testdb::History::pending(
        ws,
        both,
        20_000,
        hours_ago(2),
        hours_ago(1),
    ))
    .await;
    // Disabled as a disable cut short leaves it: nothing cancelled yet.
    db.on_postgres(&format!(
        "UPDATE webhooks SET enabled = false, disabled_reason = 'manual' WHERE id = '{}'",
        off.id
    ))
    .await;

    let day = HistoryDay::of(hours_ago(2));
    let plan = store.webhooks().explain_cancel_turn(off.id, 100, day).await.unwrap();
    let text = plan.join("\n");
    assert!(rows_read(&plan).iter().all(|&(rows, loops)| rows * loops <= 100), "{text}");
    // No delivery read and passed over (the webhooks table, two rows, may be
    // read whole for the one the turn checks).
    let steps = plan.iter().filter(|line| line.contains("Scan") || line.contains("Rows Removed"));
    let mut reading = "";
    for line in steps {
        if line.contains("Rows Removed") {
            assert!(!reading.contains(" on deliveries") || rows_removed(line) == 0, "{text}");
        } else {
            reading = line;
        }
    }
    let cancelled = plan.iter().find(|line| line.starts_with("Update on deliveries"));
    assert!(cancelled.is_some(), "{text}");
    assert!(text.contains("event_id = ANY"), "{text}");
    assert!(text.contains("rows=100 loops=1"), "{text}");

    // The rest goes in the upkeep's turns, day by day, with some of days ago
    // (a day without its partition: the default one) and the other webhook's
    // left pending.
    let days_ago =
        hookline_testdb::History::pending(ws, vec![off.id], 300, hours_ago(75), hours_ago(1));
    db.write_history(&days_ago).await;
    let settled = store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(settled.deliveries, 19_900 + 300, "{settled:?}");
    assert!(!db.webhook_has_pending(off.id).await);
    let pending = store.events().backlog(Timestamp::now(), 100_000).await.unwrap().0;
    assert_eq!(pending, 20_000);
}

/// What a disable settles before it answers is counted as its settle counts:
/// pending deliveries, not the delivered history beside them, which a disable
/// leaves alone.
async fn a_disable_with_a_long_history_and_few_pending_settles_before_it_answers(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://long.example.com/", &[EventName::DmSent]).await;
    let hours_ago = |hours: i64| Timestamp::now().plus_millis(-3_600_000 * hours);
    db.write_history(&hookline_testdb::History::delivered(ws, vec![hook.id], 5_000, hours_ago(3)))
        .await;
    db.write_history(&hookline_testdb::History::pending(
        ws,
        vec![hook.id],
        50,
        hours_ago(2),
        hours_ago(1),
    ))
    .await;
    let pending = async || store.events().backlog(Timestamp::now(), 100_000).await.unwrap().0;
    assert_eq!(pending().await, 50);

    store.webhooks().set_enabled(hook.id, false).await.unwrap();
    // Settled before the answer: no settle of the upkeep's asked for.
    assert_eq!(pending().await, 0);
    assert_eq!(db.rows_of_webhook(hook.id).await, 1 + 5_050, "the webhook and its history stay");
    assert_eq!(store.upkeep().settle_disabled().await.unwrap(), Default::default());
}

async fn an_event_fans_out_to_subscribed_enabled_webhooks_of_its_workspace(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Free).await;
    let other = db.workspace(Plan::Studio).await;
    let dm = webhook(store, ws, "https://dm.example.com/", &[EventName::DmSent]).await.unwrap();
    let both = webhook(
        store,
        ws,
        "https://both.example.com/",
        &[EventName::LinkClicked, EventName::DmSent],
    )
    .await
    .unwrap();
    let links =
        webhook(store, ws, "https://links.example.com/", &[EventName::LinkClicked]).await.unwrap();
    let disabled =
        webhook(store, ws, "https://off.example.com/", &[EventName::DmSent]).await.unwrap();
    store.webhooks().set_enabled(disabled.id, false).await.unwrap();
    webhook(store, other, "https://other.example.com/", &[EventName::DmSent]).await.unwrap();

    let (payload, reached) = emit(store, ws, EventName::DmSent).await;
    let mut expected = vec![dm.id, both.id];
    expected.sort();
    let mut reached_sorted = reached.clone();
    reached_sorted.sort();
    assert_eq!(reached_sorted, expected);

    let deliveries = store.events().deliveries(payload.id).await.unwrap();
    let mut delivered_to: Vec<_> = deliveries.iter().map(|d| d.webhook_id).collect();
    delivered_to.sort();
    assert_eq!(delivered_to, expected);
    for delivery in &deliveries {
        assert_eq!(delivery.state, DeliveryState::Pending);
        assert_eq!(delivery.attempts, 0);
        assert_eq!(delivery.next_attempt_at, payload.occurred_at);
    }
    assert_eq!(store.events().payload(payload.id).await.unwrap(), Some(payload.to_json()));

    let (_, reached) = emit(store, ws, EventName::LinkClicked).await;
    assert_eq!(reached.len(), 2);
    assert!(reached.contains(&links.id) && reached.contains(&both.id));
    // An event nobody subscribes to is still stored (samples), with no delivery.
    let (quiet, reached) = emit(store, ws, EventName::BioSubscribed).await;
    assert!(reached.is_empty());
    assert!(store.events().payload(quiet.id).await.unwrap().is_some());
}

async fn payloads_are_stored_byte_for_byte(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let data = json!({
        "text": "quote \" backslash \\ slash / newline \n tab \t nul \u{0} é 🎉 \u{2028}",
        "numbers": [1.5e300, -0.0, 12345678901234567890u64],
        "nested": {"$[0]": "json path lookalike", "": null},
    });
    let payload = EventPayload::new(EventName::DmSent, ws, data).unwrap();
    record(store, &payload).await.unwrap();
    assert_eq!(store.events().payload(payload.id).await.unwrap(), Some(payload.to_json()));
}

async fn an_event_for_an_unknown_workspace_writes_nothing(db: TestDb) {
    let store = db.store();
    let payload = EventPayload::new(EventName::DmSent, WorkspaceId::generate(), json!({})).unwrap();
    let err = record(store, &payload).await.unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::NotFound { kind: "workspace", .. })), "{err}");
    assert_eq!(store.events().payload(payload.id).await.unwrap(), None);
}

/// The outbox write's statement sends the workers' NOTIFY itself (PostgreSQL;
/// SQLite's workers poll and have nothing to listen on).
async fn the_outbox_write_wakes_the_listening_workers(db: TestDb) {
    let store = db.store();
    let Some(mut listener) = store.queue().listen().await.unwrap() else {
        assert_eq!(db.backend(), Backend::Sqlite);
        return;
    };
    let ws = db.workspace(Plan::Studio).await;
    webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (_, reached) = emit(store, ws, EventName::DmSent).await;
    assert_eq!(reached.len(), 1);
    // A guard against a hang, not a bound on the time: the NOTIFY was sent at
    // the commit, before `emit` returned.
    tokio::time::timeout(std::time::Duration::from_secs(60), listener.notified())
        .await
        .expect("no NOTIFY after an event with a delivery was written")
        .unwrap();
}

/// PostgreSQL's outbox write reads a workspace's webhooks without a lock (a
/// batch without idempotency keys runs no transaction), so its insert holds
/// the webhooks it delivers to: a webhook disabled since the read is waited
/// for, and then gets no delivery. SQLite's writers are serial: nothing to race.
async fn an_emit_beside_a_disable_under_way_waits_and_delivers_nothing_to_it(db: TestDb) {
    use diesel_async::SimpleAsyncConnection as _;
    if db.backend() != Backend::Postgres {
        return;
    }
    let store = db.store().clone();
    let ws = db.workspace(Plan::Studio).await;
    let hook = webhook(&store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let mut disabling = a_transaction_begun(
        &db,
        &format!("UPDATE webhooks SET enabled = false WHERE id = '{}'", hook.id),
    )
    .await;
    let emitting = tokio::spawn({
        let store = store.clone();
        async move { emit(&store, ws, EventName::DmSent).await }
    });
    // Until the emit waits for the webhook's row (it read it enabled).
    until_a_statement_waits_for_a_lock(&db, &emitting, "the emit did not wait for the disable")
        .await;
    disabling.batch_execute("COMMIT").await.unwrap();
    let (payload, reached) = emitting.await.unwrap();
    assert_eq!(reached, []);
    assert_eq!(store.events().deliveries(payload.id).await.unwrap(), []);
    assert!(store.events().payload(payload.id).await.unwrap().is_some(), "the event is stored");
}

/// The worker's record (PostgreSQL's one statement) locks the deliveries it
/// updates, then the webhook its health counters refer to. A delete beside it
/// waits for the deliveries before it takes the webhook: taken the other way
/// round, the two deadlocked and PostgreSQL aborted one of them.
async fn a_delete_beside_a_record_under_way_waits_for_it(db: TestDb) {
    use diesel_async::SimpleAsyncConnection as _;
    if db.backend() != Backend::Postgres {
        return;
    }
    let store = db.store().clone();
    let ws = db.workspace(Plan::Studio).await;
    let hook = webhook(&store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (payload, _) = emit(&store, ws, EventName::DmSent).await;
    let mut recording = a_transaction_begun(
        &db,
        &format!("UPDATE deliveries SET attempts = attempts + 1 WHERE webhook_id = '{}'", hook.id),
    )
    .await;
    let deleting = tokio::spawn({
        let store = store.clone();
        async move { store.webhooks().delete(hook.id, Some(ws)).await }
    });
    until_a_statement_waits_for_a_lock(&db, &deleting, "the delete did not wait for the record")
        .await;
    recording
        .batch_execute(&format!(
            "INSERT INTO webhook_stats (webhook_id, hour_start, succeeded, failed) \
             VALUES ('{}', 0, 1, 0); COMMIT",
            hook.id
        ))
        .await
        .expect("the record's counters wait for nothing the delete holds");
    assert!(deleting.await.unwrap().unwrap());
    assert_eq!(store.webhooks().get(hook.id).await.unwrap(), None);
    assert_eq!(store.events().deliveries(payload.id).await.unwrap(), []);
}

/// A connection of its own (PostgreSQL) in a transaction that has run `statement`
/// and holds its locks until the caller commits.
async fn a_transaction_begun(db: &TestDb, statement: &str) -> diesel_async::AsyncPgConnection {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    conn.batch_execute(&format!("BEGIN; {statement}")).await.unwrap();
    conn
}

/// Returns once a statement of this database waits for a lock (PostgreSQL);
/// `task`, the one expected to wait, must not have finished before.
async fn until_a_statement_waits_for_a_lock<T>(
    db: &TestDb,
    task: &tokio::task::JoinHandle<T>,
    not_waiting: &str,
) {
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = BigInt)]
        waiting: i64,
    }
    let mut watching = AsyncPgConnection::establish(db.url()).await.unwrap();
    loop {
        let rows: Vec<Waiting> = diesel::sql_query(
            "SELECT count(*) AS waiting FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .load(&mut watching)
        .await
        .unwrap();
        if rows[0].waiting > 0 {
            return;
        }
        // Each look is a round trip: no sleep between them.
        assert!(!task.is_finished(), "{not_waiting}");
    }
}

async fn disabling_cancels_pending_deliveries_and_enabling_does_not_revive_them(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let hook = webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (payload, _) = emit(store, ws, EventName::DmSent).await;

    let disabled = store.webhooks().set_enabled(hook.id, false).await.unwrap().unwrap();
    assert!(!disabled.enabled);
    assert_eq!(disabled.disabled_reason, Some(hookline_domain::DisabledReason::Manual));
    let states: Vec<_> =
        store.events().deliveries(payload.id).await.unwrap().iter().map(|d| d.state).collect();
    assert_eq!(states, [DeliveryState::Cancelled]);
    let (while_disabled, reached) = emit(store, ws, EventName::DmSent).await;
    assert!(reached.is_empty());
    assert!(store.events().deliveries(while_disabled.id).await.unwrap().is_empty());

    let enabled = store.webhooks().set_enabled(hook.id, true).await.unwrap().unwrap();
    assert!(enabled.enabled);
    assert_eq!(enabled.disabled_reason, None);
    let states: Vec<_> =
        store.events().deliveries(payload.id).await.unwrap().iter().map(|d| d.state).collect();
    assert_eq!(states, [DeliveryState::Cancelled]);
    assert_eq!(store.webhooks().set_enabled(WebhookId::generate(), false).await.unwrap(), None);
}

/// Redelivery and recovery check `enabled` in their own transaction, holding the
/// webhook's row: a webhook disabled after the use case's check gets nothing pending,
/// even one that never had the event (made by the redelivery itself).
async fn a_disabled_webhook_is_sent_nothing_again(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let had = webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (payload, _) = emit(store, ws, EventName::DmSent).await;
    let never = webhook(store, ws, "https://b.example.com/", &[EventName::DmSent]).await.unwrap();
    for hook in [&had, &never] {
        store.webhooks().set_enabled(hook.id, false).await.unwrap();
    }
    let events = store.events();
    assert_eq!(events.send_again(payload.id, Some(never.id)).await.unwrap(), 0);
    assert_eq!(events.send_again(payload.id, Some(had.id)).await.unwrap(), 0);
    assert_eq!(events.send_again(payload.id, None).await.unwrap(), 0);
    assert_eq!(events.recover(had.id, Timestamp::from_unix_millis(0).unwrap()).await.unwrap(), 0);
    let states: Vec<_> =
        events.deliveries(payload.id).await.unwrap().iter().map(|d| d.state).collect();
    assert_eq!(states, [DeliveryState::Cancelled], "nothing pending, nothing made for `never`");

    store.webhooks().set_enabled(never.id, true).await.unwrap();
    assert_eq!(events.send_again(payload.id, Some(never.id)).await.unwrap(), 1);
}

async fn attempts_are_logged_newest_first(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let hook = webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (payload, _) = emit(store, ws, EventName::DmSent).await;
    assert!(store.webhooks().attempts(hook.id, 100).await.unwrap().is_empty());
    let at = Timestamp::now();
    let failed = DeliveryAttempt {
        event_id: payload.id,
        webhook_id: hook.id,
        event: EventName::DmSent,
        attempt: 1,
        at,
        status: None,
        error: Some("connection refused: \"quoted\", back\\slash\ttab".into()),
        duration_ms: 3,
        response_body: None,
    };
    let delivered = DeliveryAttempt {
        attempt: 2,
        at: at.plus_millis(5_000),
        status: Some(200),
        error: None,
        duration_ms: 41,
        // Whatever a receiver sends comes back as it was.
        response_body: Some("{\"ok\":true}\r\n\u{1}é ✓ 𝄞 [1,2]\\".into()),
        ..failed.clone()
    };
    db.record_attempt(&failed, Outcome::RetryAt(delivered.at)).await;
    db.record_attempt(&delivered, Outcome::Delivered).await;
    assert_eq!(store.webhooks().attempts(hook.id, 100).await.unwrap(), [delivered.clone(), failed]);
    assert_eq!(store.webhooks().attempts(hook.id, 1).await.unwrap(), [delivered]);
}

async fn concurrent_emits_share_transactions_and_fail_alone(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/h", &[EventName::DmSent]).await;
    let unknown = WorkspaceId::generate();
    let tasks: Vec<_> = (0..60)
        .map(|n| {
            let store = store.clone();
            let target = if n % 10 == 0 { unknown } else { ws };
            tokio::spawn(async move {
                let payload =
                    EventPayload::new(EventName::DmSent, target, json!({"n": n})).unwrap();
                (payload.clone(), record(&store, &payload).await)
            })
        })
        .collect();
    for task in tasks {
        let (payload, recorded) = task.await.unwrap();
        if payload.workspace_id == unknown {
            assert!(
                matches!(
                    recorded,
                    Err(Error::Refused(Refusal::NotFound { kind: "workspace", .. }))
                ),
                "{recorded:?}"
            );
            assert_eq!(store.events().payload(payload.id).await.unwrap(), None);
        } else {
            assert_eq!(recorded.unwrap(), [hook.id]);
            assert_eq!(store.events().payload(payload.id).await.unwrap(), Some(payload.to_json()));
            assert_eq!(store.events().deliveries(payload.id).await.unwrap().len(), 1);
        }
    }
}

async fn migrating_again_applies_nothing(db: TestDb) {
    assert!(db.store().migrate().await.unwrap().is_empty());
}

async fn keys_are_found_by_hash_with_their_workspace(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Creator).await;
    let name = KeyName::parse("n8n").unwrap();
    let key = store.api_keys().create(ws, &name, &key_hash(7)).await.unwrap();
    let found = store.key_check().by_hash(&[key_hash(7), key_hash(8), key_hash(7)]).await.unwrap();
    let (first, workspace) = found[0].clone().unwrap();
    assert_eq!(first, key);
    assert_eq!(workspace.id, ws);
    assert_eq!(workspace.plan, Plan::Creator);
    assert_eq!(found[1], None);
    assert_eq!(found[2], found[0]);
    assert!(store.key_check().by_hash(&[]).await.unwrap().is_empty());

    store.api_keys().revoke(key.id).await.unwrap();
    let (revoked, _) = store.key_check().by_hash(&[key_hash(7)]).await.unwrap()[0].clone().unwrap();
    assert_eq!(revoked.status(), ApiKeyStatus::Revoked);
}

async fn last_use_is_kept_to_the_minute(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let key = api_key(store, ws, "k", 1).await;
    let other = api_key(store, ws, "o", 2).await;
    let last_used = async |hash| {
        store.key_check().by_hash(&[hash]).await.unwrap()[0].clone().unwrap().0.last_used_at
    };
    let at = Timestamp::from_unix_millis(1_795_341_845_123).unwrap();
    store.key_check().touch_keys(&[key.id, other.id], at).await.unwrap();
    let touched = last_used(key_hash(1)).await;
    assert_eq!(touched.unwrap().to_string(), "2026-11-22T10:04:00.000Z");
    assert_eq!(last_used(key_hash(2)).await, touched);
    // Later in the same minute: nothing changes. An older record never moves it back.
    store.key_check().touch_keys(&[key.id], at.plus_millis(30_000)).await.unwrap();
    store.key_check().touch_keys(&[key.id], at.plus_millis(-120_000)).await.unwrap();
    assert_eq!(last_used(key_hash(1)).await, touched);
    store.key_check().touch_keys(&[key.id], at.plus_millis(60_000)).await.unwrap();
    assert_eq!(last_used(key_hash(1)).await.unwrap().to_string(), "2026-11-22T10:05:00.000Z");
    assert_eq!(last_used(key_hash(2)).await, touched);
    store.key_check().touch_keys(&[], at).await.unwrap();
}

async fn rate_windows_count_per_key_and_restart_after_they_end(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    api_key(store, ws, "a", 1).await;
    api_key(store, ws, "b", 2).await;
    // Each request's key's window after the batch, in the order asked.
    let count = async |requests: &[u8], at: Timestamp| {
        let hashes: Vec<_> = requests.iter().map(|seed| key_hash(*seed)).collect();
        let used = store.key_check().use_keys(&checks(&hashes), at, 60_000).await.unwrap();
        let windows: Vec<_> = used.into_iter().map(|used| used.unwrap().window.unwrap()).collect();
        windows.into_iter().map(|w| (w.started_at, w.count)).collect::<Vec<_>>()
    };
    let t0 = Timestamp::from_unix_millis(1_795_341_845_000).unwrap();
    assert_eq!(count(&[1], t0).await, [(t0, 1)]);
    assert_eq!(count(&[1, 1, 1], t0.plus_millis(59_999)).await, [(t0, 4); 3]);
    // Each key has its own window.
    let both = count(&[2, 1, 2], t0.plus_millis(59_999)).await;
    assert_eq!(both, [(t0.plus_millis(59_999), 2), (t0, 5), (t0.plus_millis(59_999), 2)]);
    // The window ends one minute after its first request; the batch starts the next.
    let t1 = t0.plus_millis(60_000);
    assert_eq!(count(&[1, 1], t1).await, [(t1, 2); 2]);
    // In a batch of several keys alike: key 2's window ends, key 1's runs on.
    let t2 = t0.plus_millis(119_999);
    assert_eq!(count(&[1, 2], t2).await, [(t1, 3), (t2, 1)]);
}

async fn a_batch_of_key_uses_finds_touches_and_counts_by_the_rules(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let creator = db.workspace(Plan::Creator).await;
    let a = api_key(store, ws, "a", 1).await;
    let b = api_key(store, ws, "b", 2).await;
    let c = api_key(store, creator, "c", 3).await;
    let revoked = api_key(store, ws, "r", 4).await;
    store.api_keys().revoke(revoked.id).await.unwrap();
    let free = db.workspace(Plan::Free).await;
    let f = api_key(store, free, "f", 5).await;
    let at = Timestamp::from_unix_millis(1_795_341_845_123).unwrap();
    let keys = store.key_check();
    let asked =
        [key_hash(1), key_hash(9), key_hash(2), key_hash(1), key_hash(3), key_hash(4), key_hash(5)];
    let used = keys.use_keys(&checks(&asked), at, 60_000).await.unwrap();
    // Found in the order asked, with their workspaces.
    let ids: Vec<_> = used.iter().map(|entry| entry.as_ref().map(|used| used.key.id)).collect();
    assert_eq!(
        ids,
        [Some(a.id), None, Some(b.id), Some(a.id), Some(c.id), Some(revoked.id), Some(f.id)]
    );
    assert_eq!(used[0].as_ref().unwrap().workspace.id, ws);
    assert_eq!(used[4].as_ref().unwrap().workspace.plan, Plan::Creator);
    // Active keys on STUDIO are counted, each request once; the others nowhere.
    let windows: Vec<_> =
        used.iter().map(|entry| entry.as_ref().and_then(|used| used.window)).collect();
    let counts: Vec<_> =
        windows.iter().map(|window| window.map(|w| (w.started_at, w.count))).collect();
    assert_eq!(counts, [Some((at, 2)), None, Some((at, 1)), Some((at, 2)), None, None, None]);
    // Active keys are marked used, to the minute, and answered as marked.
    let minute = "2026-11-22T10:04:00.000Z";
    for entry in [&used[0], &used[2], &used[4], &used[6]] {
        assert_eq!(entry.as_ref().unwrap().key.last_used_at.unwrap().to_string(), minute);
    }
    assert_eq!(used[5].as_ref().unwrap().key.last_used_at, None);
    let stored = keys.by_hash(&asked).await.unwrap();
    for (stored, used) in stored.iter().zip(&used) {
        assert_eq!(stored.as_ref().map(|(key, _)| key), used.as_ref().map(|used| &used.key));
    }
    // The counts carry on; an empty batch writes nothing.
    let next = keys.use_keys(&checks(&[key_hash(1)]), at, 60_000).await.unwrap();
    assert_eq!(next[0].as_ref().unwrap().window.unwrap().count, 3);
    assert!(keys.use_keys(&checks(&[]), at, 60_000).await.unwrap().is_empty());
}

async fn a_key_check_reads_the_workspace_of_each_counted_request(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let other = db.workspace(Plan::Studio).await;
    let free = db.workspace(Plan::Free).await;
    api_key(store, ws, "a", 1).await;
    api_key(store, other, "b", 2).await;
    api_key(store, free, "f", 3).await;
    let revoked = api_key(store, ws, "r", 4).await;
    store.api_keys().revoke(revoked.id).await.unwrap();
    let shop = store.accounts().connect(ws, &Username::parse("shop").unwrap()).await.unwrap();
    store.accounts().connect(free, &Username::parse("free").unwrap()).await.unwrap();
    let (hook, _) = db.api_webhook(other, "https://a.example.com/", &[EventName::DmSent]).await;
    let asked = [
        (1, WorkspaceRead::Accounts),
        (1, WorkspaceRead::Webhooks),
        (2, WorkspaceRead::Accounts),
        (2, WorkspaceRead::Webhooks),
        (1, WorkspaceRead::Nothing),
        // A plan without the API, a revoked key, an unknown one: nothing read.
        (3, WorkspaceRead::Accounts),
        (4, WorkspaceRead::Webhooks),
        (9, WorkspaceRead::Accounts),
    ];
    let requests: Vec<_> = asked
        .iter()
        .map(|(seed, read)| KeyRequest { hash: key_hash(*seed), read: *read })
        .collect();
    let used = store.key_check().use_keys(&requests, Timestamp::now(), 60_000).await.unwrap();
    let reads: Vec<_> =
        used.iter().map(|entry| entry.as_ref().map(|used| used.read.clone())).collect();
    let expected = vec![
        Some(WorkspaceReading::Accounts([shop].into())),
        Some(WorkspaceReading::Webhooks([].into())),
        Some(WorkspaceReading::Accounts([].into())),
        Some(WorkspaceReading::Webhooks([hook].into())),
        Some(WorkspaceReading::Nothing),
        Some(WorkspaceReading::Nothing),
        Some(WorkspaceReading::Nothing),
        None,
    ];
    assert_eq!(reads, expected);
}

async fn concurrent_counts_are_exact(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let key = api_key(store, ws, "k", 1).await;
    let other = api_key(store, ws, "o", 2).await;
    let now = Timestamp::now();
    let window_of = |used: &[Option<UsedKey>], id: ApiKeyId| {
        let used = used.iter().flatten().find(|used| used.key.id == id).unwrap();
        used.window.unwrap().count
    };
    // Batches of both keys in either order: exact, and no deadlock on PostgreSQL.
    let tasks: Vec<_> = (0..300u32)
        .map(|n| {
            let store = store.clone();
            let hashes = if n % 2 == 0 {
                [key_hash(1), key_hash(2), key_hash(2)]
            } else {
                [key_hash(2), key_hash(1), key_hash(2)]
            };
            tokio::spawn(async move {
                let used = store.key_check().use_keys(&checks(&hashes), now, 60_000).await.unwrap();
                window_of(&used, key.id)
            })
        })
        .collect();
    let mut counts = Vec::new();
    for task in tasks {
        counts.push(task.await.unwrap());
    }
    counts.sort_unstable();
    assert_eq!(counts, (1..=300).collect::<Vec<u64>>());
    let last = store.key_check().use_keys(&checks(&[key_hash(2)]), now, 60_000).await.unwrap();
    assert_eq!(window_of(&last, other.id), 601);
}

async fn commits_without_the_flush_leave_their_session_as_it_was(db: TestDb) {
    // Test clusters run without the flush; this database's sessions start with it.
    db.on_postgres(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', \
         current_database()); END $$",
    )
    .await;
    let ws = db.workspace(Plan::Studio).await;
    api_key(db.store(), ws, "k", 1).await;
    let mut config = StoreConfig::new(db.url());
    config.max_connections = 1;
    let one_session = Store::connect(&config).await.unwrap();
    let keys = one_session.key_check();
    let expected = (db.backend() == Backend::Postgres).then(|| "on".to_owned());
    assert_eq!(keys.session_synchronous_commit().await.unwrap(), expected);
    let used = keys.use_keys(&checks(&[key_hash(1)]), Timestamp::now(), 60_000).await.unwrap();
    assert_eq!(used[0].as_ref().unwrap().window.unwrap().count, 1);
    assert_eq!(keys.session_synchronous_commit().await.unwrap(), expected);
    // A claim commits its leases the same way.
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    emit(db.store(), ws, EventName::DmSent).await;
    let claimed = one_session.queue().claim(&claim_now(10, &[])).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(keys.session_synchronous_commit().await.unwrap(), expected);
}

async fn samples_are_the_last_three_payloads_newest_first(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let other = db.workspace(Plan::Studio).await;
    assert!(store.events().recent_payloads(ws, EventName::DmSent, 3).await.unwrap().is_empty());
    let mut sent = Vec::new();
    for _ in 0..5 {
        sent.push(emit(store, ws, EventName::DmSent).await.0.to_json());
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    emit(store, ws, EventName::DmFailed).await;
    emit(store, other, EventName::DmSent).await;
    let recent = store.events().recent_payloads(ws, EventName::DmSent, 3).await.unwrap();
    assert_eq!(recent, [sent[4].clone(), sent[3].clone(), sent[2].clone()]);
}

async fn unstarted_claims_are_handed_back_one_by_one(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    for _ in 0..3 {
        emit(store, ws, EventName::DmSent).await;
    }
    let now = Timestamp::now();
    let lease = now.plus_millis(60_000);
    let claimed = claim(store, now, lease, "mine").await;
    assert_eq!(claimed.len(), 3);
    assert!(claim(store, now, lease, "other").await.is_empty());
    // Two are handed back and due again at once; the third stays leased.
    assert_eq!(store.queue().release(&claimed[..2]).await.unwrap(), 2);
    let again = claim(store, now, lease, "other").await;
    let keys =
        |c: &[ClaimedDelivery]| c.iter().map(|d| (d.event_id, d.webhook_id)).collect::<Vec<_>>();
    assert_eq!(keys(&again), keys(&claimed[..2]));
    // A claim since taken over is not released by its old holder.
    assert_eq!(store.queue().release(&claimed[..2]).await.unwrap(), 0);
    assert!(claim(store, now, lease, "third").await.is_empty());
    // Handed back together, only what is still held goes: the third.
    assert_eq!(store.queue().release(&claimed).await.unwrap(), 1);
    assert_eq!(keys(&claim(store, now, lease, "third").await), keys(&claimed[2..]));
}

async fn a_full_queue_never_analyzed_gets_statistics_once(db: TestDb) {
    queue_gets_statistics_once_it_fills(db, false).await;
}

async fn a_queue_analyzed_empty_gets_statistics_again_once_it_fills(db: TestDb) {
    queue_gets_statistics_once_it_fills(db, true).await;
}

/// 1,000 deliveries in a queue never analyzed, or analyzed while empty (an
/// operator's `ANALYZE`): the upkeep gathers statistics on PostgreSQL, once.
async fn queue_gets_statistics_once_it_fills(db: TestDb, analyzed_empty: bool) {
    let store = db.store();
    let upkeep = store.upkeep();
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    if analyzed_empty {
        db.on_postgres("ANALYZE deliveries").await;
    }
    assert_eq!(upkeep.analyze_lagging_partitions().await.unwrap(), 0, "an empty queue needs none");
    let mut emits = tokio::task::JoinSet::new();
    for _ in 0..1_000 {
        let store = store.clone();
        emits.spawn(async move { emit(&store, ws, EventName::DmSent).await });
    }
    emits.join_all().await;
    // Only PostgreSQL's planner wants statistics. It learns of the new rows when
    // the writers' connections report them, within seconds.
    let wanted = usize::from(db.backend() == Backend::Postgres);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut analyzed = upkeep.analyze_lagging_partitions().await.unwrap();
    while analyzed < wanted && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        analyzed = upkeep.analyze_lagging_partitions().await.unwrap();
    }
    assert_eq!(analyzed, wanted, "today's partition");
    assert_eq!(upkeep.analyze_lagging_partitions().await.unwrap(), 0, "once is enough");
}

async fn retention_forgets_whole_days_keeps_the_samples_and_anything_pending(db: TestDb) {
    let store = db.store();
    let upkeep = store.upkeep();
    let postgres = db.backend() == Backend::Postgres;
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let (contacts_hook, _) =
        db.api_webhook(ws, "https://b.example.com/", &[EventName::ContactCreated]).await;
    let now = Timestamp::now();
    let day = 86_400_000;
    // PostgreSQL: partitions for the days from ten days back (and three after),
    // none for fifteen days back, whose events fall into the default partition.
    let made = upkeep.prepare_partitions(now.plus_millis(-11 * day)).await.unwrap();
    assert_eq!(made, if postgres { 4 } else { 0 });
    assert_eq!(
        upkeep.prepare_partitions(now.plus_millis(-11 * day)).await.unwrap(),
        0,
        "made once"
    );
    // Eleven days back: one DM, still pending at the end. Ten days back: four
    // DMs (delivered) and a bio event. Fifteen days back: four contacts.
    let pending = emit_at(store, ws, EventName::DmSent, now.plus_millis(-11 * day)).await;
    let mut dms = Vec::new();
    for n in 0..4 {
        dms.push(emit_at(store, ws, EventName::DmSent, now.plus_millis(-10 * day + n)).await);
    }
    let bio = emit_at(store, ws, EventName::BioSubscribed, now.plus_millis(-10 * day)).await;
    let mut contacts = Vec::new();
    for n in 0..4 {
        contacts.push(
            emit_at(store, ws, EventName::ContactCreated, now.plus_millis(-15 * day + n)).await,
        );
    }
    let recent = emit(store, ws, EventName::DmFailed).await.0;
    let claimed = claim(store, now, now.plus_millis(60_000), "t").await;
    assert_eq!(claimed.len(), 9);
    for claimed in claimed.iter().filter(|c| c.event_id != pending.id) {
        deliver(store, claimed, claimed.webhook_id, now).await;
    }
    let unfinished: Vec<ClaimedDelivery> =
        claimed.into_iter().filter(|c| c.event_id == pending.id).collect();
    assert_eq!(store.queue().release(&unfinished).await.unwrap(), 1);

    let forgotten = upkeep.forget_history(now.plus_millis(-day)).await.unwrap();
    // The samples: the last three DMs, the bio event, the last three contacts.
    assert_eq!(forgotten.samples, 7);
    if postgres {
        // Ten days back dropped whole, and the two empty days after it; eleven
        // kept for its pending delivery; the default partition's contacts
        // deleted row by row.
        assert_eq!((forgotten.days, forgotten.days_held, forgotten.events), (3, 1, 4));
    } else {
        assert_eq!((forgotten.days, forgotten.days_held, forgotten.events), (0, 0, 9));
    }
    assert!(forgotten.turns >= 1);
    assert!(store.events().payload(pending.id).await.unwrap().is_some(), "pending kept");
    for gone in dms.iter().chain([&bio]).chain(&contacts) {
        assert!(store.events().payload(gone.id).await.unwrap().is_none(), "forgotten");
    }
    assert!(store.events().payload(recent.id).await.unwrap().is_some(), "within retention");
    for forgotten_hook in [hook.id, contacts_hook.id] {
        let attempts = store.webhooks().attempts(forgotten_hook, 100).await.unwrap();
        assert!(attempts.is_empty(), "attempts go with their events");
    }
    for contact in &contacts {
        assert!(
            store.events().deliveries(contact.id).await.unwrap().is_empty(),
            "deliveries go with their events"
        );
    }
    // The samples are the same as before the round.
    let payloads =
        |events: &[&EventPayload]| events.iter().map(|e| e.to_json()).collect::<Vec<_>>();
    let events = store.events();
    let samples = |name| events.recent_payloads(ws, name, 3);
    assert_eq!(samples(EventName::DmSent).await.unwrap(), payloads(&[&dms[3], &dms[2], &dms[1]]));
    assert_eq!(samples(EventName::BioSubscribed).await.unwrap(), payloads(&[&bio]));
    assert_eq!(
        samples(EventName::ContactCreated).await.unwrap(),
        payloads(&[&contacts[3], &contacts[2], &contacts[1]])
    );

    // Nothing more to forget; once the pending delivery ends, its day goes too.
    let again = upkeep.forget_history(now.plus_millis(-day)).await.unwrap();
    assert_eq!((again.days, again.events), (0, 0));
    let claimed = claim(store, now, now.plus_millis(60_000), "t").await;
    assert_eq!(claimed.len(), 1);
    deliver(store, &claimed[0], hook.id, now).await;
    let last = upkeep.forget_history(now.plus_millis(-day)).await.unwrap();
    assert_eq!(
        (last.days, last.days_held, last.events),
        if postgres { (1, 0, 0) } else { (0, 0, 1) }
    );
    assert!(store.events().payload(pending.id).await.unwrap().is_none());
    assert_eq!(samples(EventName::DmSent).await.unwrap(), payloads(&[&dms[3], &dms[2], &dms[1]]));
}

async fn the_backlog_counts_due_deliveries_up_to_a_cap_and_finds_the_oldest(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let now = Timestamp::now();
    let hour = 3_600_000;
    let (dead, _) =
        db.api_webhook(ws, "https://dead.example.com/", &[EventName::BioSubscribed]).await;
    let (later, _) =
        db.api_webhook(ws, "https://later.example.com/", &[EventName::LinkClicked]).await;
    let backlog = |webhook, from: Timestamp, due_at| {
        hookline_testdb::History::pending(ws, vec![webhook], 300, from, due_at)
    };
    // 300 due for an hour, 300 retries due in an hour, 2 fresh ones.
    db.write_history(&backlog(dead.id, now.plus_millis(-2 * hour), now.plus_millis(-hour))).await;
    db.write_history(&backlog(later.id, now.plus_millis(-hour), now.plus_millis(hour))).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    emit(store, ws, EventName::DmSent).await;
    emit(store, ws, EventName::DmSent).await;
    let at = Timestamp::now();
    assert_eq!(
        store.events().backlog(at, 1_000).await.unwrap(),
        (302, Some(now.plus_millis(-hour)))
    );
    assert_eq!(
        store.events().backlog(at, 100).await.unwrap(),
        (100, Some(now.plus_millis(-hour))),
        "capped"
    );
    // Before anything was due: none, and no oldest.
    assert_eq!(store.events().backlog(now.plus_millis(-3 * hour), 1_000).await.unwrap(), (0, None));
}

async fn a_claim_beside_a_resting_backlog_reads_only_the_rows_it_takes(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let dm = [EventName::DmSent];
    let (resting, _) =
        db.api_webhook(ws, "https://resting.example.com/", &[EventName::BioSubscribed]).await;
    let now = Timestamp::now();
    // The resting webhook's backlog: 20,000 deliveries due for an hour.
    let hour_ago = now.plus_millis(-3_600_000);
    let history =
        hookline_testdb::History::pending(ws, vec![resting.id], 20_000, hour_ago, hour_ago);
    db.write_history(&history).await;
    let (a, _) = db.api_webhook(ws, "https://a.example.com/", &dm).await;
    let (b, _) = db.api_webhook(ws, "https://b.example.com/", &dm).await;
    for _ in 0..5 {
        emit(store, ws, EventName::DmSent).await;
    }
    db.analyze().await;
    let skip = [resting.id];
    let request = claim_now(256, &skip);
    if db.backend() == Backend::Postgres {
        // The plan's every step reads at most the rows taken and one per webhook
        // with work, never the backlog.
        let plan = assert_claim_reads_at_most(store, &request, 10 + 3).await;
        // Each webhook's rows are a range of the due-index.
        let by_webhook = |line: &String| {
            line.contains("Index Cond: ((webhook_id = since")
                && line.contains(") AND (ROW(next_attempt_at, event_id) > ROW(")
        };
        assert!(plan.iter().any(by_webhook), "{}", plan.join("\n"));
    } else {
        let claimed = store.queue().claim(&request).await.unwrap();
        assert_eq!(claimed.len(), 10);
        assert!(claimed.iter().all(|c| c.webhook_id == a.id || c.webhook_id == b.id));
    }
    // Once the receiver answers, its backlog is taken oldest first, and fills
    // only what the other webhooks leave of a claim, though theirs are newer.
    for _ in 0..5 {
        emit(store, ws, EventName::DmSent).await;
    }
    let later = ClaimRequest {
        now: Timestamp::now(),
        skip: &[],
        fast: &[resting.id],
        limit: 100,
        ..request
    };
    let others_due = 10;
    let mut taken: Vec<String> = Vec::new();
    for round in 0..3 {
        let claimed =
            store.queue().claim(&ClaimRequest { lease_token: "u", ..later }).await.unwrap();
        if round == 0 {
            let others = claimed.iter().filter(|c| c.webhook_id != resting.id).count();
            assert_eq!(others, others_due, "the other webhooks' due rows are not crowded out");
        }
        let mut ids: Vec<String> = claimed
            .iter()
            .filter(|c| c.webhook_id == resting.id)
            .map(|c| c.event_id.to_string())
            .collect();
        ids.sort();
        taken.extend(ids);
    }
    assert_eq!(taken.len(), 300 - others_due);
    let mut sorted = taken.clone();
    sorted.sort();
    assert_eq!(taken, sorted, "each claim takes the next oldest");
    assert!(taken[0].ends_with("0000000000000001"), "the oldest first: {}", taken[0]);
}

async fn a_claim_walks_none_of_a_drained_backlog(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    // Made first, so the smallest id: the first webhook a claim's walk meets.
    let (drained, _) =
        db.api_webhook(ws, "https://drained.example.com/", &[EventName::BioSubscribed]).await;
    let (busy, _) = db.api_webhook(ws, "https://busy.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    let backlog = |webhook, hours_ago: i64| {
        hookline_testdb::History::pending(
            ws,
            vec![webhook],
            5_000,
            now.plus_millis(-3_600_000 * hours_ago),
            now.plus_millis(-3_600_000),
        )
    };
    db.write_history(&backlog(drained.id, 2)).await;
    db.write_history(&backlog(busy.id, 1)).await;
    // The statistics are taken while both backlogs are whole; then one drains.
    db.analyze().await;
    db.mark_delivered(drained.id).await;
    // Both fast: the count of those with rows due probes each range too.
    let fast = [drained.id, busy.id];
    let request = ClaimRequest { fast: &fast, ..claim_now(10, &[]) };
    if db.backend() == Backend::Postgres {
        // No step reads or filters out more than the rows taken and one per
        // webhook with work: not the drained rows, which the statistics still
        // count as pending.
        let plan = assert_claim_reads_at_most(store, &request, 10 + 2).await;
        assert!(
            plan.iter()
                .all(|line| !line.contains("Rows Removed by Filter") || rows_removed(line) <= 10),
            "{}",
            plan.join("\n")
        );
    } else {
        let claimed = store.queue().claim(&request).await.unwrap();
        assert_eq!(claimed.len(), 10);
        assert!(claimed.iter().all(|c| c.webhook_id == busy.id));
    }
}

/// On PostgreSQL a claim reads the day partitions from the oldest with a pending
/// delivery on (the pending floor, which the upkeep raises and anything that
/// makes an older event's delivery pending lowers) up to the hour ahead of its
/// clock (the pending ceiling), and finds every pending delivery; on SQLite, which has no days to skip, it finds them all too.
async fn claims_read_only_the_days_from_the_oldest_with_a_pending_delivery_on(db: TestDb) {
    let store = db.store();
    let upkeep = store.upkeep();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    partitions_for_days(store, now, 30).await;
    let days_ago = |days: i64| HistoryDay::of(now.plus_millis(-days * DAY_MS));
    let floor = async || upkeep.raise_pending_floor().await.unwrap();
    let on_postgres =
        |day: HistoryDay| (db.backend() == Backend::Postgres).then(|| day.first_id().to_string());
    // Each delivery is claimed and delivered at a later instant than the last,
    // so that the claim under EXPLAIN, whose lease ends first, is over.
    let mut at = now;
    let mut claim_and_finish = async |event: &EventPayload, outcome: Outcome| {
        at = at.plus_millis(120_000);
        let claimed = claim(store, at, at.plus_millis(60_000), "t").await;
        assert_eq!(claimed.iter().map(|c| c.event_id).collect::<Vec<_>>(), [event.id]);
        let finished = Finished { outcome, ..delivered(&claimed[0], hook.id, at) };
        assert_eq!(
            store.queue().finish(&[finished]).await.unwrap(),
            [hookline_store::Recording::Recorded]
        );
    };

    // Forty days ago there is no partition: the default partition's pending
    // delivery holds the floor at the lowest id.
    let oldest = emit_at(store, ws, EventName::DmSent, now.plus_millis(-40 * DAY_MS)).await;
    assert_eq!(floor().await, (db.backend() == Backend::Postgres).then(String::new));
    claim_and_finish(&oldest, Outcome::Delivered).await;
    assert_eq!(floor().await, on_postgres(days_ago(1)), "nothing pending: yesterday");

    // An event of ten days ago lowers the floor as it is written.
    let old = emit_at(store, ws, EventName::DmSent, now.plus_millis(-10 * DAY_MS)).await;
    assert_eq!(floor().await, on_postgres(days_ago(10)));
    if db.backend() == Backend::Postgres {
        let plan = store.queue().explain_claim(&claim_now(10, &[])).await.unwrap();
        let scans = day_scans(&plan);
        let read: std::collections::BTreeSet<_> =
            scans.iter().filter(|(_, ran, _)| *ran).map(|(day, ..)| *day).collect();
        assert!(read.iter().all(|day| *day >= days_ago(10)), "{}", plan.join("\n"));
        assert!(read.contains(&days_ago(10)), "{}", plan.join("\n"));
        // The walks' scans of the days below the floor are not even made ready
        // (named "never executed"): the floor, a stable function's value, prunes
        // them as the executor starts. Only the lease's lookups by key name them.
        let by_key = |line: &str| line.contains("_pkey");
        let walk = |line: &str| line.contains(" on deliveries_p") && !by_key(line);
        let walked_below_the_floor = |plan: &[String]| {
            day_scans(plan).iter().any(|(day, _, line)| walk(line) && *day < days_ago(10))
        };
        assert!(!walked_below_the_floor(&plan), "{}", plan.join("\n"));
        // Nor those above the pending ceiling, an hour past the claim's clock:
        // the days made ahead and the default partition.
        let ceiling = HistoryDay::of(Timestamp::now().plus_millis(3_600_000));
        let walks_the_default =
            |line: &str| line.contains(" Scan ") && line.contains(" on deliveries_default");
        let walked_above_the_ceiling = |plan: &[String]| {
            day_scans(plan).iter().any(|(day, _, line)| walk(line) && *day > ceiling)
                || plan.iter().any(|line| walks_the_default(line) && !by_key(line))
        };
        assert!(!walked_above_the_ceiling(&plan), "{}", plan.join("\n"));
        // `/metrics`' backlog walks the same days, and finds the one due delivery.
        let backlog = store.events().explain_backlog(Timestamp::now(), 100).await.unwrap();
        let walked: std::collections::BTreeSet<_> = day_scans(&backlog)
            .into_iter()
            .filter(|(_, ran, line)| *ran && walk(line))
            .map(|(day, ..)| day)
            .collect();
        assert!(walked.contains(&days_ago(10)), "{}", backlog.join("\n"));
        assert!(!walked_below_the_floor(&backlog), "{}", backlog.join("\n"));
        assert!(!walked_above_the_ceiling(&backlog), "{}", backlog.join("\n"));
        assert_eq!(store.events().backlog(Timestamp::now(), 100).await.unwrap().0, 1);
        // The lease finds its rows again by key in the days it picked from only:
        // not in the days since the floor, nor in those made ahead.
        let leased_in: std::collections::BTreeSet<_> = scans
            .iter()
            .filter(|(_, ran, line)| *ran && line.contains(" on deliveries_p") && by_key(line))
            .map(|(day, ..)| *day)
            .collect();
        assert_eq!(leased_in, [days_ago(10)].into(), "{}", plan.join("\n"));
    }
    claim_and_finish(&old, Outcome::Delivered).await;
    assert_eq!(floor().await, on_postgres(days_ago(1)));

    // Sent again, it is pending below the floor: the floor comes down with it.
    assert_eq!(store.events().send_again(old.id, None).await.unwrap(), 1);
    claim_and_finish(&old, Outcome::Delivered).await;
    assert_eq!(floor().await, on_postgres(days_ago(1)));
    assert_eq!(store.events().send_again(old.id, None).await.unwrap(), 1);
    assert_eq!(floor().await, on_postgres(days_ago(10)), "raised to its day, no further");
    claim_and_finish(&old, Outcome::Delivered).await;

    // Given up, then recovered: the floor comes down for it too.
    assert_eq!(store.events().send_again(old.id, None).await.unwrap(), 1);
    claim_and_finish(&old, Outcome::GaveUp).await;
    assert_eq!(floor().await, on_postgres(days_ago(1)));
    assert_eq!(store.events().recover(hook.id, now).await.unwrap(), 1);
    assert_eq!(floor().await, on_postgres(days_ago(10)));
    claim_and_finish(&old, Outcome::Delivered).await;
}

/// The day of the partition of deliveries or events each scan of `plan` names,
/// whether it ran, and its line.
fn day_scans(plan: &[String]) -> Vec<(HistoryDay, bool, &String)> {
    plan.iter()
        .filter(|line| line.contains(" Scan "))
        .filter_map(|line| {
            let day = [" on deliveries_p", " on events_p"]
                .into_iter()
                .find_map(|table| Some(line.find(table)? + table.len()))
                .and_then(|at| HistoryDay::from_label(line.get(at..at + 8)?))?;
            Some((day, !line.contains("never executed"), line))
        })
        .collect()
}

/// The pages a plan's statement read, in all: `hit` and `read` of its first
/// `Buffers:` line.
fn pages_read(plan: &[String]) -> u64 {
    let line = plan.iter().find(|line| line.contains("Buffers:")).expect("a plan with buffers");
    ["hit=", "read="].iter().filter_map(|key| plan_number(line, key)).sum()
}

async fn a_claim_walks_none_of_what_its_handle_took_before(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://backlog.example.com/", &[EventName::DmSent]).await;
    // A backlog all due at once (as a recovery leaves it), most of it since
    // claimed and delivered by one handle: the rest is due after the entries that
    // PostgreSQL keeps, dead, in the due-index until a vacuum.
    let hour_ago = Timestamp::now().plus_millis(-3_600_000);
    db.write_history(&hookline_testdb::History::pending(
        ws,
        vec![hook.id],
        20_000,
        hour_ago,
        hour_ago,
    ))
    .await;
    db.analyze().await;
    let queue = store.queue();
    let fast = [hook.id];
    let request = ClaimRequest { fast: &fast, lease_token: "drained", ..claim_now(15_000, &[]) };
    assert_eq!(queue.claim(&request).await.unwrap().len(), 15_000);
    db.mark_leased_delivered("drained").await;
    let request = ClaimRequest { fast: &fast, lease_token: "next", ..claim_now(10, &[]) };
    if db.backend() == Backend::Postgres {
        // The handle's next claim starts where its last left off; a new handle's
        // walks the delivered rows' entries.
        let after = pages_read(&queue.explain_claim(&request).await.unwrap());
        let walked = pages_read(&store.queue().explain_claim(&request).await.unwrap());
        assert!(after * 4 < walked, "{after} pages read after the position, {walked} walked");
    } else {
        let claimed = queue.claim(&request).await.unwrap();
        assert_eq!(claimed.len(), 10);
    }
}

async fn a_claim_looks_behind_the_positions_only_now_and_then(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://busy.example.com/", &[EventName::DmSent]).await;
    // A busy second: 2,000 deliveries due every tenth of it, most of them since
    // claimed and delivered by one handle, dead in the due-index until a vacuum
    // and due in the clock skew behind its position.
    let now = Timestamp::now();
    let history =
        hookline_testdb::History::pending(ws, vec![hook.id], 20_000, now.plus_millis(-1_000), now)
            .every(100)
            .due_as_made();
    db.write_history(&history).await;
    db.analyze().await;
    let queue = store.queue();
    let fast = [hook.id];
    let at = |millis| ClaimRequest {
        now: now.plus_millis(millis),
        lease_until: now.plus_millis(60_000),
        fast: &fast,
        lease_token: "next",
        ..claim_now(10, &[])
    };
    let drained = ClaimRequest { limit: 15_000, lease_token: "drained", ..at(0) };
    assert_eq!(queue.claim(&drained).await.unwrap().len(), 15_000);
    db.mark_leased_delivered("drained").await;
    if db.backend() == Backend::Postgres {
        // The next claim, a millisecond on, reads only after the position; one a
        // tenth of a second on also walks the delivered rows behind it.
        let soon = pages_read(&queue.explain_claim(&at(1)).await.unwrap());
        let looking = pages_read(&queue.explain_claim(&at(101)).await.unwrap());
        assert!(soon * 4 < looking, "{soon} pages read at once, {looking} looking behind");
    } else {
        for millis in [1, 101] {
            assert_eq!(queue.claim(&at(millis)).await.unwrap().len(), 10);
        }
    }
}

async fn a_record_finds_each_delivery_by_its_key_beside_a_backlog(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    // The statistics are taken with nothing pending, as at rest; then the webhook
    // falls behind by 20,000 deliveries.
    let at_rest =
        hookline_testdb::History::delivered(ws, vec![hook.id], 20_000, now.plus_millis(-7_200_000));
    db.write_history(&at_rest).await;
    db.analyze().await;
    let hour_ago = now.plus_millis(-3_600_000);
    let backlog = hookline_testdb::History::pending(ws, vec![hook.id], 20_000, hour_ago, hour_ago);
    db.write_history(&backlog).await;
    let fast = [hook.id];
    let claimed = store.queue().claim(&ClaimRequest { fast: &fast, ..claim_now(10, &[]) }).await;
    let finished: Vec<Finished> =
        claimed.unwrap().iter().map(|claimed| delivered(claimed, hook.id, now)).collect();
    assert_eq!(finished.len(), 10);
    if db.backend() == Backend::Postgres {
        // The deliveries are found in one scan of the primary key for their ids,
        // reading just their ten rows: not in the webhook's range of the
        // due-index (20,000 entries walked for each), nor in a scan of the ids
        // between; and not in a lookup per delivery, where the array would be
        // sorted and walked again at each.
        let plan = store.queue().explain_record(&finished).await.unwrap();
        let text = plan.join("\n");
        let by_key = plan.iter().position(|line| line.contains("_pkey")).expect(&text);
        assert!(plan[by_key].contains("rows=10 loops=1"), "{text}");
        assert!(plan[by_key + 1].contains("event_id = ANY"), "{text}");
        assert!(!text.contains("next_attempt_at_event_id_idx"), "{text}");
    } else {
        let recorded = store.queue().finish(&finished).await.unwrap();
        assert!(recorded.iter().all(|r| *r == hookline_store::Recording::Recorded));
    }
    for done in &finished {
        let deliveries = store.events().deliveries(done.claimed.event_id).await.unwrap();
        assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    }
}

async fn a_claim_finds_what_fell_due_behind_where_the_last_left_off(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    let mut due = Vec::new();
    for n in 0..4 {
        due.push(
            emit_at(store, ws, EventName::DmSent, now.plus_millis(-10_000 + 2_000 * n)).await.id,
        );
    }
    // One handle, as a worker claims: each claim starts where its last left off.
    let queue = store.queue();
    let lease = 60_000;
    let request = |now: Timestamp| ClaimRequest {
        now,
        lease_until: now.plus_millis(lease),
        limit: 3,
        per_webhook: 10,
        skip: &[],
        fast: &[],
        lease_token: "t",
    };
    let ids = |claimed: Vec<ClaimedDelivery>| {
        let mut ids: Vec<_> = claimed.into_iter().map(|c| c.event_id).collect();
        ids.sort_unstable();
        ids
    };
    let first = queue.claim(&request(now)).await.unwrap();
    assert_eq!(ids(first.clone()), due[..3]);
    // Written by an instance whose clock is half a second behind: due behind the
    // newest claimed, and taken by the next claim that looks behind the
    // positions (a tenth of a second on, at most).
    let late = emit_at(store, ws, EventName::DmSent, now.plus_millis(-6_500)).await.id;
    let look = now.plus_millis(100);
    let one = queue.claim(&ClaimRequest { per_webhook: 1, ..request(look) }).await;
    assert_eq!(ids(one.unwrap()), [late], "one share, however the rows are read");
    let again = queue.claim(&request(look.plus_millis(1))).await;
    assert_eq!(ids(again.unwrap()), [due[3]]);
    // Handed back, seconds behind the newest claimed: due again at once.
    assert_eq!(queue.release(&first[..1]).await.unwrap(), 1);
    let again = queue.claim(&request(look.plus_millis(2))).await;
    assert_eq!(ids(again.unwrap()), [due[0]]);
    // Due long before, and leases that ran out: taken within a lease period.
    let far = emit_at(store, ws, EventName::DmSent, now.plus_millis(-60_000)).await.id;
    let after_lease = look.plus_millis(lease + 10);
    let later = queue.claim(&ClaimRequest { limit: 10, ..request(after_lease) }).await;
    assert_eq!(ids(later.unwrap()), [far, due[0], due[1], late, due[2], due[3]]);
}

async fn the_look_for_samples_probes_each_pair_beside_a_day_of_one_busy_workspace(db: TestDb) {
    let busy = db.workspace(Plan::Studio).await;
    let quiet = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(busy, "https://a.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    // A day held by one workspace: by its statistics, every row matches any
    // workspace.
    let history = hookline_testdb::History::delivered(
        busy,
        vec![hook.id],
        20_000,
        now.plus_millis(-3_600_000),
    );
    db.write_history(&history).await;
    db.analyze().await;
    let plan = db.store().upkeep().explain_samples(now, &[quiet, busy]).await.unwrap();
    if db.backend() == Backend::Postgres {
        // The busy workspace's three of its one name, and nothing walked for the
        // other pairs (each name of each workspace).
        let read = rows_read(&plan);
        assert!(read.iter().all(|&(rows, loops)| rows * loops <= 2 * 7 + 3), "{}", plan.join("\n"));
        assert!(
            plan.iter()
                .all(|line| !line.contains("Rows Removed by Filter") || rows_removed(line) <= 3),
            "{}",
            plan.join("\n")
        );
    }
}

async fn the_attempt_log_pages_through_attempts_of_one_millisecond_each_once(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    // One chunk of history: every attempt at the same instant, so the cursor's
    // event id and number are all that orders them.
    let at = Timestamp::now().plus_millis(-60_000);
    let history =
        hookline_testdb::History::delivered(ws, vec![hook.id], 95, at).attempted_by(hook.id);
    db.write_history(&history).await;
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store.webhooks().attempts_before(hook.id, before, 20).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(AttemptCursor::after(last));
        pages.push(page);
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [20, 20, 20, 20, 15]);
    let ids: Vec<hookline_domain::EventId> =
        pages.iter().flatten().map(|attempt| attempt.event_id).collect();
    let mut newest_first = ids.clone();
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    newest_first.dedup();
    assert_eq!(ids, newest_first, "each attempt once, newest first");
    // A cursor without the attempt's time (the form before it was carried)
    // gives the same pages; one naming no attempt of the log gives none.
    for (page, next) in pages.iter().zip(&pages[1..]) {
        let short = AttemptCursor { at: None, ..AttemptCursor::after(page.last().unwrap()) };
        assert_eq!(
            &store.webhooks().attempts_before(hook.id, Some(short), 20).await.unwrap(),
            next
        );
    }
    let unknown = AttemptCursor { attempt: 99, at: None, ..AttemptCursor::after(&pages[0][0]) };
    assert_eq!(store.webhooks().attempts_before(hook.id, Some(unknown), 20).await.unwrap(), []);
    // The full form names a place: one whose attempt is not in the log (no
    // attempt is numbered 0) goes on from there.
    let place = AttemptCursor { attempt: 0, ..AttemptCursor::after(&pages[0][19]) };
    assert_eq!(
        &store.webhooks().attempts_before(hook.id, Some(place), 20).await.unwrap(),
        &pages[1]
    );
}

/// On PostgreSQL each page of the attempt log keeps one generic plan: planned
/// for each call's values, it was planned again across every partition at every
/// call (such a plan names the values it was made for).
async fn the_attempt_log_pages_keep_one_plan_each(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    // A month of partitions, eight days of attempts in them (a chunk of 2,000 a
    // day), with statistics: a plan made for the call's values then looks
    // cheaper than the generic one, as it knows the limit. (That it prunes the
    // cursor's day made it look cheaper too on a million attempts, not here.)
    let now = Timestamp::now();
    partitions_for_days(store, now, 30).await;
    let history = hookline_testdb::History::delivered(
        ws,
        vec![hook.id],
        16_000,
        now.plus_millis(-8 * DAY_MS),
    )
    .every(DAY_MS)
    .attempted_by(hook.id);
    db.write_history(&history).await;
    db.vacuum().await;
    let page = store.webhooks().attempts(hook.id, 20).await.unwrap();
    let cursor = page.last().map(AttemptCursor::after).unwrap();
    let plans = store.webhooks().attempt_log_plans(hook.id, cursor, 20).await.unwrap();
    if db.backend() == Backend::Postgres {
        for plan in plans {
            let plan = plan.join("\n");
            assert!(plan.contains("webhook_id = $1"), "{plan}");
            assert!(!plan.contains(&hook.id.to_string()), "{plan}");
        }
    }
}

/// On PostgreSQL the record of an outcome reads only the day of its event: its
/// plan, made once per connection, prunes the other days as it starts (without
/// the days' bounds it read every day's partition at every call).
async fn a_record_is_planned_for_its_events_days_only(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let now = Timestamp::now();
    partitions_for_days(store, now, 8).await;
    let history =
        hookline_testdb::History::delivered(ws, vec![hook.id], 8_000, now.plus_millis(-4 * DAY_MS))
            .every(DAY_MS);
    db.write_history(&history).await;
    db.vacuum().await;
    let (event, _) = emit(store, ws, EventName::DmSent).await;
    let plan = store.queue().record_plan((event.id, hook.id)).await.unwrap();
    if db.backend() == Backend::Postgres {
        // One partition read: the day the event is in.
        let days = plan.iter().filter(|line| line.contains("Scan on public.deliveries_"));
        assert_eq!(days.count(), 1, "{plan:#?}");
    } else {
        assert!(plan.is_empty());
    }
}

/// On PostgreSQL every claim runs the connection's one generic plan: left to
/// choose, PostgreSQL planned a busy ingest's claims for their values at every
/// call, each plan across every day's partition.
async fn a_claim_is_planned_once_per_connection(db: TestDb) {
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    let mut config = StoreConfig::new(db.url());
    config.max_connections = 1;
    let one_session = Store::connect(&config).await.unwrap();
    let queue = one_session.queue();
    for _ in 0..8 {
        emit(db.store(), ws, EventName::DmSent).await;
        assert_eq!(queue.claim(&claim_now(10, &[])).await.unwrap().len(), 1);
    }
    let expected = (db.backend() == Backend::Postgres).then_some((8, 0));
    assert_eq!(queue.claim_plans().await.unwrap(), expected);
}

/// The plan PostgreSQL keeps for the record (a generic one), made while its
/// day's partition is small, as each day begins, looks the outcomes' deliveries
/// up in the primary key by their ids: a plan that read the day's range (or the
/// whole partition) instead was kept as the day grew, and read every row of
/// the day for each batch of outcomes.
async fn a_record_kept_while_its_day_is_small_looks_deliveries_up_by_key(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    // Noon of today's partition, whatever the time of day the test runs at.
    let noon = HistoryDay::of(Timestamp::now()).start().plus_millis(DAY_MS / 2);
    let today = hookline_testdb::History::delivered(ws, vec![hook.id], 3_000, noon);
    db.write_history(&today).await;
    db.analyze().await;
    let event = emit_at(store, ws, EventName::DmSent, noon.plus_millis(60_000)).await;
    let plan = store.queue().record_plan((event.id, hook.id)).await.unwrap();
    if db.backend() == Backend::Postgres {
        let text = plan.join("\n");
        assert!(text.contains("_pkey"), "{text}");
        assert!(text.contains("event_id = ANY"), "{text}");
        assert!(!text.contains("Seq Scan on public.deliveries"), "{text}");
    } else {
        assert!(plan.is_empty());
    }
}

async fn forgetting_goes_in_turns_of_a_bounded_number_of_events(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let old = Timestamp::now().plus_millis(-10 * 86_400_000);
    let events = 450;
    for n in 0..events {
        emit_at(store, ws, EventName::LinkClicked, old.plus_millis(n)).await;
    }
    // On PostgreSQL no partition holds those days: they are in the default
    // partition, forgotten row by row like SQLite's.
    let forgotten =
        store.upkeep().forget_history(Timestamp::now().plus_millis(-86_400_000)).await.unwrap();
    assert_eq!(forgotten.events, events as u64);
    // Turns start at 50 events and at most double: 50 + 100 + 200 < 450.
    assert!(forgotten.turns >= 4, "{forgotten:?}");
    assert!(
        forgotten.largest_turn <= 200 * 2 && forgotten.largest_turn < events as u64,
        "{forgotten:?}"
    );
    assert_eq!(forgotten.samples, 3);
    assert_eq!(
        store.events().recent_payloads(ws, EventName::LinkClicked, 10).await.unwrap().len(),
        3
    );
    let reclaimed = store.upkeep().reclaim_space().await.unwrap();
    if db.backend() == Backend::Sqlite {
        assert!(reclaimed.pages > 16, "the freed pages go back: {reclaimed:?}");
        // The first turn is 16 pages: a turn gives back as many as it is sized
        // for, not one page a statement.
        assert!(reclaimed.largest_turn >= 16, "{reclaimed:?}");
        assert_eq!(store.upkeep().reclaim_space().await.unwrap().pages, 0, "all of them at once");
    } else {
        assert_eq!(reclaimed, Reclaimed::default());
    }
}

async fn an_idempotency_key_stores_one_event_across_stores_and_batches(db: TestDb) {
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, "https://a.example.com/", &[EventName::DmSent]).await;
    // Two stores (two pools, two coalescing tasks), as two processes would be.
    let other = Store::connect(&hookline_store::StoreConfig::new(db.url())).await.unwrap();
    let key = hookline_domain::IdempotencyKey::parse("order-1").unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|n| {
            let store = if n % 2 == 0 { db.store().clone() } else { other.clone() };
            let key = key.clone();
            tokio::spawn(async move {
                let payload = EventPayload::new(EventName::DmSent, ws, json!({"n": n})).unwrap();
                let new = NewEvent { payload: payload.clone(), idempotency_key: Some(key) };
                (payload, store.events().record(new).await.unwrap())
            })
        })
        .collect();
    let mut stored = Vec::new();
    let mut replayed = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (payload, Recorded::Stored(webhooks)) => stored.push((payload, webhooks)),
            (_, Recorded::Replayed(first)) => replayed.push(first),
        }
    }
    assert_eq!(stored.len(), 1, "exactly one event is stored");
    assert_eq!(stored[0].1.len(), 1);
    let first = stored[0].0.to_json();
    assert_eq!(replayed.len(), 19);
    assert!(replayed.iter().all(|payload| *payload == first));
    let samples = db.store().events().recent_payloads(ws, EventName::DmSent, 10).await.unwrap();
    assert_eq!(samples, [first]);
    // A day later the key is free again, and the upkeep removes it.
    let later = Timestamp::now().plus(hookline_domain::IdempotencyKey::WINDOW).plus_millis(1);
    assert_eq!(db.store().upkeep().delete_ended_idempotency_keys(later).await.unwrap(), 1);
}

async fn portal_links_are_found_by_hash_until_the_upkeep_removes_the_expired(db: TestDb) {
    let links = db.store().portal_links();
    let ws = db.workspace(Plan::Studio).await;
    let now = Timestamp::now();
    links.create(ws, &key_hash(1), now.plus_millis(-1)).await.unwrap();
    links.create(ws, &key_hash(2), now.plus_millis(3_600_000)).await.unwrap();
    // The workspace comes with the link, read in the same query.
    let by_id = |found: Option<(hookline_domain::Workspace, Timestamp)>| {
        found.map(|(workspace, at)| (workspace.id, at))
    };
    let found = links.find(&key_hash(2)).await.unwrap();
    assert_eq!(found.as_ref().map(|(workspace, _)| workspace.plan), Some(Plan::Studio));
    assert_eq!(by_id(found), Some((ws, now.plus_millis(3_600_000))));
    assert_eq!(
        by_id(links.find(&key_hash(1)).await.unwrap()),
        Some((ws, now.plus_millis(-1))),
        "expired, kept until the upkeep"
    );
    assert_eq!(links.find(&key_hash(3)).await.unwrap(), None);
    let unknown = links.create(WorkspaceId::generate(), &key_hash(4), now).await;
    assert!(unknown.is_err(), "a link needs its workspace");
    assert_eq!(db.store().upkeep().delete_expired_portal_links(now).await.unwrap(), 1);
    assert_eq!(links.find(&key_hash(1)).await.unwrap(), None);
    assert!(links.find(&key_hash(2)).await.unwrap().is_some());
}

async fn a_workspace_update_sets_what_it_is_given_at_once(db: TestDb) {
    let workspaces = db.store().workspaces();
    let ws = db.workspace(Plan::Free).await;
    let name = WorkspaceName::parse("Acme Inc").unwrap();
    let both = workspaces.update(ws, Some(&name), Some(Plan::Studio)).await.unwrap().unwrap();
    assert_eq!((both.name.as_str(), both.plan), ("Acme Inc", Plan::Studio));
    let nothing = workspaces.update(ws, None, None).await.unwrap().unwrap();
    assert_eq!(nothing, both);
    let plan_only = workspaces.update(ws, None, Some(Plan::Creator)).await.unwrap().unwrap();
    assert_eq!((plan_only.name.as_str(), plan_only.plan), ("Acme Inc", Plan::Creator));
    assert_eq!(workspaces.update(WorkspaceId::generate(), Some(&name), None).await.unwrap(), None);
}

/// A PostgreSQL database with a Studio workspace and its webhook for `dm.sent`.
async fn postgres_with_a_hook() -> (hookline_testdb::TestDb, WorkspaceId, Webhook) {
    let db = hookline_testdb::TestDb::new(Backend::Postgres).await;
    let ws = db.workspace(Plan::Studio).await;
    let hook =
        webhook(db.store(), ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    (db, ws, hook)
}

/// A day whose parent tables an open transaction holds (an emit in flight,
/// say) is not dropped meanwhile: its drop's tries, first without waiting in
/// the tables' queue, then with short waits, give up, and the day is held for
/// the next round, which drops it once the tables are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_whose_tables_stay_busy_is_held_for_the_next_round() {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};
    let (db, ws, _) = postgres_with_a_hook().await;
    let store = db.store();
    let upkeep = store.upkeep();
    let (now, day) = (Timestamp::now(), 86_400_000);
    upkeep.prepare_partitions(now.plus_millis(-10 * day)).await.unwrap();
    let old = emit_at(store, ws, EventName::LinkClicked, now.plus_millis(-10 * day)).await;
    // Only the day ten days back lies wholly before the cut.
    let cut = now.plus_millis(-9 * day);
    let mut emit_in_flight = AsyncPgConnection::establish(db.url()).await.unwrap();
    emit_in_flight
        .batch_execute("BEGIN; LOCK TABLE ONLY events IN ROW EXCLUSIVE MODE")
        .await
        .unwrap();

    let held = upkeep.forget_history(cut).await.unwrap();
    assert_eq!((held.days, held.days_held), (0, 1), "{held:?}");
    assert!(store.events().payload(old.id).await.unwrap().is_none(), "its rows are gone");

    emit_in_flight.batch_execute("ROLLBACK").await.unwrap();
    let dropped = upkeep.forget_history(cut).await.unwrap();
    assert_eq!((dropped.days, dropped.days_held), (1, 0), "{dropped:?}");
}

// Slow: an old-layout database is built, filled and migrated.
/// A PostgreSQL database made before the history was partitioned is converted by
/// the next `migrate`, every row kept, and its old days are then partitions that
/// retention drops whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_postgres_database_is_partitioned_with_its_rows() {
    let (db, ws, hook) = postgres_with_a_hook().await;
    let store = db.store();
    let (now, day) = (Timestamp::now(), 86_400_000);
    let old = emit_at(store, ws, EventName::DmSent, now.plus_millis(-40 * day)).await;
    let older = emit_at(store, ws, EventName::DmSent, now.plus_millis(-41 * day)).await;
    let recent = emit_at(store, ws, EventName::DmSent, now.plus_millis(-day)).await;
    // The two old ones delivered (an attempt each), the recent one pending.
    let claimed = claim(store, now, now.plus_millis(60_000), "t").await;
    for claimed in claimed.iter().filter(|c| c.event_id != recent.id) {
        deliver(store, claimed, hook.id, now).await;
    }
    let unfinished: Vec<ClaimedDelivery> =
        claimed.into_iter().filter(|c| c.event_id == recent.id).collect();
    store.queue().release(&unfinished).await.unwrap();

    store.unpartition_history().await.unwrap();
    // No migration is pending: the conversion runs on its own when it finds
    // the history unpartitioned.
    assert!(store.migrate().await.unwrap().is_empty());

    for event in [&old, &older, &recent] {
        assert_eq!(
            store.events().payload(event.id).await.unwrap(),
            Some(event.to_json()),
            "rows kept"
        );
    }
    assert_eq!(store.webhooks().attempts(hook.id, 10).await.unwrap().len(), 2, "attempts kept");
    let pending = store.events().deliveries(recent.id).await.unwrap();
    assert_eq!(pending[0].state, DeliveryState::Pending);
    // The days from the oldest event on are partitions: the two old days (and the
    // empty days up to the cutoff) are dropped whole; the recent one stays.
    let forgotten = store.upkeep().forget_history(now.plus_millis(-30 * day)).await.unwrap();
    assert!(forgotten.days >= 2, "{forgotten:?}");
    assert_eq!(forgotten.events, 0, "nothing in the default partition");
    assert!(store.events().payload(old.id).await.unwrap().is_none());
    assert_eq!(
        claim(store, Timestamp::now(), now.plus_millis(60_000), "u").await.len(),
        1,
        "the pending delivery is due"
    );
    // Migrating again changes nothing.
    store.migrate().await.unwrap();
    assert!(store.events().payload(recent.id).await.unwrap().is_some());
}

// Slow: an old-layout database is built, partitioned and migrated.
/// A database partitioned while deliveries still had a foreign key to events
/// loses it at the next `migrate`, and its old days are then forgotten whole (a
/// day's events could not be emptied under such a key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_database_with_the_old_foreign_key_loses_it_on_migrate() {
    let (db, ws, hook) = postgres_with_a_hook().await;
    let store = db.store();
    let (now, day) = (Timestamp::now(), 86_400_000);
    store.upkeep().prepare_partitions(now.plus_millis(-40 * day)).await.unwrap();
    let old = emit_at(store, ws, EventName::DmSent, now.plus_millis(-40 * day)).await;
    for claimed in claim(store, now, now.plus_millis(60_000), "t").await {
        deliver(store, &claimed, hook.id, now).await;
    }
    db.on_postgres(
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey \
         FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE",
    )
    .await;

    store.migrate().await.unwrap();
    let forgotten = store.upkeep().forget_history(now.plus_millis(-30 * day)).await.unwrap();
    assert!(forgotten.days >= 1, "{forgotten:?}");
    assert!(store.events().payload(old.id).await.unwrap().is_none());
}

// Slow: an old-layout database is built, partitioned and migrated.
/// A database partitioned while `deliveries_by_webhook` was on `(webhook_id)`
/// alone gets it on `(webhook_id, event_id)` at the next `migrate`, valid, on
/// every partition, its rows found through it; a widening cut short (the wide
/// index begun, a partition's part built but not attached) is taken up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_database_gets_the_webhooks_index_with_event_ids_on_migrate() {
    use diesel::sql_types::{BigInt, Bool};
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName, Debug, PartialEq)]
    struct Index {
        #[diesel(sql_type = BigInt)]
        columns: i64,
        #[diesel(sql_type = Bool)]
        valid: bool,
        #[diesel(sql_type = BigInt)]
        parts: i64,
        #[diesel(sql_type = BigInt)]
        partitions: i64,
    }
    let (db, ws, hook) = postgres_with_a_hook().await;
    let store = db.store();
    let (now, day) = (Timestamp::now(), 86_400_000);
    store.upkeep().prepare_partitions(now.plus_millis(-3 * day)).await.unwrap();
    emit_at(store, ws, EventName::DmSent, now.plus_millis(-3 * day)).await;
    emit_at(store, ws, EventName::DmSent, now).await;
    db.on_postgres("DROP INDEX deliveries_by_webhook").await;
    db.on_postgres("CREATE INDEX deliveries_by_webhook ON deliveries (webhook_id)").await;
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    let index = async |conn: &mut AsyncPgConnection| -> Index {
        diesel::sql_query(
            "SELECT CAST(i.indnatts AS BIGINT) AS columns, i.indisvalid AS valid, \
             (SELECT COUNT(*) FROM pg_inherits WHERE inhparent = i.indexrelid) AS parts, \
             (SELECT COUNT(*) FROM pg_inherits \
              WHERE inhparent = 'deliveries'::regclass) AS partitions \
             FROM pg_index AS i WHERE i.indexrelid = 'deliveries_by_webhook'::regclass",
        )
        .get_result(conn)
        .await
        .unwrap()
    };
    let narrow = index(&mut conn).await;
    assert_eq!((narrow.columns, narrow.parts), (1, narrow.partitions), "{narrow:?}");
    // Cut short: the wide index begun, one partition's part built, not attached.
    db.on_postgres(
        "CREATE INDEX deliveries_by_webhook_wide ON ONLY deliveries (webhook_id, event_id)",
    )
    .await;
    db.on_postgres(
        "CREATE INDEX deliveries_default_by_webhook_wide \
         ON deliveries_default (webhook_id, event_id)",
    )
    .await;

    assert!(store.migrate().await.unwrap().is_empty());
    let wide = index(&mut conn).await;
    assert_eq!((wide.columns, wide.valid, wide.parts), (2, true, wide.partitions), "{wide:?}");
    assert!(wide.partitions >= 5, "{wide:?}");
    assert!(db.rows_of_webhook(hook.id).await >= 3, "the webhook and its two deliveries");
    // A day made afterwards gets its part at once; migrating again changes nothing.
    store.upkeep().prepare_partitions(now.plus_millis(-10 * day)).await.unwrap();
    store.migrate().await.unwrap();
    let later = index(&mut conn).await;
    assert_eq!((later.valid, later.parts), (true, later.partitions), "{later:?}");
    assert!(later.partitions > wide.partitions, "{later:?}");
    assert!(store.webhooks().delete(hook.id, Some(ws)).await.unwrap());
    store.upkeep().settle_disabled().await.unwrap();
    assert_eq!(db.rows_of_webhook(hook.id).await, 0);
}

/// A claim's lease stays on its rows' pages (PostgreSQL's heap-only update: no
/// new index entries), for a page's every row leased in one claim: the
/// deliveries' partitions keep room for a second version of each row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_leases_stay_on_their_rows_pages() {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName, Debug, PartialEq)]
    struct Version {
        #[diesel(sql_type = Text)]
        event_id: String,
        #[diesel(sql_type = BigInt)]
        page: i64,
        #[diesel(sql_type = Text)]
        at: String,
    }
    let (db, ws, _) = postgres_with_a_hook().await;
    let store = db.store();
    // More than a whole page of deliveries, all pending.
    const DELIVERIES: u32 = 200;
    for _ in 0..DELIVERIES {
        emit(store, ws, EventName::DmSent).await;
    }
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    let versions = async |conn: &mut AsyncPgConnection| -> Vec<Version> {
        diesel::sql_query(
            "SELECT event_id, (ctid::text::point)[0]::bigint AS page, ctid::text AS at \
             FROM deliveries ORDER BY event_id",
        )
        .load(conn)
        .await
        .unwrap()
    };
    let before = versions(&mut conn).await;
    let pages = |versions: &[Version]| {
        versions.iter().map(|v| (v.event_id.clone(), v.page)).collect::<Vec<_>>()
    };
    assert!(before.iter().any(|v| v.page > 0), "more than one page: {before:?}");

    let now = Timestamp::now();
    let request = ClaimRequest {
        now,
        lease_until: now.plus_millis(60_000),
        limit: DELIVERIES,
        per_webhook: DELIVERIES,
        skip: &[],
        fast: &[],
        lease_token: "t",
    };
    assert_eq!(store.queue().claim(&request).await.unwrap().len(), DELIVERIES as usize);

    let after = versions(&mut conn).await;
    assert!(before.iter().zip(&after).all(|(b, a)| b.at != a.at), "every row leased anew");
    assert_eq!(pages(&after), pages(&before), "each new version on its row's page");
}

/// Partitions of deliveries made before they kept room for a lease (at
/// PostgreSQL's default fillfactor) get it at the next `migrate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_partitions_made_without_room_for_leases_get_it_on_migrate() {
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        partitions: i64,
    }
    let (db, _, _) = postgres_with_a_hook().await;
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    let mut without_room = async || -> i64 {
        let count: Count = diesel::sql_query(
            "SELECT count(*) AS partitions FROM pg_inherits AS i \
             JOIN pg_class AS c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'deliveries'::regclass \
             AND NOT (COALESCE(c.reloptions, '{}') @> ARRAY['fillfactor=45'])",
        )
        .get_result(&mut conn)
        .await
        .unwrap();
        count.partitions
    };
    assert_eq!(without_room().await, 0, "made with room");
    db.on_postgres(
        "DO $$ DECLARE p regclass; BEGIN \
         FOR p IN SELECT inhrelid::regclass FROM pg_inherits \
             WHERE inhparent = 'deliveries'::regclass LOOP \
             EXECUTE format('ALTER TABLE %s RESET (fillfactor)', p); \
         END LOOP; END $$",
    )
    .await;
    assert!(without_room().await >= 2, "today's and the default partition, at least");

    db.store().migrate().await.unwrap();
    assert_eq!(without_room().await, 0);
}

backend_tests!(listeners_are_kept_apart_from_the_worker_and_forgotten_when_idle);

async fn listeners_are_kept_apart_from_the_worker_and_forgotten_when_idle(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let hook = webhook(store, ws, "https://a.example.com/", &[EventName::DmSent]).await.unwrap();
    let (listener, _) = hookline_testdb::create_webhook(
        store,
        ws,
        "https://listener.invalid/",
        &[EventName::DmSent],
        WebhookSource::Listener,
    )
    .await
    .unwrap();
    let payload = EventPayload::new(EventName::DmSent, ws, json!({})).unwrap();
    assert_eq!(record(store, &payload).await.unwrap().len(), 2, "a listener is fanned out to");

    // The worker's claim takes the webhook's delivery, never the listener's.
    let now = Timestamp::now();
    let claimed = store
        .queue()
        .claim(&ClaimRequest {
            now,
            lease_until: now.plus(std::time::Duration::from_secs(30)),
            limit: 10,
            per_webhook: 10,
            skip: &[],
            fast: &[],
            lease_token: "worker",
        })
        .await
        .unwrap();
    let claimed: Vec<WebhookId> = claimed.iter().map(|delivery| delivery.webhook_id).collect();
    assert_eq!(claimed, [hook.id]);
    // The stream's claim takes the listener's, under its attempt's token.
    let streamed = store
        .queue()
        .claim_streamed(listener.id, now, now.plus(std::time::Duration::from_secs(30)), 10)
        .await
        .unwrap();
    assert_eq!(streamed.len(), 1);
    assert_eq!(streamed[0].lease_token, "listener:1");
    let found = store.queue().streamed(listener.id, payload.id, 1).await.unwrap();
    assert_eq!(found.map(|delivery| delivery.event_id), Some(payload.id));
    assert!(store.queue().streamed(listener.id, payload.id, 2).await.unwrap().is_none());

    // Streamed a moment ago: kept; idle past the cut-off: forgotten, with its
    // deliveries; the webhook stays.
    let upkeep = store.upkeep();
    assert_eq!(
        upkeep
            .forget_idle_listeners(now.minus(std::time::Duration::from_secs(60)), 100)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        upkeep
            .forget_idle_listeners(now.plus(std::time::Duration::from_secs(60)), 100)
            .await
            .unwrap(),
        1
    );
    assert!(store.webhooks().get(listener.id).await.unwrap().is_none());
    assert!(store.webhooks().get(hook.id).await.unwrap().is_some());
    let deliveries = store.events().deliveries(payload.id).await.unwrap();
    assert_eq!(deliveries.iter().map(|d| d.webhook_id).collect::<Vec<_>>(), [hook.id]);
}
