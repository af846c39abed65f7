//! The Settings portal's security rules over HTTP, once per backend: the link and
//! its session cookie, expired, forged and other workspaces' tokens, CSRF and
//! `Origin`, the headers of every answer, escaping, a key shown once, and forms
//! that fail keeping what was typed. (The journey through the pages in a real
//! browser is `browser.rs`.)
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use hookline_app::{App, AppConfig};
use hookline_delivery::Outbox;
use hookline_domain::PublicUrl;
use hookline_http::{HttpConfig, Server};
use hookline_store::{Store, StoreConfig};
use hookline_testdb::{TestDb, backend_tests};
use hyper::{HeaderMap, Method, StatusCode};
use serde_json::json;

use hookline_tests::Receiver;

use crate::harness::{Admin, assert_error, attempts, delivery};

/// An open portal session on a workspace of `admin`.
struct Session {
    workspace: String,
    cookie: String,
    csrf: String,
    origin: String,
}

struct Page {
    status: StatusCode,
    headers: HeaderMap,
    html: String,
}

impl Page {
    fn assert_secure(&self) {
        let header = |name: &str| self.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        let policy = header("content-security-policy").expect("a CSP on every answer");
        assert!(
            !policy.contains("unsafe-inline") && policy.contains("default-src 'none'"),
            "{policy}"
        );
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
        assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
    }
}

async fn page(
    admin: &Admin,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Page {
    let (status, headers, bytes) =
        Admin::exchange(admin.public, method, path, headers, body.to_owned()).await;
    let page = Page { status, headers, html: String::from_utf8(bytes.to_vec()).unwrap() };
    page.assert_secure();
    page
}

/// A link to `ws`'s portal, through the admin API.
async fn link(admin: &Admin, ws: &str, ttl: Option<u64>) -> String {
    let body = ttl.map_or(json!({}), |ttl| json!({"ttlSeconds": ttl}));
    let reply = admin.post(&format!("/admin/v1/workspaces/{ws}/portal"), body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["data"]["url"].as_str().unwrap().to_owned()
}

/// The path and query of a link (`http://host/settings/…`).
fn path_of(url: &str) -> &str {
    let after_scheme = url.split_once("://").unwrap().1;
    &after_scheme[after_scheme.find('/').unwrap()..]
}

/// The value of `name="csrf"` in a page.
fn csrf_of(html: &str) -> String {
    let at =
        html.find(r#"name="csrf" value=""#).expect("a CSRF field") + r#"name="csrf" value=""#.len();
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}

async fn open(admin: &Admin, ws: &str) -> Session {
    let url = link(admin, ws, None).await;
    let opened = page(admin, Method::GET, path_of(&url), &[], "").await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.html);
    Session::of(admin, ws, &opened).await
}

impl Session {
    /// The session a link's page (`opened`) started: its cookie, and the form
    /// token of a page read with it.
    async fn of(admin: &Admin, ws: &str, opened: &Page) -> Session {
        let set_cookie = opened.headers["set-cookie"].to_str().unwrap().to_owned();
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        let keys =
            page(admin, Method::GET, &format!("/settings/{ws}/keys"), &[("cookie", &cookie)], "")
                .await;
        assert_eq!(keys.status, StatusCode::OK, "{}", keys.html);
        Session {
            workspace: ws.to_owned(),
            cookie,
            csrf: csrf_of(&keys.html),
            origin: format!("http://{}", admin.public),
        }
    }

    async fn get(&self, admin: &Admin, path: &str) -> Page {
        page(
            admin,
            Method::GET,
            &format!("/settings/{}/{path}", self.workspace),
            &[("cookie", &self.cookie)],
            "",
        )
        .await
    }

    /// A form as the portal's page sends it: this session's cookie, origin and
    /// CSRF token, then `fields`.
    async fn post(&self, admin: &Admin, path: &str, fields: &str) -> Page {
        let body = format!("csrf={}&{fields}", self.csrf);
        self.post_as(admin, path, &[("origin", &self.origin)], &body).await
    }

    async fn post_as(
        &self,
        admin: &Admin,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Page {
        let mut all = vec![
            ("cookie", self.cookie.as_str()),
            ("content-type", "application/x-www-form-urlencoded"),
        ];
        all.extend_from_slice(headers);
        page(admin, Method::POST, &format!("/settings/{}/{path}", self.workspace), &all, body).await
    }
}

fn assert_refused(page: &Page, workspace: &str) {
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.html);
    assert!(page.html.contains("This link cannot open Settings"), "{}", page.html);
    for secret in [workspace, "Acme", "csrf", "hookline_portal"] {
        assert!(!page.html.contains(secret), "the refusal shows {secret}: {}", page.html);
    }
}

/// Percent-encodes a form value.
fn encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

backend_tests!(
    a_link_opens_a_session_cookie_that_ends_with_it,
    a_link_that_expired_is_forged_or_of_another_workspace_reveals_nothing,
    another_workspaces_keys_and_webhooks_are_not_found_and_stay_as_they_are,
    every_form_needs_this_sessions_csrf_token_and_origin,
    a_key_is_shown_once_and_user_text_is_escaped,
    a_form_that_fails_says_why_keeps_what_was_typed_and_changes_nothing,
    a_webhooks_headers_are_typed_kept_hidden_replaced_and_removed,
    health_shows_on_the_list_and_a_failing_webhook_recovers_in_one_action,
    the_events_page_lists_the_catalog_and_sends_a_test_to_a_chosen_webhook,
    a_link_made_on_one_server_opens_on_another_of_the_same_database,
    signing_out_ends_the_session_and_its_link,
    the_attempt_log_is_paged_newest_first,
    the_cookie_is_secure_when_the_public_url_is_not_plain_loopback
);

async fn a_link_opens_a_session_cookie_that_ends_with_it(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let made =
        admin.post(&format!("/admin/v1/workspaces/{ws}/portal"), json!({"ttlSeconds": 600})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let url = made.body["data"]["url"].as_str().unwrap();
    let origin = format!("http://{}", admin.public);
    assert!(url.starts_with(&format!("{origin}/settings/{ws}/open?token=hlportal_")), "{url}");
    let expires =
        hookline_domain::Timestamp::parse_iso(made.body["data"]["expiresAt"].as_str().unwrap())
            .unwrap();
    let left = expires.unix_millis() - hookline_domain::Timestamp::now().unix_millis();
    assert!((595_000..=600_000).contains(&left), "{left}");
    for (body, says) in [
        (json!({"ttlSeconds": 0}), "ttlSeconds"),
        (json!({"ttlSeconds": 86_401}), "ttlSeconds"),
        (json!({"ttlSeconds": "1h"}), "ttlSeconds"),
        (json!({"ttl": 5}), "`ttl`"),
    ] {
        assert_error(
            &admin.post(&format!("/admin/v1/workspaces/{ws}/portal"), body).await,
            StatusCode::BAD_REQUEST,
            says,
        );
    }
    assert_error(
        &admin.post("/admin/v1/workspaces/ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R/portal", json!({})).await,
        StatusCode::NOT_FOUND,
        "no workspace",
    );

    let opened = page(&admin, Method::GET, path_of(url), &[], "").await;
    assert_eq!(opened.status, StatusCode::OK);
    let cookie = opened.headers["set-cookie"].to_str().unwrap();
    for part in ["HttpOnly", "SameSite=Strict", &format!("Path=/settings/{ws}/")] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let max_age: i64 =
        cookie.split("Max-Age=").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
    assert!((590..=600).contains(&max_age), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http on loopback: no Secure ({cookie})");
    assert_eq!(opened.headers["cache-control"], "no-store");
    // A page of the session, and the assets, embedded.
    let session = open(&admin, &ws).await;
    assert!(session.get(&admin, "hooks").await.html.contains("Create a webhook"));
    let css = page(&admin, Method::GET, "/settings/assets/portal.css", &[], "").await;
    assert_eq!(
        (css.status, css.headers["content-type"].to_str().unwrap()),
        (StatusCode::OK, "text/css; charset=utf-8")
    );
    let js = page(&admin, Method::GET, "/settings/assets/portal.js", &[], "").await;
    assert_eq!(js.status, StatusCode::OK);
    admin.stop().await;
}

async fn a_link_that_expired_is_forged_or_of_another_workspace_reveals_nothing(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let other = admin.workspace("STUDIO").await;
    // Expired: the link, and the session it opened.
    let short = link(&admin, &ws, Some(1)).await;
    let opened = page(&admin, Method::GET, path_of(&short), &[], "").await;
    let cookie =
        opened.headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    admin.db.clock().advance(Duration::from_secs(2));
    assert_refused(&page(&admin, Method::GET, path_of(&short), &[], "").await, &ws);
    assert_refused(
        &page(&admin, Method::GET, &format!("/settings/{ws}/keys"), &[("cookie", &cookie)], "")
            .await,
        &ws,
    );
    // Forged: a well-formed token no link has, a malformed one, none.
    let forged = format!("/settings/{ws}/open?token=hlportal_{}", "A".repeat(43));
    assert_refused(&page(&admin, Method::GET, &forged, &[], "").await, &ws);
    assert_refused(
        &page(&admin, Method::GET, &format!("/settings/{ws}/open?token=%3Cscript%3E"), &[], "")
            .await,
        &ws,
    );
    assert_refused(&page(&admin, Method::GET, &format!("/settings/{ws}/open"), &[], "").await, &ws);
    assert_refused(&page(&admin, Method::GET, &format!("/settings/{ws}/keys"), &[], "").await, &ws);
    assert_refused(
        &page(
            &admin,
            Method::GET,
            &format!("/settings/{ws}/keys"),
            &[("cookie", "hookline_portal=hl_nope")],
            "",
        )
        .await,
        &ws,
    );
    // Another workspace's link and cookie.
    let theirs = link(&admin, &other, None).await;
    let token = theirs.split("token=").nth(1).unwrap();
    assert_refused(
        &page(&admin, Method::GET, &format!("/settings/{ws}/open?token={token}"), &[], "").await,
        &ws,
    );
    let their_session = open(&admin, &other).await;
    assert_refused(
        &page(
            &admin,
            Method::GET,
            &format!("/settings/{ws}/keys"),
            &[("cookie", &their_session.cookie)],
            "",
        )
        .await,
        &ws,
    );
    // An admin token or an API key is not a portal token.
    assert_refused(
        &page(&admin, Method::GET, &format!("/settings/{ws}/open?token={}", admin.token), &[], "")
            .await,
        &ws,
    );
    admin.stop().await;
}

async fn another_workspaces_keys_and_webhooks_are_not_found_and_stay_as_they_are(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let other = admin.workspace("STUDIO").await;
    let key = admin
        .post(&format!("/admin/v1/workspaces/{other}/keys"), json!({"name": "theirs"}))
        .await
        .body["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hook = admin
        .post(
            &format!("/admin/v1/workspaces/{other}/hooks"),
            json!({"url": "https://example.com/in", "event": "dm.sent"}),
        )
        .await
        .body["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mine = open(&admin, &ws).await;
    assert_eq!(mine.get(&admin, &format!("hooks/{hook}")).await.status, StatusCode::NOT_FOUND);
    for path in [
        format!("keys/{key}/revoke"),
        format!("hooks/{hook}/delete"),
        format!("hooks/{hook}/disable"),
        format!("hooks/{hook}/rotate"),
    ] {
        let answer = mine.post(&admin, &path, "").await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}: {}", answer.html);
        assert!(!answer.html.contains(&other), "{path}");
    }
    let edit = mine
        .post(&admin, &format!("hooks/{hook}"), "url=https%3A%2F%2Fevil.example%2F&events=dm.sent")
        .await;
    assert_eq!(edit.status, StatusCode::NOT_FOUND);
    assert_eq!(
        admin.get(&format!("/admin/v1/workspaces/{other}/keys")).await.body["data"][0]["status"],
        "active"
    );
    let theirs = admin.get(&format!("/admin/v1/hooks/{hook}")).await.body;
    assert_eq!(
        (theirs["data"]["enabled"].as_bool(), theirs["data"]["url"].as_str()),
        (Some(true), Some("https://example.com/in"))
    );
    admin.stop().await;
}

async fn every_form_needs_this_sessions_csrf_token_and_origin(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let session = open(&admin, &ws).await;
    let origin = session.origin.clone();
    let refused = [
        (vec![("origin", origin.as_str())], "name=a".to_owned()),
        (vec![("origin", origin.as_str())], "csrf=0000&name=b".to_owned()),
        (vec![], format!("csrf={}&name=c", session.csrf)),
        (vec![("origin", "https://evil.example")], format!("csrf={}&name=d", session.csrf)),
        (vec![("origin", "null")], format!("csrf={}&name=e", session.csrf)),
        (
            vec![("origin", "null"), ("sec-fetch-site", "cross-site")],
            format!("csrf={}&name=g", session.csrf),
        ),
        (
            vec![("origin", "https://evil.example"), ("sec-fetch-site", "same-origin")],
            format!("csrf={}&name=h", session.csrf),
        ),
    ];
    for (headers, body) in refused {
        let answer = session.post_as(&admin, "keys", &headers, &body).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{headers:?} {body}: {}", answer.html);
        assert!(answer.html.contains("nothing was changed"));
    }
    // Another session's token does not pass either.
    let second = open(&admin, &ws).await;
    assert_ne!(second.csrf, session.csrf);
    let crossed = session
        .post_as(&admin, "keys", &[("origin", &origin)], &format!("csrf={}&name=f", second.csrf))
        .await;
    assert_eq!(crossed.status, StatusCode::FORBIDDEN);
    assert_eq!(
        admin.get(&format!("/admin/v1/workspaces/{ws}/keys")).await.body["data"],
        json!([]),
        "nothing was made"
    );
    let made = session.post(&admin, "keys", "name=Zapier").await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.html);
    // What a browser sends under `Referrer-Policy: no-referrer`.
    let body = format!("csrf={}&name=Make", session.csrf);
    let no_referrer = session
        .post_as(&admin, "keys", &[("origin", "null"), ("sec-fetch-site", "same-origin")], &body)
        .await;
    assert_eq!(no_referrer.status, StatusCode::OK, "{}", no_referrer.html);
    admin.stop().await;
}

async fn a_key_is_shown_once_and_user_text_is_escaped(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("FREE").await;
    let session = open(&admin, &ws).await;
    let made = session.post(&admin, "keys", &format!("name={}", encoded("<b>Zap</b>"))).await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.html);
    assert_eq!(made.headers["cache-control"], "no-store");
    let at = made.html.find("value=\"hl_").unwrap() + "value=\"".len();
    let key = &made.html[at..at + 46];
    assert!(made.html.contains("&lt;b&gt;Zap&lt;/b&gt;") && !made.html.contains("<b>Zap"));
    let keys = session.get(&admin, "keys").await;
    assert!(keys.html.contains("&lt;b&gt;Zap&lt;/b&gt;"));
    assert!(!keys.html.contains(key), "the key is never shown again");
    assert!(keys.html.contains("403 Forbidden") && keys.html.contains("FREE"), "why keys get 403");
    let plan = session.get(&admin, "plan").await;
    assert!(plan.html.contains("STUDIO plan"), "{}", plan.html);

    let script = "<script>alert(1)</script>";
    let (hook, _) = admin
        .hook(
            &ws,
            json!({"url": "https://example.com/in", "event": "dm.sent", "description": script}),
        )
        .await;
    for page in
        [session.get(&admin, "hooks").await, session.get(&admin, &format!("hooks/{hook}")).await]
    {
        assert!(page.html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{}", page.html);
        assert!(!page.html.contains(script));
    }
    admin.stop().await;
}

async fn a_form_that_fails_says_why_keeps_what_was_typed_and_changes_nothing(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let session = open(&admin, &ws).await;
    let typed = "url=http%3A%2F%2Fhooks.example.com%2Fin&events=dm.sent&events=link.clicked&description=Ops+%3Cteam%3E";
    let failed = session.post(&admin, "hooks", typed).await;
    assert_eq!(failed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        failed.html.contains("role=\"alert\"") && failed.html.contains("https://"),
        "{}",
        failed.html
    );
    assert!(failed.html.contains("value=\"http://hooks.example.com/in\""));
    assert!(failed.html.contains("value=\"Ops &lt;team&gt;\""));
    assert!(failed.html.contains("value=\"link.clicked\" checked"), "{}", failed.html);
    let no_events = session.post(&admin, "hooks", "url=https%3A%2F%2Fhooks.example.com%2Fin").await;
    assert!(no_events.html.contains("at least one event"), "{}", no_events.html);
    assert_eq!(
        admin.get(&format!("/admin/v1/workspaces/{ws}/hooks")).await.body["data"],
        json!([])
    );
    let blank = session.post(&admin, "keys", "name=+").await;
    assert_eq!(blank.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", blank.html);

    let made = session
        .post(&admin, "hooks", "url=https%3A%2F%2Fhooks.example.com%2Fin&events=dm.sent")
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.html);
    assert!(made.html.contains("whsec_"));
    let hook = admin.get(&format!("/admin/v1/workspaces/{ws}/hooks")).await.body["data"][0].clone();
    assert_eq!(
        (hook["source"].as_str(), hook["description"].as_str()),
        (Some("settings"), Some("hooks.example.com"))
    );
    let id = hook["id"].as_str().unwrap();
    let recover = session.post(&admin, &format!("hooks/{id}/recover"), "since=last+week").await;
    assert_eq!(recover.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        recover.html.contains("value=\"last week\"") && recover.html.contains("is not a time"),
        "{}",
        recover.html
    );
    let saved = session
        .post(
            &admin,
            &format!("hooks/{id}"),
            "url=https%3A%2F%2Fhooks.example.com%2Fv2&events=dm.failed&description=v2",
        )
        .await;
    assert_eq!(
        (saved.status, saved.headers["location"].to_str().unwrap()),
        (StatusCode::SEE_OTHER, format!("/settings/{ws}/hooks/{id}?notice=saved").as_str())
    );
    assert!(
        session
            .get(&admin, &format!("hooks/{id}?notice=saved"))
            .await
            .html
            .contains("Changes saved.")
    );
    admin.stop().await;
}

async fn a_webhooks_headers_are_typed_kept_hidden_replaced_and_removed(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let session = open(&admin, &ws).await;
    let hooks = format!("/admin/v1/workspaces/{ws}/hooks");
    let bad = session
        .post(
            &admin,
            "hooks",
            "url=https%3A%2F%2Fhooks.example.com%2Fin&events=dm.sent&headers=Host%3A+evil",
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.html.contains("Host is set by hookline"), "{}", bad.html);
    assert!(bad.html.contains("Host: evil</textarea>"), "what was typed stays: {}", bad.html);
    assert_eq!(admin.get(&hooks).await.body["data"], json!([]));
    let form = concat!(
        "url=https%3A%2F%2Fhooks.example.com%2Fin&events=dm.sent",
        "&headers=X-Auth%3A+portal-secret%0D%0AX-Tenant%3A+acme"
    );
    let made = session.post(&admin, "hooks", form).await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.html);
    let hook = admin.get(&hooks).await.body["data"][0].clone();
    assert_eq!(hook["headers"], json!({"X-Auth": "••••", "X-Tenant": "••••"}));
    let id = hook["id"].as_str().unwrap().to_owned();
    let shown = session.get(&admin, &format!("hooks/{id}")).await;
    assert!(
        shown.html.contains("X-Auth, X-Tenant") && !shown.html.contains("portal-secret"),
        "{}",
        shown.html
    );
    // Saved with the headers box blank: kept. Typed: replaced. Removed: none.
    let fields = "url=https%3A%2F%2Fhooks.example.com%2Fin&events=dm.sent";
    session.post(&admin, &format!("hooks/{id}"), fields).await;
    assert_eq!(
        admin.get(&format!("/admin/v1/hooks/{id}")).await.body["data"]["headers"],
        json!({"X-Auth": "••••", "X-Tenant": "••••"})
    );
    session.post(&admin, &format!("hooks/{id}"), &format!("{fields}&headers=X-Key%3A+k")).await;
    assert_eq!(
        admin.get(&format!("/admin/v1/hooks/{id}")).await.body["data"]["headers"],
        json!({"X-Key": "••••"})
    );
    session.post(&admin, &format!("hooks/{id}"), &format!("{fields}&clear_headers=1")).await;
    assert!(
        admin.get(&format!("/admin/v1/hooks/{id}")).await.body["data"].get("headers").is_none()
    );
    admin.stop().await;
}

async fn health_shows_on_the_list_and_a_failing_webhook_recovers_in_one_action(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/in", [hookline_tests::Reply::status(500)]);
    let admin = Admin::delivering(db, delivery(&receiver, 0)).await;
    let ws = admin.workspace("STUDIO").await;
    let session = open(&admin, &ws).await;
    let (hook, _) = admin.hook(&ws, json!({"url": receiver.url("/in"), "event": "dm.sent"})).await;
    let quiet = session.get(&admin, "hooks").await;
    assert!(
        quiet.html.contains("Healthy")
            && quiet.html.contains("No attempts")
            && quiet.html.contains("None yet"),
        "{}",
        quiet.html
    );
    admin
        .app
        .ingest(ws.parse().unwrap(), hookline_domain::EventName::DmSent, json!({}), None)
        .await
        .unwrap();
    attempts(&admin, &hook, 1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let page = loop {
        let page = session.get(&admin, &format!("hooks/{hook}")).await;
        if page.html.contains("Failing since") {
            break page;
        }
        assert!(tokio::time::Instant::now() < deadline, "never failing: {}", page.html);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        page.html.contains(r#"aria-label="Last 24 hours: 1 attempts, 0 succeeded, 1 failed""#),
        "{}",
        page.html
    );
    assert!(
        page.html.contains("<caption>Last 24 hours: 1 attempts, 0 succeeded, 1 failed</caption>")
    );
    assert!(page.html.contains("Recover failed deliveries"));
    let listed = session.get(&admin, "hooks").await;
    assert!(
        listed.html.contains("0.0%") && listed.html.contains("Failing since"),
        "{}",
        listed.html
    );
    let week = session.get(&admin, &format!("hooks/{hook}?window=7d")).await;
    assert!(
        week.html.contains(r#"aria-label="Last 7 days: 1 attempts, 0 succeeded, 1 failed""#),
        "{}",
        week.html
    );

    // One action: what failed goes again (the receiver answers 200 now), and
    // the run of failures ends.
    let restored = session.post(&admin, &format!("hooks/{hook}/restore"), "").await;
    assert_eq!(restored.status, StatusCode::SEE_OTHER, "{}", restored.html);
    assert_eq!(
        restored.headers["location"].to_str().unwrap(),
        format!("/settings/{ws}/hooks/{hook}?notice=restored&n=1")
    );
    let log = attempts(&admin, &hook, 2).await;
    assert_eq!(log[0]["status"].as_u64(), Some(200));
    // The run of failures ends just after the attempt is recorded (its own
    // statement): wait for the page to say so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = session.get(&admin, &format!("hooks/{hook}")).await;
        if !page.html.contains("Failing since") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still failing: {}", page.html);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = session.post(&admin, &format!("hooks/{hook}/restore"), "").await;
    assert_eq!(
        again.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "nothing to recover once healthy: {}",
        again.html
    );
    admin.stop().await;
}

async fn the_events_page_lists_the_catalog_and_sends_a_test_to_a_chosen_webhook(db: TestDb) {
    let receiver = Receiver::start().await;
    let admin = Admin::delivering(db, delivery(&receiver, 0)).await;
    let ws = admin.workspace("STUDIO").await;
    let session = open(&admin, &ws).await;
    let none = session.get(&admin, "events").await;
    assert_eq!(none.status, StatusCode::OK);
    assert!(none.html.contains("Make a webhook to send this event to it as a test."));
    for event in hookline_domain::EventName::ALL {
        assert!(
            none.html.contains(event.description().replace('\'', "&#39;").as_str())
                || none.html.contains(event.description()),
            "{event}"
        );
    }
    assert!(none.html.contains("maria.rossi@example.com"), "examples shown");
    let (hook, _) = admin.hook(&ws, json!({"url": receiver.url("/in"), "event": "dm.sent"})).await;
    let page = session.get(&admin, "events").await;
    assert!(page.html.contains(&format!(r#"<option value="{hook}">"#)), "{}", page.html);
    let sent =
        session.post(&admin, "events/test", &format!("event=bio.subscribed&hook={hook}")).await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.html);
    let log = attempts(&admin, &hook, 1).await;
    assert_eq!(log[0]["event"], "bio.subscribed", "any event, to this webhook");
    let bad = session
        .post(&admin, "events/test", "event=dm.read&hook=wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R")
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    admin.stop().await;
}

async fn a_link_made_on_one_server_opens_on_another_of_the_same_database(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    // A second server, with its own pool on the same database: a replica.
    let store = Store::connect(&StoreConfig::new(admin.db.url())).await.unwrap();
    let app = App::new(&store, Outbox::new(store.events()), AppConfig::default());
    let config = HttpConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ..HttpConfig::default()
    };
    let replica = Server::bind(config, app, store.key_check(), store.admin_tokens()).await.unwrap();
    let replica_addr = replica.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(replica.run(async {
        let _ = stopped.await;
    }));

    let url = link(&admin, &ws, None).await;
    let (status, headers, _) =
        Admin::exchange(replica_addr, Method::GET, path_of(&url), &[], String::new()).await;
    assert_eq!(status, StatusCode::OK, "the replica knows the link");
    let cookie = headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let keys =
        page(&admin, Method::GET, &format!("/settings/{ws}/keys"), &[("cookie", &cookie)], "")
            .await;
    assert_eq!(keys.status, StatusCode::OK, "and the first server its session");
    let (status, _, _) = Admin::exchange(
        replica_addr,
        Method::GET,
        &format!("/settings/{ws}/keys"),
        &[("cookie", &cookie)],
        String::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let _ = stop.send(());
    served.await.unwrap();
    admin.stop().await;
}

async fn signing_out_ends_the_session_and_its_link(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let url = link(&admin, &ws, None).await;
    let opened = page(&admin, Method::GET, path_of(&url), &[], "").await;
    let session = Session::of(&admin, &ws, &opened).await;
    let other = open(&admin, &ws).await;
    let out = session.post(&admin, "sign-out", "").await;
    assert_eq!(out.status, StatusCode::OK, "{}", out.html);
    assert!(out.html.contains("signed out"));
    let cleared = out.headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("hookline_portal=;")
            && cleared.contains("Max-Age=0")
            && cleared.contains(&format!("Path=/settings/{ws}/")),
        "{cleared}"
    );
    assert_refused(&session.get(&admin, "keys").await, &ws);
    assert_refused(&page(&admin, Method::GET, path_of(&url), &[], "").await, &ws);
    assert_eq!(
        other.get(&admin, "keys").await.status,
        StatusCode::OK,
        "another link's session goes on"
    );
    admin.stop().await;
}

// Slow: enough attempts for several pages are made and recorded.
async fn the_attempt_log_is_paged_newest_first(db: TestDb) {
    let receiver = Receiver::start().await;
    let admin = Admin::delivering(db, delivery(&receiver, 1)).await;
    let ws = admin.workspace("STUDIO").await;
    let (hook, _) = admin.hook(&ws, json!({"url": receiver.url("/log"), "event": "dm.sent"})).await;
    let mut events = Vec::new();
    for _ in 0..21 {
        let sent =
            admin.post(&format!("/admin/v1/hooks/{hook}/test"), json!({"event": "dm.sent"})).await;
        events.push(sent.body["data"]["eventId"].as_str().unwrap().to_owned());
        // One at a time, so that the log's order is the order sent.
        attempts(&admin, &hook, events.len()).await;
    }
    let session = open(&admin, &ws).await;
    let first = session.get(&admin, &format!("hooks/{hook}")).await;
    let rows = |html: &str| html.matches("aria-label=\"Resend evt_").count();
    assert_eq!(rows(&first.html), 20);
    let newest = first.html.find(&format!("Resend {}", events[20])).unwrap();
    let older = first.html.find(&format!("Resend {}", events[19])).unwrap();
    assert!(newest < older, "newest first");
    assert!(!first.html.contains(&format!("Resend {}", events[0])));
    let at = first.html.find("?before=").expect("a link to older attempts");
    let cursor = &first.html[at + "?before=".len()..];
    let cursor = &cursor[..cursor.find('"').unwrap()];
    let second = session.get(&admin, &format!("hooks/{hook}?before={cursor}")).await;
    assert_eq!(rows(&second.html), 1);
    assert!(
        second.html.contains(&format!("Resend {}", events[0])) && second.html.contains(">Newest<")
    );
    assert!(!second.html.contains("?before="), "the oldest page links no further");
    // A cursor that is not one shows the newest page.
    assert_eq!(rows(&session.get(&admin, &format!("hooks/{hook}?before=nonsense")).await.html), 20);
    // Resend one event from the log: a new attempt of it.
    let resent = session
        .post(&admin, &format!("hooks/{hook}/resend"), &format!("event={}", events[0]))
        .await;
    assert_eq!(resent.status, StatusCode::SEE_OTHER, "{}", resent.html);
    let log = attempts(&admin, &hook, 22).await;
    assert_eq!(log[0]["eventId"].as_str(), Some(events[0].as_str()));
    admin.stop().await;
}

async fn the_cookie_is_secure_when_the_public_url_is_not_plain_loopback(db: TestDb) {
    let admin =
        Admin::with_public_url(db, PublicUrl::parse("https://settings.example.com").unwrap()).await;
    let ws = admin.workspace("STUDIO").await;
    let url = link(&admin, &ws, None).await;
    assert!(
        url.starts_with(&format!("https://settings.example.com/settings/{ws}/open?token=")),
        "{url}"
    );
    let opened = page(&admin, Method::GET, path_of(&url), &[], "").await;
    assert!(opened.headers["set-cookie"].to_str().unwrap().ends_with("; Secure"));
    // Forms are taken only from that origin.
    let session = Session::of(&admin, &ws, &opened).await;
    assert_eq!(session.post(&admin, "keys", "name=a").await.status, StatusCode::FORBIDDEN);
    let from_public = Session { origin: "https://settings.example.com".to_owned(), ..session };
    assert_eq!(from_public.post(&admin, "keys", "name=a").await.status, StatusCode::OK);
    admin.stop().await;
}

#[tokio::test]
async fn unknown_pages_and_methods_answer_in_the_portals_words() {
    let admin = Admin::start(TestDb::new(hookline_testdb::Backend::Sqlite).await).await;
    let missing = page(&admin, Method::GET, "/settings/nope", &[], "").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.html.contains("Not found"));
    let wrong =
        page(&admin, Method::DELETE, "/settings/ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R/keys", &[], "").await;
    assert_eq!(
        (wrong.status, wrong.headers["allow"].to_str().unwrap()),
        (StatusCode::METHOD_NOT_ALLOWED, "GET, POST")
    );
    let bad_ws = page(&admin, Method::GET, "/settings/not-a-workspace/keys", &[], "").await;
    assert_eq!(bad_ws.status, StatusCode::NOT_FOUND);
    admin.stop().await;
}

backend_tests!(a_listener_is_listed_as_hookline_listen_with_its_log_and_nothing_to_edit);

async fn a_listener_is_listed_as_hookline_listen_with_its_log_and_nothing_to_edit(db: TestDb) {
    let admin = Admin::start(db).await;
    let ws = admin.workspace("STUDIO").await;
    let id: hookline_domain::WorkspaceId = ws.parse().unwrap();
    let listener = admin.app.create_listener(id, &[]).await.unwrap().webhook;
    let session = open(&admin, &ws).await;
    let list = session.get(&admin, "hooks").await;
    assert_eq!(list.status, StatusCode::OK);
    let shown = format!("hookline listen (listener {})", listener.id.as_listener());
    assert!(list.html.contains(&shown), "{}", list.html);
    assert!(!list.html.contains("listener.invalid"), "the placeholder URL is not shown");
    let own = session.get(&admin, &format!("hooks/{}", listener.id)).await;
    assert_eq!(own.status, StatusCode::OK);
    assert!(own.html.contains(&shown));
    assert!(own.html.contains("Attempt log"));
    assert!(!own.html.contains("Save changes"), "nothing to edit");
    admin.stop().await;
}
