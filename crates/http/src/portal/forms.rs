//! Form bodies and queries (`application/x-www-form-urlencoded`) read into what
//! the use cases take. A form that fails keeps what was typed: the page shows it again.

use hookline_app::{AppConfig, WebhookInput, WebhookSpec, WebhookUpdate};
use hookline_domain::{Timestamp, WebhookHeaders};

/// A form's fields (or a query's parameters) in order; a name may repeat
/// (checkboxes).
#[derive(Debug, Default)]
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    pub(crate) fn parse(body: &[u8]) -> Fields {
        Fields(
            form_urlencoded::parse(body)
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`, or "".
    pub(crate) fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(field, _)| field == name)
            .map_or("", |(_, value)| value.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(field, _)| field == name)
            .map(|(_, value)| value.clone())
            .collect()
    }
}

/// The webhook form (create and edit), as typed.
#[derive(Debug, Clone, Default)]
pub(crate) struct HookForm {
    pub(crate) url: String,
    pub(crate) events: Vec<String>,
    pub(crate) description: String,
    /// The webhook's own headers, one `Name: value` a line; blank on the edit
    /// form keeps the ones it has (their values are never shown again).
    pub(crate) headers: String,
    /// The edit form's "remove its headers".
    pub(crate) clear_headers: bool,
}

impl HookForm {
    pub(crate) fn typed(fields: &Fields) -> HookForm {
        HookForm {
            url: fields.get("url").trim().to_owned(),
            events: fields.all("events"),
            description: fields.get("description").to_owned(),
            headers: fields.get("headers").to_owned(),
            clear_headers: !fields.get("clear_headers").is_empty(),
        }
    }

    /// The form of a stored webhook, to edit.
    pub(crate) fn of(webhook: &hookline_domain::Webhook) -> HookForm {
        HookForm {
            url: webhook.url.as_str().to_owned(),
            events: webhook
                .events
                .iter()
                .map(|event| event.as_str().to_owned())
                .collect(),
            description: webhook.description.as_str().to_owned(),
            headers: String::new(),
            clear_headers: false,
        }
    }

    /// What was typed, as the use case takes it: headers typed replace the
    /// webhook's, "remove" with none typed leaves it none, else they stay.
    fn input(&self) -> hookline_app::Result<WebhookInput<'_>> {
        let lines: Vec<(&str, &str)> = self
            .headers
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(WebhookHeaders::parse_line)
            .collect::<Result<_, _>>()?;
        let headers = (!lines.is_empty() || self.clear_headers).then_some(lines);
        Ok(WebhookInput {
            url: Some(("url", &self.url)),
            events: self.events.iter().map(String::as_str).collect(),
            description: Some(&self.description),
            headers,
            enabled: None,
            user_agent: None,
        })
    }

    /// A new webhook; a blank description becomes the URL's host.
    pub(crate) fn spec(&self, config: &AppConfig) -> hookline_app::Result<WebhookSpec> {
        config.webhook_spec(&self.input()?)
    }

    /// Every field set as typed (headers only when typed or removed); a blank
    /// description becomes the URL's host.
    pub(crate) fn update(&self, config: &AppConfig) -> hookline_app::Result<WebhookUpdate> {
        let input = self.input()?;
        let headers_changed = input.headers.is_some();
        let spec = config.webhook_spec(&input)?;
        Ok(WebhookUpdate {
            url: Some(spec.url),
            events: Some(spec.events),
            description: Some(spec.description),
            headers: headers_changed.then_some(spec.headers),
            enabled: None,
        })
    }
}

/// The recover form: a time in UTC, as a `datetime-local` input sends it
/// (`2026-11-24T09:00`), or a whole ISO 8601 time.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecoverForm {
    pub(crate) since: String,
}

impl RecoverForm {
    /// A day before `now`, to the minute: the form's first value.
    pub(crate) fn a_day_before(now: Timestamp) -> RecoverForm {
        let day_before = now.plus_millis(-86_400_000).to_string();
        RecoverForm {
            since: day_before[..16].to_owned(),
        }
    }

    pub(crate) fn since(&self) -> Result<Timestamp, String> {
        let text = self.since.trim();
        let iso = match text.len() {
            16 => format!("{text}:00Z"),
            19 => format!("{text}Z"),
            _ => text.to_owned(),
        };
        Timestamp::parse_iso(&iso).map_err(|_| {
            format!(
                "“{text}” is not a time: give a date and time in UTC, such as 2026-11-24 09:00."
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use hookline_domain::EventName;

    use super::*;

    #[test]
    fn fields_keep_repeats_and_decode() {
        let fields = Fields::parse(
            b"url=https%3A%2F%2Fa.example&events=dm.sent&events=link.clicked&description=a+b",
        );
        assert_eq!(fields.get("url"), "https://a.example");
        assert_eq!(fields.get("missing"), "");
        let form = HookForm::typed(&fields);
        assert_eq!(form.events, ["dm.sent", "link.clicked"]);
        assert_eq!(form.description, "a b");
        let spec = form.spec(&AppConfig::default()).unwrap();
        assert_eq!(spec.events, [EventName::DmSent, EventName::LinkClicked]);
    }

    #[test]
    fn a_webhook_form_says_what_is_wrong() {
        let no_events = HookForm {
            url: "https://a.example".into(),
            ..HookForm::default()
        };
        let error = no_events.spec(&AppConfig::default()).unwrap_err();
        assert!(error.to_string().contains("at least one event"), "{error}");
        let http = HookForm {
            url: "http://a.example".into(),
            events: vec!["dm.sent".into()],
            ..HookForm::default()
        };
        assert!(
            http.spec(&AppConfig::default())
                .unwrap_err()
                .to_string()
                .contains("https")
        );
    }

    #[test]
    fn recover_reads_utc_times() {
        let minute = RecoverForm {
            since: "2026-11-24T09:00".into(),
        };
        assert_eq!(
            minute.since().unwrap().to_string(),
            "2026-11-24T09:00:00.000Z"
        );
        let full = RecoverForm {
            since: "2026-11-24T09:00:00Z".into(),
        };
        assert_eq!(
            full.since().unwrap().to_string(),
            "2026-11-24T09:00:00.000Z"
        );
        assert!(
            RecoverForm {
                since: "yesterday".into()
            }
            .since()
            .is_err()
        );
        let now = Timestamp::parse_iso("2026-11-24T09:30:12Z").unwrap();
        assert_eq!(RecoverForm::a_day_before(now).since, "2026-11-23T09:30");
    }
}
