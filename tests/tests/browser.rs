//! The Settings portal's journey in real headless Chromium, driven over WebDriver
//! (chromedriver), once per backend: open the link, see the keys and webhooks,
//! make a key and copy it once, revoke it (the API answers 401), make a webhook,
//! send a test event and see its attempt, rotate the secret, disable the webhook,
//! and an expired link refused; the pages at 375 px wide.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them;
//! `HOOKLINE_CHROMIUM` and `HOOKLINE_CHROMEDRIVER` name other binaries). With
//! `HOOKLINE_PORTAL_SCREENSHOTS=docs/portal`, the SQLite run writes a screenshot of
//! each page there (the README shows them).
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

mod harness;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use hookline_domain::EventName;
use hookline_testdb::TestDb;
use hookline_testdb::{Backend, backend_tests};
use hookline_tests::{Receiver, Reply as Answer, free_addr};
use hyper::{Method, StatusCode};
use serde_json::json;
use tokio::process::{Child, Command};

use crate::harness::{Admin, attempts, delivery};

fn binary(variable: &str, default: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(variable).unwrap_or_else(|_| default.to_owned()));
    assert!(
        path.exists(),
        "{} not found: install Debian's chromium and chromium-driver (`.ci/run` does), or set {variable}",
        path.display()
    );
    path
}

/// chromedriver on a free port, and a headless Chromium session through it with
/// its own empty profile, which end with this value.
struct Browser {
    client: Client,
    _driver: Child,
    _profile: tempfile_dir::Dir,
}

/// An empty directory, removed on drop (Chromium's `--user-data-dir`).
mod tempfile_dir {
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);

    impl Dir {
        pub(crate) fn new() -> Dir {
            let path = std::env::temp_dir().join(format!(
                "hookline-chromium-{}-{}",
                std::process::id(),
                hookline_tests::unique()
            ));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Browser {
    async fn start() -> Browser {
        let chromium = binary("HOOKLINE_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = binary("HOOKLINE_CHROMEDRIVER", "/usr/bin/chromedriver");
        let port = free_addr().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let profile = tempfile_dir::Dir::new();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": chromium,
                // The machine's closed network: no background connections.
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.0.display()),
                ],
            }),
        );
        let webdriver = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&webdriver)
                .await
            {
                Ok(client) => break client,
                // chromedriver is still starting.
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("no WebDriver session from chromedriver: {error}"),
            }
        };
        Browser { client, _driver: driver, _profile: profile }
    }

    /// The element, once the page has it (at most 10 s).
    async fn element(&self, locator: Locator<'_>) -> Element {
        match self.client.wait().at_most(Duration::from_secs(10)).for_element(locator).await {
            Ok(element) => element,
            Err(error) => {
                let url = self.client.current_url().await.unwrap();
                let page = self.source().await;
                panic!("{locator:?} not found ({error}) at {url}:\n{page}");
            }
        }
    }

    async fn text(&self, css: &str) -> String {
        self.element(Locator::Css(css)).await.text().await.unwrap()
    }

    async fn click(&self, css: &str) {
        self.element(Locator::Css(css)).await.click().await.unwrap();
    }

    /// Clicks a button whose form asks first, and accepts.
    async fn click_confirmed(&self, css: &str) -> String {
        self.click(css).await;
        let question = self.client.get_alert_text().await.unwrap();
        self.client.accept_alert().await.unwrap();
        question
    }

    async fn fill(&self, css: &str, text: &str) {
        let field = self.element(Locator::Css(css)).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Waits until the page's path (and query) is `path`.
    async fn at(&self, path: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let url = self.client.current_url().await.unwrap();
            let here = match url.query() {
                Some(query) => format!("{}?{query}", url.path()),
                None => url.path().to_owned(),
            };
            if here == path {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "at {here}, not {path}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn source(&self) -> String {
        self.client.source().await.unwrap()
    }

    /// Writes a screenshot of the page when asked to (and on one backend only).
    async fn screenshot(&self, backend: Backend, name: &str) {
        let Ok(dir) = std::env::var("HOOKLINE_PORTAL_SCREENSHOTS") else {
            return;
        };
        if backend != Backend::Sqlite {
            return;
        }
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        // The whole page: the window made as tall as the document (the window's
        // frame takes some of it, so measure again until the page fits).
        let (width, height) = self.client.get_window_size().await.unwrap();
        let width = u32::try_from(width).unwrap();
        for _ in 0..4 {
            let sizes = self
                .client
                .execute(
                    "return [document.documentElement.scrollHeight, window.innerHeight];",
                    vec![],
                )
                .await
                .unwrap();
            let (page, inner) = (sizes[0].as_u64().unwrap(), sizes[1].as_u64().unwrap());
            if inner >= page {
                break;
            }
            let (_, outer) = self.client.get_window_size().await.unwrap();
            let taller = u32::try_from(outer + page - inner).unwrap();
            self.client.set_window_size(width, taller).await.unwrap();
        }
        let png = self.client.screenshot().await.unwrap();
        self.client.set_window_size(width, u32::try_from(height).unwrap()).await.unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// The chart's accessible name; it is an image to assistive technology.
    async fn chart_label(&self) -> String {
        let chart = self.element(Locator::Css("figure.chart svg")).await;
        assert_eq!(chart.attr("role").await.unwrap().as_deref(), Some("img"));
        chart.attr("aria-label").await.unwrap().unwrap()
    }

    async fn close(self) {
        self.client.close().await.unwrap();
    }
}

/// The status of `GET /api/v1/me` with `key`.
async fn api_status(admin: &Admin, key: &str) -> StatusCode {
    let authorization = format!("Bearer {key}");
    Admin::exchange(
        admin.public,
        Method::GET,
        "/api/v1/me",
        &[("authorization", &authorization)],
        String::new(),
    )
    .await
    .0
}

backend_tests!(the_settings_journey_in_chromium);

// Slow: a real Chromium walks every page of the journey.
async fn the_settings_journey_in_chromium(db: TestDb) {
    let backend = db.backend();
    let receiver = Receiver::start().await;
    let admin = Admin::delivering(db, delivery(&receiver, 2)).await;
    let ws = admin.workspace("STUDIO").await;
    // What the workspace has before its owner arrives: a key, and a webhook an
    // integration made through the API.
    admin.post(&format!("/admin/v1/workspaces/{ws}/keys"), json!({"name": "Make"})).await;
    let ci = admin.post(&format!("/admin/v1/workspaces/{ws}/keys"), json!({"name": "n8n"})).await;
    let ci_key = ci.body["data"]["key"].as_str().unwrap().to_owned();
    let made = Admin::exchange(
        admin.public,
        Method::POST,
        "/api/v1/hooks",
        &[
            ("authorization", &format!("Bearer {ci_key}")),
            ("content-type", "application/json"),
            ("user-agent", "Zapier"),
        ],
        json!({"url": "https://hooks.zapier.com/hooks/catch/1/abc/", "event": "link.clicked"})
            .to_string(),
    )
    .await;
    assert_eq!(made.0, StatusCode::CREATED);
    let link = admin
        .post(&format!("/admin/v1/workspaces/{ws}/portal"), json!({}))
        .await
        .body["data"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = format!("/settings/{ws}/");
    let browser = Browser::start().await;

    // 1. The link opens the keys page.
    browser.client.goto(&link).await.unwrap();
    browser.at(&format!("{base}keys")).await;
    // 2. The keys and the webhooks.
    let keys = browser.text("main table").await;
    assert!(keys.contains("Make") && keys.contains("n8n") && keys.contains("Active"), "{keys}");
    browser.screenshot(backend, "keys").await;
    browser.click("nav a[href$='/hooks']").await;
    browser.at(&format!("{base}hooks")).await;
    let hooks = browser.text("main table").await;
    assert!(
        hooks.contains("https://hooks.zapier.com/hooks/catch/1/abc/")
            && hooks.contains("Zapier")
            && hooks.contains("API"),
        "{hooks}"
    );
    browser.screenshot(backend, "webhooks").await;

    // 3. A key, shown once, copied.
    browser.click("nav a[href$='/keys']").await;
    browser.fill("#key-name", "Zapier").await;
    browser.click("form[action$='/keys'] button[type=submit]").await;
    let field = browser.element(Locator::Id("new-key")).await;
    let key = field.prop("value").await.unwrap().unwrap();
    assert!(key.starts_with("hl_") && key.len() == 46, "{key}");
    browser.click("button[data-copy='new-key']").await;
    assert_eq!(browser.text("[data-copied-for='new-key']").await, "Copied to the clipboard.");
    assert_eq!(browser.text("button[data-copy='new-key']").await, "Copied");
    let copied =
        browser.client.execute("return window.getSelection().toString();", vec![]).await.unwrap();
    assert_eq!(copied.as_str(), Some(key.as_str()), "the copied text is the key");
    browser.screenshot(backend, "key-created").await;
    assert_eq!(api_status(&admin, &key).await, StatusCode::OK);
    browser.click("a.button").await;
    browser.at(&format!("{base}keys")).await;
    assert!(!browser.source().await.contains(&key), "the key is not shown again");
    browser.client.refresh().await.unwrap();
    assert!(!browser.source().await.contains(&key));

    // 4. Revoked: the API answers 401 on its next request.
    let question = browser.click_confirmed("button[aria-label='Revoke Zapier']").await;
    assert!(question.contains("Revoke the key “Zapier”"), "{question}");
    browser.at(&format!("{base}keys?notice=key-revoked")).await;
    assert!(browser.text(".notice").await.contains("revoked"));
    assert_eq!(api_status(&admin, &key).await, StatusCode::UNAUTHORIZED);
    assert!(browser.text("main table").await.contains("Revoked"));

    // 5. A webhook, to the test receiver.
    browser.click("nav a[href$='/hooks']").await;
    browser.fill("#new-url", &receiver.url("/portal")).await;
    browser.click("#new-event-dm\\.sent").await;
    browser.fill("#new-description", "<script>alert(1)</script>").await;
    browser.click("form[action$='/hooks'] button[type=submit]").await;
    let secret_field = browser.element(Locator::Id("new-secret")).await;
    let secret = secret_field.prop("value").await.unwrap().unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    browser.click("a.button").await;
    let hook = admin.get(&format!("/admin/v1/workspaces/{ws}/hooks")).await.body["data"][1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let here = format!("{base}hooks/{hook}");
    browser.at(&here).await;
    assert_eq!(
        browser.text("dl.summary dd:nth-of-type(3)").await,
        "<script>alert(1)</script>",
        "escaped, shown as text"
    );

    // 6. A test event, delivered, in the attempt log.
    browser
        .element(Locator::Id("test-event"))
        .await
        .select_by_value("contact.created")
        .await
        .unwrap();
    browser.click("form[action$='/test'] button").await;
    browser.at(&format!("{here}?notice=test-sent")).await;
    let received = receiver.wait_for(1, Duration::from_secs(20)).await;
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&received[0].body, &received[0].headers)
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let log = loop {
        browser.client.goto(&format!("http://{}{here}", admin.public)).await.unwrap();
        let log = browser.text("section[aria-labelledby='log']").await;
        if log.contains("contact.created") || tokio::time::Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(log.contains("contact.created") && log.contains("200") && log.contains(" ms"), "{log}");
    browser.screenshot(backend, "webhook").await;

    // 6b. Its health: the last 24 hours charted, and the week one click away.
    assert_eq!(browser.chart_label().await, "Last 24 hours: 1 attempts, 1 succeeded, 0 failed");
    assert!(browser.text("p.state").await.starts_with("Healthy"));
    browser.click("nav.windows a[href$='window=7d']").await;
    browser.at(&format!("{here}?window=7d")).await;
    assert_eq!(browser.chart_label().await, "Last 7 days: 1 attempts, 1 succeeded, 0 failed");
    browser.click("details.numbers summary").await;
    assert!(browser.text("details.numbers table").await.contains("Succeeded"));

    // 6c. The catalog, and a test sent from it that the receiver refuses
    // three times (every attempt the schedule allows): the webhook is failing.
    receiver.script("/portal", [Answer::status(500), Answer::status(500), Answer::status(500)]);
    browser.click("nav a[href$='/events']").await;
    browser.at(&format!("{base}events")).await;
    let catalog = browser.text("main").await;
    for event in EventName::ALL {
        assert!(catalog.contains(event.description()), "{event}: {catalog}");
    }
    browser.screenshot(backend, "events").await;
    browser
        .element(Locator::Id("test-example-bio-subscribed"))
        .await
        .select_by_value(&hook)
        .await
        .unwrap();
    browser.click("section[aria-labelledby='event-bio-subscribed'] form button").await;
    browser.at(&format!("{base}events?notice=catalog-test-sent")).await;
    attempts(&admin, &hook, 4).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        browser.client.goto(&format!("http://{}{here}", admin.public)).await.unwrap();
        if browser.text("p.state").await.starts_with("Failing since") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never failing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(browser.chart_label().await, "Last 24 hours: 4 attempts, 1 succeeded, 3 failed");
    browser.screenshot(backend, "webhook-failing").await;

    // 6d. One action recovers it: the failed delivery goes again, and succeeds.
    browser.click("form[action$='/restore'] button").await;
    browser.at(&format!("{here}?notice=restored&n=1")).await;
    let log = attempts(&admin, &hook, 5).await;
    assert_eq!(
        (log[0]["event"].as_str(), log[0]["status"].as_u64()),
        (Some("bio.subscribed"), Some(200))
    );
    browser.client.goto(&format!("http://{}{here}", admin.public)).await.unwrap();
    assert!(browser.text("p.state").await.starts_with("Healthy"));
    assert_eq!(browser.chart_label().await, "Last 24 hours: 5 attempts, 2 succeeded, 3 failed");
    browser.screenshot(backend, "webhook-health").await;

    // 7. The secret rotated: a new one, shown once.
    browser.click_confirmed("form[action$='/rotate'] button").await;
    let rotated =
        browser.element(Locator::Id("new-secret")).await.prop("value").await.unwrap().unwrap();
    assert!(rotated.starts_with("whsec_") && rotated != secret);
    browser.screenshot(backend, "secret-rotated").await;
    browser.click("a.button").await;
    browser.at(&here).await;

    // 8. Disabled.
    browser.click_confirmed("form[action$='/disable'] button").await;
    browser.at(&format!("{here}?notice=disabled")).await;
    assert_eq!(browser.text("dl.summary dd:nth-of-type(4)").await, "Disabled (manual)");
    let stored = admin.get(&format!("/admin/v1/hooks/{hook}")).await.body;
    assert_eq!(stored["data"]["enabled"], false);

    // The plan, and the pages at 375 px: nothing wider than the screen.
    browser.click("nav a[href$='/plan']").await;
    assert!(browser.text("main").await.contains("STUDIO"));
    browser.screenshot(backend, "plan").await;
    browser.client.set_window_size(375, 800).await.unwrap();
    for path in [
        "keys",
        "hooks",
        &format!("hooks/{hook}"),
        &format!("hooks/{hook}?window=7d"),
        "events",
        "plan",
    ] {
        browser.client.goto(&format!("http://{}{base}{path}", admin.public)).await.unwrap();
        let width = browser
            .client
            .execute("return [document.documentElement.scrollWidth, window.innerWidth];", vec![])
            .await
            .unwrap();
        let (scroll, inner) = (width[0].as_u64().unwrap(), width[1].as_u64().unwrap());
        let overflowing = concat!(
            "return Array.from(document.querySelectorAll('*'))",
            ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 12)",
            ".map(e => e.tagName + '.' + e.className + '#' + e.id + ' '",
            " + Math.round(e.getBoundingClientRect().right));"
        );
        let wide = browser.client.execute(overflowing, vec![]).await.unwrap();
        assert!(scroll <= inner, "{path} is {scroll} px wide at {inner} px: {wide}");
    }
    browser.client.goto(&format!("http://{}{base}hooks/{hook}", admin.public)).await.unwrap();
    browser.screenshot(backend, "webhook-375px").await;
    browser.client.set_window_size(1280, 900).await.unwrap();

    // Keyboard: Tab reaches the skip link first, then the tabs.
    browser.client.goto(&format!("http://{}{base}keys", admin.public)).await.unwrap();
    let body = browser.client.find(Locator::Css("body")).await.unwrap();
    body.send_keys(&Key::Tab.to_string()).await.unwrap();
    let focused = browser.client.active_element().await.unwrap();
    assert_eq!(focused.text().await.unwrap(), "Skip to content");
    focused.send_keys(&Key::Tab.to_string()).await.unwrap();
    let next = browser.client.active_element().await.unwrap();
    assert_eq!(next.text().await.unwrap(), "API keys");
    next.send_keys(&Key::Tab.to_string()).await.unwrap();
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys(&Key::Enter.to_string())
        .await
        .unwrap();
    browser.at(&format!("{base}hooks")).await;

    // 9. An expired link is refused, and shows nothing of the workspace.
    let short = admin
        .post(&format!("/admin/v1/workspaces/{ws}/portal"), json!({"ttlSeconds": 1}))
        .await
        .body["data"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    admin.db.clock().advance(Duration::from_secs(2));
    browser.client.goto(&short).await.unwrap();
    assert_eq!(browser.text("h1").await, "This link cannot open Settings");
    let refused = browser.source().await;
    assert!(!refused.contains(&ws) && !refused.contains("Acme"), "{refused}");
    browser.screenshot(backend, "expired-link").await;

    browser.close().await;
    admin.stop().await;
}
