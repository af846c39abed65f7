use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::text::label_type;
use crate::{Error, EventName, Host, Result, Timestamp, WebhookId, WebhookUrl, WorkspaceId};

/// A subscription of a URL to some of a workspace's events.
///
/// Holds no secret: the signing secret and the values of its headers are read only
/// by the code that delivers, so a listing cannot leak them by accident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Its id.
    pub id: WebhookId,
    /// The workspace whose events it receives.
    pub workspace_id: WorkspaceId,
    /// Where deliveries are POSTed.
    pub url: WebhookUrl,
    /// Never empty, no duplicates, in the order the subscriber gave them.
    pub events: Vec<EventName>,
    /// Whether events reach it; a disabled webhook's pending deliveries are cancelled.
    pub enabled: bool,
    /// Why it is disabled; `None` while enabled.
    pub disabled_reason: Option<DisabledReason>,
    /// Its label, for people.
    pub description: WebhookDescription,
    /// The names of its own headers ([`WebhookHeaders`](crate::WebhookHeaders)),
    /// in order; their values are secrets, read only to deliver.
    pub header_names: Vec<String>,
    /// Who made it; decides what a `410 Gone` does.
    pub source: WebhookSource,
    /// When it was made.
    pub created_at: Timestamp,
    /// The last change of its URL, events, description or state.
    pub updated_at: Timestamp,
    /// Since when every attempt has failed (a run of failures under way).
    pub failing_since: Option<Timestamp>,
    /// Until when its deliveries rest behind the breaker (its receiver stopped
    /// answering); a time past means the rest is over.
    pub resting_until: Option<Timestamp>,
    /// The unanswered attempts in a row that started that rest.
    pub resting_after: Option<u32>,
}

impl Webhook {
    /// Whether `event` reaches it (when it is enabled).
    pub fn subscribes_to(&self, event: EventName) -> bool {
        self.events.contains(&event)
    }
}

/// Who made a webhook. It decides what a `410 Gone` from the target does: an API
/// webhook belongs to an automation platform that has unsubscribed, and is deleted;
/// a Settings webhook was made by a person, and is only disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookSource {
    /// Made through the public API (an automation platform's REST hook).
    Api,
    /// Made by a person: Settings, the admin API, the CLI.
    Settings,
    /// A developer's `hookline listen`: its deliveries go down a stream, not to
    /// a URL, and it counts against no webhook limit.
    Listener,
}

impl WebhookSource {
    /// Every source.
    pub const ALL: [WebhookSource; 3] = [
        WebhookSource::Api,
        WebhookSource::Settings,
        WebhookSource::Listener,
    ];

    /// `api`, `settings` or `listener`, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookSource::Api => "api",
            WebhookSource::Settings => "settings",
            WebhookSource::Listener => "listener",
        }
    }
}

impl FromStr for WebhookSource {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        WebhookSource::ALL
            .into_iter()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| Error::invalid("webhook source", format!("unknown source `{s}`")))
    }
}

/// Why a webhook is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisabledReason {
    /// By a person (Settings, the admin API, the CLI).
    Manual,
    /// Its target answered `410 Gone` (a Settings webhook; an API one is deleted).
    Gone,
    /// Every attempt failed for the auto-disable period.
    Failing,
}

impl DisabledReason {
    /// Every reason.
    pub const ALL: [DisabledReason; 3] = [
        DisabledReason::Manual,
        DisabledReason::Gone,
        DisabledReason::Failing,
    ];

    /// `manual`, `gone` or `failing`, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledReason::Manual => "manual",
            DisabledReason::Gone => "gone",
            DisabledReason::Failing => "failing",
        }
    }
}

impl FromStr for DisabledReason {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        DisabledReason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| Error::invalid("disabled reason", format!("unknown reason `{s}`")))
    }
}

impl serde::Serialize for DisabledReason {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl serde::Serialize for WebhookSource {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

label_type!(
    /// The label shown in Settings: 1 to 120 characters.
    WebhookDescription,
    "description",
    crate::limits::MAX_WEBHOOK_DESCRIPTION_LEN
);

/// Automation platforms recognised in a `User-Agent`, by a lower-case fragment.
const PLATFORMS: &[(&str, &str)] = &[
    ("zapier", "Zapier"),
    ("integromat", "Make"),
    ("make.com", "Make"),
    ("make/", "Make"),
    ("n8n", "n8n"),
    ("pipedream", "Pipedream"),
    ("ifttt", "IFTTT"),
    ("pabbly", "Pabbly Connect"),
    ("activepieces", "Activepieces"),
    ("workato", "Workato"),
    ("tray.io", "Tray.io"),
    ("power automate", "Power Automate"),
    ("logicapps", "Power Automate"),
];

impl WebhookDescription {
    /// What [`WebhookDescription::parse_or_default`] accepts, but for the length:
    /// a label, or nothing but white space.
    pub const OPTIONAL_PATTERN: &'static str = crate::text::BLANK_OR_LABEL_PATTERN;

    /// The description given, or else the default: the automation platform named in the
    /// caller's `User-Agent`, or else the URL's host. A blank description counts as none.
    pub fn parse_or_default(
        given: Option<&str>,
        user_agent: Option<&str>,
        url: &WebhookUrl,
    ) -> Result<Self> {
        match given {
            Some(text) if !text.trim().is_empty() => Self::parse(text),
            _ => Ok(Self::default_for(user_agent, url)),
        }
    }

    fn default_for(user_agent: Option<&str>, url: &WebhookUrl) -> Self {
        let platform = user_agent.and_then(|agent| {
            let agent = agent.to_ascii_lowercase();
            PLATFORMS
                .iter()
                .find(|(fragment, _)| mentions(&agent, fragment))
                .map(|(_, name)| *name)
        });
        let text = match (platform, url.host()) {
            (Some(name), _) => name.to_owned(),
            (None, Host::Domain(name)) => name.trim_end_matches('.').to_owned(),
            (None, Host::Ip(ip)) => ip.to_string(),
        };
        WebhookDescription(text.chars().take(Self::MAX_CHARS).collect())
    }
}

/// Whether `fragment` starts a word of `agent`: "n8n" in "axios/1.6 n8n/1.30", but not
/// "make/" in "automake/1.16".
fn mentions(agent: &str, fragment: &str) -> bool {
    agent
        .match_indices(fragment)
        .any(|(i, _)| i == 0 || !agent.as_bytes()[i - 1].is_ascii_alphanumeric())
}

/// A webhook's signing secret: `whsec_` and the standard base64 of the key bytes, as
/// the Standard Webhooks scheme writes it. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    const PREFIX: &'static str = "whsec_";

    /// The secret made of `random` (32 bytes from a cryptographic generator).
    pub fn from_random_bytes(random: &[u8; 32]) -> Self {
        WebhookSecret(format!("{}{}", Self::PREFIX, STANDARD.encode(random)))
    }

    /// Accepts `whsec_` and the base64 of 24 to 64 bytes (the scheme's bounds).
    pub fn parse(text: &str) -> Result<Self> {
        let valid = text
            .strip_prefix(Self::PREFIX)
            .and_then(|encoded| STANDARD.decode(encoded).ok())
            .is_some_and(|key| (24..=64).contains(&key.len()));
        if !valid {
            return Err(Error::invalid(
                "webhook secret",
                "expected `whsec_` followed by the base64 of 24 to 64 bytes",
            ));
        }
        Ok(WebhookSecret(text.to_owned()))
    }

    /// The HMAC key: the decoded bytes after `whsec_`.
    pub fn key_bytes(&self) -> Vec<u8> {
        let encoded = &self.0[Self::PREFIX.len()..];
        // Checked on construction.
        STANDARD.decode(encoded).unwrap_or_default()
    }

    /// The secret as text, to show once at creation or to store.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TargetPolicy;

    fn url(text: &str) -> WebhookUrl {
        WebhookUrl::parse(text, TargetPolicy::PublicOnly).unwrap()
    }

    #[test]
    fn secret_round_trips_and_stays_hidden() {
        let secret = WebhookSecret::from_random_bytes(&[42; 32]);
        assert!(secret.expose().starts_with("whsec_"));
        assert_eq!(secret.key_bytes(), vec![42; 32]);
        assert_eq!(WebhookSecret::parse(secret.expose()), Ok(secret.clone()));
        assert!(!format!("{secret:?}").contains(&secret.expose()[6..]));
        for bad in ["", "whsec_", "whsec_!!!!", "sk_AAAA", "whsec_AAAA"] {
            assert!(WebhookSecret::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn description_defaults_to_the_platform_or_the_host() {
        let target = url("https://Hooks.Example.com/x");
        let describe = |given, agent| {
            WebhookDescription::parse_or_default(given, agent, &target)
                .unwrap()
                .to_string()
        };
        assert_eq!(describe(Some("  Orders  "), Some("Zapier")), "Orders");
        assert_eq!(describe(Some("   "), None), "hooks.example.com");
        assert_eq!(describe(None, None), "hooks.example.com");
        assert_eq!(describe(None, Some("curl/8.5.0")), "hooks.example.com");
        assert_eq!(describe(None, Some("automake/1.16")), "hooks.example.com");
        for (agent, platform) in [
            ("Zapier", "Zapier"),
            ("Zapier-Hooks/1.0", "Zapier"),
            ("Mozilla/5.0 (compatible; ZapierBot)", "Zapier"),
            ("Make/production", "Make"),
            ("Integromat/production", "Make"),
            ("n8n", "n8n"),
            ("axios/1.6 n8n/1.30", "n8n"),
            ("Pipedream/1.0 (+https://pipedream.com)", "Pipedream"),
            ("IFTTT-Protocol/v1", "IFTTT"),
        ] {
            assert_eq!(describe(None, Some(agent)), platform, "{agent}");
        }
        let ip = url("https://[2606:4700::1111]/");
        let text = WebhookDescription::parse_or_default(None, None, &ip).unwrap();
        assert_eq!(text.as_str(), "2606:4700::1111");
    }

    #[test]
    fn description_is_bounded() {
        let target = url("https://example.com/");
        let long = "x".repeat(121);
        assert!(WebhookDescription::parse_or_default(Some(&long), None, &target).is_err());
        let host = format!(
            "https://{}.example.com/",
            ["a".repeat(60), "b".repeat(60), "c".repeat(60)].join(".")
        );
        let text = WebhookDescription::parse_or_default(None, None, &url(&host)).unwrap();
        assert_eq!(text.as_str().chars().count(), 120);
    }

    #[test]
    fn sources_round_trip() {
        for source in [WebhookSource::Api, WebhookSource::Settings] {
            assert_eq!(source.as_str().parse::<WebhookSource>(), Ok(source));
        }
        assert!("zapier".parse::<WebhookSource>().is_err());
    }
}
