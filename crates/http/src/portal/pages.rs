//! The portal's pages, as maud templates compiled into the binary. maud escapes
//! every value written into a page, so a description of
//! `<script>alert(1)</script>` is shown as that text.
//!
//! Each page is a function of what it shows; none reads anything itself.

use hookline_app::{CatalogEvent, PortalSession};
use hookline_domain::{
    ApiKeyRecord, ApiKeyStatus, DeliveryAttempt, DisabledReason, EventName, HealthState,
    HealthWindow, Plan, Timestamp, Webhook, WebhookHealth, WebhookSource,
};
use maud::{DOCTYPE, Markup, html};

use crate::portal::forms::{HookForm, RecoverForm};
use crate::portal::health;

/// What every page of a session shows around its content: the session, with
/// its workspace.
pub(crate) struct Frame<'a> {
    pub(crate) session: &'a PortalSession,
    /// When the page is drawn (the app's clock), for "n minutes ago".
    pub(crate) now: Timestamp,
}

/// Which tab a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    Keys,
    Hooks,
    Events,
    Plan,
}

/// A line above a page's content: what a form did, or why it did not.
pub(crate) enum Flash {
    None,
    Done(String),
    Failed(String),
}

impl Frame<'_> {
    /// `/settings/<ws>/`: where every link of the session starts.
    pub(crate) fn base(&self) -> String {
        format!("/settings/{}/", self.session.workspace.id)
    }

    /// The hidden CSRF field every form carries.
    fn csrf(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.session.csrf_token); }
    }

    fn page(&self, tab: Tab, title: &str, flash: &Flash, content: Markup) -> Markup {
        let base = self.base();
        let tabs = [
            (Tab::Keys, "keys", "API keys"),
            (Tab::Hooks, "hooks", "Webhooks"),
            (Tab::Events, "events", "Events"),
            (Tab::Plan, "plan", "Plan"),
        ];
        document(
            &format!(
                "{title} · {} · Settings",
                self.session.workspace.name.as_str()
            ),
            html! {
                header {
                    p.brand { "Settings · " strong { (self.session.workspace.name.as_str()) } }
                    nav aria-label="Settings" {
                        ul {
                            @for (this, path, label) in tabs {
                                li {
                                    @if this == tab {
                                        a href={ (base) (path) } aria-current="page" { (label) }
                                    } @else {
                                        a href={ (base) (path) } { (label) }
                                    }
                                }
                            }
                        }
                    }
                    div.session {
                        span { "Session ends " (time(self.session.expires_at)) }
                        form method="post" action={ (base) "sign-out" } {
                            (self.csrf())
                            button.link type="submit" { "Sign out" }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (flash_line(flash))
                    (content)
                }
            },
        )
    }
}

fn document(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) }
                link rel="stylesheet" href="/settings/assets/portal.css";
                script src="/settings/assets/portal.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                (body)
            }
        }
    }
}

fn flash_line(flash: &Flash) -> Markup {
    html! {
        @match flash {
            Flash::None => {},
            Flash::Done(message) => p.notice role="status" { (message) },
            Flash::Failed(message) => p.error role="alert" { (message) },
        }
    }
}

/// A time in UTC to the minute; the whole timestamp on hover.
fn time(at: Timestamp) -> Markup {
    let full = at.to_string();
    let minute = format!("{} {} UTC", &full[..10], &full[11..16]);
    html! { time datetime=(full) title=(full) { (minute) } }
}

fn optional_time(at: Option<Timestamp>, none: &str) -> Markup {
    match at {
        Some(at) => time(at),
        None => html! { span.muted { (none) } },
    }
}

/// Why keys of this workspace get 403, when they do.
fn plan_refusal(plan: Plan) -> Option<String> {
    (!plan.includes_api()).then(|| {
        format!(
            "This workspace is on the {plan} plan. The API is part of the STUDIO plan, so \
             every request with these keys is refused with 403 Forbidden until the workspace \
             moves to STUDIO. Keys can still be made and revoked."
        )
    })
}

/// The page a link or session that opens nothing gets: it names no workspace.
pub(crate) fn refused() -> Markup {
    document(
        "Settings link not valid",
        html! {
            main #main {
                h1 { "This link cannot open Settings" }
                p {
                    "It has expired, it was ended by signing out, or it is not a valid \
                     Settings link. Links last an hour by default, a day at most, and your \
                     session ends when the link would have."
                }
                p { "Ask for a new link where you got this one." }
            }
        },
    )
}

/// After signing out: the link that opened the session opens nothing now.
pub(crate) fn signed_out() -> Markup {
    document(
        "Signed out of Settings",
        html! {
            main #main {
                h1 { "You are signed out of Settings" }
                p { "The link you came with no longer opens them. Ask for a new link to come back." }
            }
        },
    )
}

/// A page of the portal that does not exist, or an id that is not this
/// workspace's (the two look the same).
pub(crate) fn not_found() -> Markup {
    let text = "There is no such page, key or webhook in this workspace.";
    document(
        "Not found",
        html! { main #main { h1 { "Not found" } p { (text) } } },
    )
}

/// A failure that is not the user's: the database out of reach, or ours.
pub(crate) fn failure(message: &str) -> Markup {
    document(
        "Settings unavailable",
        html! { main #main { h1 { "Settings are unavailable" } p role="alert" { (message) } } },
    )
}

/// The page that sends a browser from the link to the keys page. A page rather
/// than a redirect: the cookie is `SameSite=Strict`, and a redirect that follows
/// a link from another site would arrive without it.
pub(crate) fn opening(to: &str) -> Markup {
    document(
        "Opening Settings",
        html! {
            main #main {
                h1 { "Opening Settings…" }
                p { a #continue href=(to) { "Continue to Settings" } }
            }
        },
    )
}

pub(crate) fn keys(
    frame: &Frame<'_>,
    keys: &[ApiKeyRecord],
    flash: &Flash,
    name_typed: &str,
) -> Markup {
    let base = frame.base();
    let content = html! {
        @if let Some(refusal) = plan_refusal(frame.session.workspace.plan) {
            p.warning { (refusal) " " a href={ (base) "plan" } { "About plans" } }
        }
        p { "Integrations call the API with these keys. A key is shown once, when it is made." }
        @if keys.is_empty() {
            p.muted { "No keys yet." }
        } @else {
            div.table {
                table {
                    caption.visually-hidden { "API keys, newest first" }
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Last used" } th scope="col" { "Created" } th scope="col" { span.visually-hidden { "Actions" } } } }
                    tbody {
                        @for key in keys {
                            tr {
                                th scope="row" { (key.name.as_str()) }
                                td { @match key.status() { ApiKeyStatus::Active => span.badge.ok { "Active" }, ApiKeyStatus::Revoked => span.badge.off { "Revoked" } } }
                                td { (optional_time(key.last_used_at, "Never")) }
                                td { (time(key.created_at)) }
                                td {
                                    @if key.status() == ApiKeyStatus::Active {
                                        form method="post" action={ (base) "keys/" (key.id) "/revoke" }
                                            data-confirm={ "Revoke the key “" (key.name.as_str()) "”? Requests with it are refused (401) from then on; this cannot be undone." } {
                                            (frame.csrf())
                                            button.danger type="submit" aria-label={ "Revoke " (key.name.as_str()) } { "Revoke" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 #create { "Create a key" }
        form.stack method="post" action={ (base) "keys" } {
            (frame.csrf())
            label for="key-name" { "Name" }
            input #key-name type="text" name="name" required maxlength="64" value=(name_typed)
                aria-describedby="key-name-help" autocomplete="off";
            p #key-name-help .help { "Who or what uses it, such as “Zapier”." }
            button type="submit" { "Create key" }
        }
    };
    frame.page(Tab::Keys, "API keys", flash, content)
}

/// A secret shown once, with a copy button.
fn shown_once(id: &str, label: &str, secret: &str) -> Markup {
    html! {
        div.secret {
            label for=(id) { (label) }
            div.copy-row {
                input id=(id) type="text" readonly value=(secret) spellcheck="false" autocomplete="off";
                button type="button" data-copy=(id) { "Copy" }
            }
            p.copied role="status" aria-live="polite" data-copied-for=(id) {}
        }
    }
}

pub(crate) fn key_created(frame: &Frame<'_>, name: &str, key: &str) -> Markup {
    let base = frame.base();
    let content = html! {
        p.warning { "Copy this key now. It is shown only this once: hookline keeps only a hash of it." }
        (shown_once("new-key", &format!("API key “{name}”"), key))
        p { a.button href={ (base) "keys" } { "Done" } }
    };
    frame.page(Tab::Keys, "Key created", &Flash::None, content)
}

/// Where a webhook's deliveries go: its URL, or for a listener the developer's
/// `hookline listen` (its placeholder URL is never called).
fn target(webhook: &Webhook) -> Markup {
    match webhook.source {
        WebhookSource::Listener => html! {
            "hookline listen (listener " (webhook.id.as_listener()) ")"
        },
        _ => html! { (webhook.url.as_str()) },
    }
}

fn source_label(source: WebhookSource) -> &'static str {
    match source {
        WebhookSource::Api => "API (made by an integration)",
        WebhookSource::Settings => "Settings",
        WebhookSource::Listener => "listener (hookline listen)",
    }
}

fn status(webhook: &Webhook) -> Markup {
    html! {
        @if webhook.enabled {
            span.badge.ok { "Enabled" }
        } @else {
            span.badge.off {
                "Disabled"
                @if let Some(reason) = webhook.disabled_reason { " (" (reason.as_str()) ")" }
            }
        }
    }
}

pub(crate) fn hooks(
    frame: &Frame<'_>,
    hooks: &[(Webhook, WebhookHealth)],
    flash: &Flash,
    typed: &HookForm,
) -> Markup {
    let now = frame.now;
    let base = frame.base();
    let content = html! {
        p { "Events of this workspace are sent to these URLs, signed. Webhooks made by integrations through the API are listed too." }
        @if hooks.is_empty() {
            p.muted { "No webhooks yet." }
        } @else {
            div.table {
                table {
                    caption.visually-hidden { "Webhooks, oldest first" }
                    thead { tr { th scope="col" { "URL" } th scope="col" { "Events" } th scope="col" { "Description" } th scope="col" { "Status" } th scope="col" { "Last 24 hours" } th scope="col" { "Last attempt" } th scope="col" { "Source" } } }
                    tbody {
                        @for (hook, health) in hooks {
                            tr {
                                th scope="row" { a.url href={ (base) "hooks/" (hook.id) } { (target(hook)) } }
                                td { (event_list(&hook.events)) }
                                td { (hook.description.as_str()) }
                                td { (status(hook)) br; span.state { (health::state_words(health, now)) } }
                                td { (health::rate_words(health)) @if health.attempts > 0 { br; span.muted { (health.attempts) " attempts" } } }
                                td { (last_attempt(health.last_attempt.as_ref())) }
                                td { (source_label(hook.source)) }
                            }
                        }
                    }
                }
            }
        }
        h2 #create { "Create a webhook" }
        form.stack method="post" action={ (base) "hooks" } {
            (frame.csrf())
            (hook_fields("new", typed, &[]))
            button type="submit" { "Create webhook" }
        }
    };
    frame.page(Tab::Hooks, "Webhooks", flash, content)
}

/// An attempt's time and result, or that there was none.
fn last_attempt(attempt: Option<&DeliveryAttempt>) -> Markup {
    html! {
        @match attempt {
            None => span.muted { "None yet" },
            Some(attempt) => {
                (time(attempt.at)) br;
                @match (attempt.status, &attempt.error) {
                    (Some(status), _) if (200..300).contains(&status) => span.badge.ok { (status) },
                    (Some(status), _) => span.badge.off { (status) },
                    (None, Some(error)) => span.error-text { (error) },
                    (None, None) => span.muted { "—" },
                }
            }
        }
    }
}

fn event_list(events: &[EventName]) -> Markup {
    html! { ul.events { @for event in events { li { code { (event.as_str()) } } } } }
}

/// URL, events, description and headers, as typed (or as stored, on the edit
/// form, where `current_headers` names the headers it has: their values are
/// never shown again).
fn hook_fields(prefix: &str, typed: &HookForm, current_headers: &[String]) -> Markup {
    html! {
        label for={ (prefix) "-url" } { "URL" }
        input id={ (prefix) "-url" } type="url" name="url" required value=(typed.url)
            placeholder="https://hooks.example.com/hookline" aria-describedby={ (prefix) "-url-help" };
        p id={ (prefix) "-url-help" } .help { "An https:// address that receives a POST for each event." }
        fieldset {
            legend { "Events" }
            @for event in EventName::ALL {
                div.check {
                    input id={ (prefix) "-event-" (event.as_str()) } type="checkbox" name="events" value=(event.as_str())
                        checked[typed.events.contains(&event.as_str().to_owned())];
                    label for={ (prefix) "-event-" (event.as_str()) } { code { (event.as_str()) } }
                }
            }
        }
        label for={ (prefix) "-description" } { "Description " span.muted { "(optional)" } }
        input id={ (prefix) "-description" } type="text" name="description" maxlength="120" value=(typed.description);
        label for={ (prefix) "-headers" } { "Headers " span.muted { "(optional)" } }
        textarea id={ (prefix) "-headers" } name="headers" rows="3" spellcheck="false" autocomplete="off"
            placeholder="X-Auth: value" aria-describedby={ (prefix) "-headers-help" } { (typed.headers) }
        p id={ (prefix) "-headers-help" } .help {
            "Sent with every delivery, one " code { "Name: value" } " a line, up to 10 (for a receiver that checks a header, such as n8n's Header Auth). Values are kept secret: they are not shown again."
            @if !current_headers.is_empty() {
                " It has " (current_headers.join(", ")) "; headers typed here replace them, none typed keeps them."
            }
        }
        @if !current_headers.is_empty() {
            div.check {
                input id={ (prefix) "-clear-headers" } type="checkbox" name="clear_headers" value="1" checked[typed.clear_headers];
                label for={ (prefix) "-clear-headers" } { "Remove its headers (unless others are typed above)" }
            }
        }
    }
}

pub(crate) fn hook_created(
    frame: &Frame<'_>,
    webhook: &Webhook,
    secret: &str,
    title: &str,
) -> Markup {
    let base = frame.base();
    let content = html! {
        p.warning { "Copy this signing secret now. It is shown only this once." }
        p { "Receivers check each delivery's " code { "webhook-signature" } " with it (Standard Webhooks)." }
        (shown_once("new-secret", &format!("Signing secret of {}", webhook.url.as_str()), secret))
        p { a.button href={ (base) "hooks/" (webhook.id) } { "Done" } }
    };
    frame.page(Tab::Hooks, title, &Flash::None, content)
}

/// A webhook's page: what it is, its forms, and its attempt log.
pub(crate) struct HookPage<'a> {
    pub(crate) webhook: &'a Webhook,
    /// Its health over the window the page charts.
    pub(crate) health: &'a WebhookHealth,
    pub(crate) attempts: &'a [DeliveryAttempt],
    /// The cursor of the next (older) page of attempts.
    pub(crate) older: Option<&'a str>,
    /// Whether this is a later page (a link back to the newest).
    pub(crate) paged: bool,
    /// The edit form as typed, when it failed; else as stored.
    pub(crate) edit: HookForm,
    pub(crate) recover: RecoverForm,
    pub(crate) test_event: Option<EventName>,
}

pub(crate) fn hook(frame: &Frame<'_>, page: &HookPage<'_>, flash: &Flash) -> Markup {
    let webhook = page.webhook;
    let here = format!("{}hooks/{}", frame.base(), webhook.id);
    let test_event = page.test_event.or(webhook.events.first().copied());
    let health = page.health;
    let now = frame.now;
    let restorable = health.failing_since.is_some()
        && (webhook.enabled || webhook.disabled_reason == Some(DisabledReason::Failing));
    let content = html! {
        p { a href={ (frame.base()) "hooks" } { "← All webhooks" } }
        section aria-labelledby="health" {
            h2 #health { "Health" }
            p.state {
                strong { (health::state_words(health, now)) }
                " · " (health.window.label()) ": " (health::rate_words(health)) " succeeded"
                " · last attempt " (last_attempt(health.last_attempt.as_ref()))
            }
            @if restorable {
                form.inline method="post" action={ (here) "/restore" } {
                    (frame.csrf())
                    p { @if health.state == HealthState::Disabled { "Enable it again and s" } @else { "S" } "end again what failed since its failures began." }
                    button type="submit" { @if health.state == HealthState::Disabled { "Enable and recover" } @else { "Recover failed deliveries" } }
                }
            }
            nav.windows aria-label="Chart window" {
                @for window in HealthWindow::ALL {
                    @if window == health.window {
                        a href={ (here) "?window=" (window.as_str()) } aria-current="page" { (window.label()) }
                    } @else {
                        a href={ (here) "?window=" (window.as_str()) } { (window.label()) }
                    }
                }
            }
            (health::chart(health))
            (health::table(health))
        }
        dl.summary {
            dt { "URL" } dd.url { (target(webhook)) }
            dt { "Events" } dd { (event_list(&webhook.events)) }
            dt { "Description" } dd { (webhook.description.as_str()) }
            dt { "Status" } dd { (status(webhook)) }
            dt { "Source" } dd { (source_label(webhook.source)) }
            dt { "Created" } dd { (time(webhook.created_at)) }
            dt { "Changed" } dd { (time(webhook.updated_at)) }
            dt { "Headers" } dd {
                @if webhook.header_names.is_empty() { span.muted { "None" } }
                @else { (webhook.header_names.join(", ")) " " span.muted { "(values hidden)" } }
            }
        }
        section aria-labelledby="actions" {
            h2 #actions { "Actions" }
            div.actions {
                @if webhook.enabled {
                    form method="post" action={ (here) "/disable" } data-confirm="Disable this webhook? Deliveries waiting for it, retries included, stop." {
                        (frame.csrf()) button type="submit" { "Disable" }
                    }
                } @else {
                    form method="post" action={ (here) "/enable" } {
                        (frame.csrf()) button type="submit" { "Enable" }
                    }
                }
                form method="post" action={ (here) "/rotate" } data-confirm="Rotate the signing secret? The old secret keeps signing beside the new one for a day." {
                    (frame.csrf()) button type="submit" { "Rotate secret" }
                }
                form method="post" action={ (here) "/delete" } data-confirm="Delete this webhook with its attempt log? This cannot be undone." {
                    (frame.csrf()) button.danger type="submit" { "Delete" }
                }
            }
            form.inline method="post" action={ (here) "/test" } {
                (frame.csrf())
                label for="test-event" { "Send a test event" }
                select #test-event name="event" {
                    @for event in EventName::ALL {
                        option value=(event.as_str()) selected[Some(event) == test_event] { (event.as_str()) }
                    }
                }
                button type="submit" { "Send test" }
            }
            form.inline method="post" action={ (here) "/recover" } {
                (frame.csrf())
                label for="recover-since" { "Send again what failed since (UTC)" }
                input #recover-since type="datetime-local" name="since" required value=(page.recover.since);
                button type="submit" { "Recover" }
            }
        }
        section aria-labelledby="log" {
            h2 #log { "Attempt log" }
            @if page.attempts.is_empty() {
                p.muted { @if page.paged { "No older attempts." } @else { "No attempts yet." } }
            } @else {
                div.table {
                    table.attempts {
                        caption.visually-hidden { "Delivery attempts, newest first" }
                        thead { tr { th scope="col" { "Time" } th scope="col" { "Event" } th scope="col" { "Attempt" } th scope="col" { "Result" } th scope="col" { "Duration" } th scope="col" { "Response" } th scope="col" { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for attempt in page.attempts {
                                tr {
                                    td { (time(attempt.at)) }
                                    td { code { (attempt.event.as_str()) } br; span.id { (attempt.event_id) } }
                                    td { (attempt.attempt) }
                                    td {
                                        @match (attempt.status, &attempt.error) {
                                            (Some(status), _) if (200..300).contains(&status) => span.badge.ok { (status) },
                                            (Some(status), _) => span.badge.off { (status) },
                                            (None, Some(error)) => { span.badge.off { "No answer" } br; span.error-text { (error) } },
                                            (None, None) => span.muted { "—" },
                                        }
                                    }
                                    td { (attempt.duration_ms) " ms" }
                                    td {
                                        @match &attempt.response_body {
                                            Some(body) if !body.is_empty() => details { summary { "Show" } pre { (body) } },
                                            _ => span.muted { "—" },
                                        }
                                    }
                                    td {
                                        form method="post" action={ (here) "/resend" } {
                                            (frame.csrf())
                                            input type="hidden" name="event" value=(attempt.event_id);
                                            button type="submit" aria-label={ "Resend " (attempt.event_id) } { "Resend" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            nav.pager aria-label="Attempt log pages" {
                @if page.paged { a href=(here) { "Newest" } }
                @if let Some(cursor) = page.older { a href={ (here) "?before=" (cursor) } { "Older attempts" } }
            }
        }
        // A listener has no URL or headers to edit: its events are `hookline listen`'s.
        @if webhook.source != WebhookSource::Listener {
            section aria-labelledby="edit" {
                h2 #edit { "Edit" }
                form.stack method="post" action=(here) {
                    (frame.csrf())
                    (hook_fields("edit", &page.edit, &webhook.header_names))
                    button type="submit" { "Save changes" }
                }
            }
        }
    };
    frame.page(Tab::Hooks, "Webhook", flash, content)
}

/// The event catalog: what each event means, its fields, its example, and a form
/// to send it as a test to one of the workspace's webhooks.
pub(crate) fn events(
    frame: &Frame<'_>,
    catalog: &[CatalogEvent],
    hooks: &[Webhook],
    flash: &Flash,
) -> Markup {
    let base = frame.base();
    let content = html! {
        p { "What each event means, the fields its payload's " code { "data" } " carries, and the payload a sample gives before it has happened. Automation platforms read the same catalog from " code { "GET /api/v1/events" } "." }
        @for entry in catalog {
            @let name = entry.event.as_str();
            @let id = format!("example-{}", name.replace('.', "-"));
            section.event aria-labelledby={ "event-" (name.replace('.', "-")) } {
                h2 id={ "event-" (name.replace('.', "-")) } { code { (name) } }
                p { (entry.event.description()) }
                h3 { "Fields of " code { "data" } }
                (fields(&entry.schema["properties"]["data"]))
                div.secret {
                    label for=(id) { "Example payload" }
                    div.copy-row {
                        textarea id=(id) readonly rows="10" spellcheck="false" { (pretty(&entry.example.to_json())) }
                        button type="button" data-copy=(id) { "Copy" }
                    }
                    p.copied role="status" aria-live="polite" data-copied-for=(id) {}
                }
                @if hooks.is_empty() {
                    p.muted { "Make a webhook to send this event to it as a test." }
                } @else {
                    form.inline method="post" action={ (base) "events/test" } {
                        (frame.csrf())
                        input type="hidden" name="event" value=(name);
                        label for={ "test-" (id) } { "Send a test to" }
                        select id={ "test-" (id) } name="hook" {
                            @for hook in hooks {
                                option value=(hook.id) { (hook.description.as_str()) " (" (hook.url.as_str()) ")" }
                            }
                        }
                        button type="submit" { "Send test" }
                    }
                }
            }
        }
    };
    frame.page(Tab::Events, "Events", flash, content)
}

/// The fields a schema describes, nested, with their types.
fn fields(schema: &serde_json::Value) -> Markup {
    html! {
        @if let Some(properties) = schema["properties"].as_object() {
            ul.fields {
                @for (name, field) in properties {
                    li {
                        code { (name) } " "
                        span.muted { (field["type"].as_str().unwrap_or("value")) }
                        @if field["properties"].is_object() { (fields(field)) }
                    }
                }
            }
        }
    }
}

/// A JSON text, indented for reading.
fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| json.to_owned())
}

pub(crate) fn plan(frame: &Frame<'_>) -> Markup {
    let plan = frame.session.workspace.plan;
    let content = html! {
        p { "This workspace is on the " strong { (plan.as_str()) } " plan." }
        @match plan_refusal(plan) {
            Some(refusal) => p.warning { (refusal) },
            None => p.notice { "The API is part of this plan: its keys may call it." },
        }
        div.table {
            table {
                caption { "What each plan includes" }
                thead { tr { th scope="col" { "Plan" } th scope="col" { "API" } } }
                tbody {
                    @for each in Plan::ALL {
                        tr {
                            th scope="row" { (each.as_str()) @if each == plan { " (this workspace)" } }
                            td { @if each.includes_api() { "Included" } @else { "Not included: keys get 403" } }
                        }
                    }
                }
            }
        }
        p { "Plans are changed by the product's back office, not on this page." }
    };
    frame.page(Tab::Plan, "Plan", &Flash::None, content)
}
