use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::text::label_type;
use crate::{Error, EventId, Result, Timestamp, WorkspaceId};

label_type!(
    /// An emit's `Idempotency-Key`: 1 to 255 characters. The same key for the same
    /// workspace within a day answers the first event again.
    IdempotencyKey,
    "Idempotency-Key",
    255
);

impl IdempotencyKey {
    /// How long a key answers its workspace's first event again: a day.
    pub const WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
}

/// The seven events the product emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventName {
    /// `dm.sent`: an automation sent a DM.
    DmSent,
    /// `dm.failed`: an automation's DM could not be sent.
    DmFailed,
    /// `link.clicked`: a contact clicked a tracked link.
    LinkClicked,
    /// `contact.created`: a new contact wrote for the first time.
    ContactCreated,
    /// `contact.email_captured`: a contact gave an e-mail address.
    ContactEmailCaptured,
    /// `bio.subscribed`: someone subscribed through the bio page.
    BioSubscribed,
    /// `bio.unsubscribed`: a bio subscriber unsubscribed.
    BioUnsubscribed,
}

impl EventName {
    /// Every event, in the catalog's order.
    pub const ALL: [EventName; 7] = [
        EventName::DmSent,
        EventName::DmFailed,
        EventName::LinkClicked,
        EventName::ContactCreated,
        EventName::ContactEmailCaptured,
        EventName::BioSubscribed,
        EventName::BioUnsubscribed,
    ];

    /// The names as one human-readable list, for error messages.
    pub fn list() -> String {
        EventName::ALL.map(EventName::as_str).join(", ")
    }

    /// The event's name, as delivered (`dm.sent`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventName::DmSent => "dm.sent",
            EventName::DmFailed => "dm.failed",
            EventName::LinkClicked => "link.clicked",
            EventName::ContactCreated => "contact.created",
            EventName::ContactEmailCaptured => "contact.email_captured",
            EventName::BioSubscribed => "bio.subscribed",
            EventName::BioUnsubscribed => "bio.unsubscribed",
        }
    }

    /// Checks `data` against the shape this event promises its receivers.
    ///
    /// `contact.email_captured` has a shape fixed by the specification and is checked
    /// field by field; the other six accept any JSON object (their documented shapes
    /// are examples, not yet a contract).
    pub fn validate_data(self, data: &Map<String, Value>) -> Result<()> {
        if self == EventName::ContactEmailCaptured {
            validate_email_captured(data)?;
        }
        Ok(())
    }
}

impl FromStr for EventName {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        EventName::ALL
            .into_iter()
            .find(|event| event.as_str() == s)
            .ok_or_else(|| Error::UnknownEvent(s.to_owned()))
    }
}

impl fmt::Display for EventName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for EventName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The events a webhook subscribes to, from the names a caller gave (`event` and
/// `events` of the API, or repeated `--event` flags): duplicates dropped, first-seen
/// order kept, at least one required.
pub fn subscribed_events<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Vec<EventName>> {
    let mut events = Vec::new();
    for name in names {
        let event: EventName = name.parse()?;
        if !events.contains(&event) {
            events.push(event);
        }
    }
    if events.is_empty() {
        return Err(Error::invalid("events", "at least one event is required"));
    }
    Ok(events)
}

/// One occurrence of an event, exactly as a webhook receives it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventPayload {
    /// Its id: the `webhook-id` of every delivery of it.
    pub id: EventId,
    /// What happened.
    pub event: EventName,
    /// The workspace it happened in.
    pub workspace_id: WorkspaceId,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// What the event says, of the shape the event catalog gives for it.
    pub data: Map<String, Value>,
}

impl EventPayload {
    /// A new occurrence of `event` in `workspace_id`, now. `data` must be a JSON object
    /// of the event's shape.
    pub fn new(event: EventName, workspace_id: WorkspaceId, data: Value) -> Result<Self> {
        let Value::Object(data) = data else {
            return Err(Error::invalid("data", "must be a JSON object"));
        };
        event.validate_data(&data)?;
        Ok(EventPayload {
            id: EventId::generate(),
            event,
            workspace_id,
            occurred_at: Timestamp::now(),
            data,
        })
    }

    /// The body of a delivery. Computed once at emit and stored: every delivery and
    /// every retry sends (and signs) these same bytes.
    pub fn to_json(&self) -> String {
        // A struct of strings and a JSON map: serialising it cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The fields of `data.contact` that `contact.email_captured` requires, each a
/// non-empty string.
pub const CONTACT_FIELDS: [&str; 6] = [
    "id",
    "igUserId",
    "username",
    "email",
    "accountId",
    "automationId",
];

fn validate_email_captured(data: &Map<String, Value>) -> Result<()> {
    let Some(contact) = data.get("contact") else {
        return Err(Error::invalid("data", "`contact` is required"));
    };
    let Value::Object(contact) = contact else {
        return Err(Error::invalid("data", "`contact` must be an object"));
    };
    for field in CONTACT_FIELDS {
        match contact.get(field) {
            Some(Value::String(value)) if !value.is_empty() => {}
            Some(Value::String(_)) => {
                return Err(Error::invalid(
                    "data",
                    format!("`contact.{field}` is empty"),
                ));
            }
            Some(_) => {
                return Err(Error::invalid(
                    "data",
                    format!("`contact.{field}` must be a string"),
                ));
            }
            None => {
                return Err(Error::invalid(
                    "data",
                    format!("`contact.{field}` is required"),
                ));
            }
        }
    }
    if let Some(Value::String(email)) = contact.get("email")
        && !is_email_address(email)
    {
        return Err(Error::invalid(
            "data",
            format!("`contact.email` {email:?} is not an e-mail address"),
        ));
    }
    Ok(())
}

/// Addresses that `is_email_address` accepts, as a regular expression for the
/// OpenAPI documents: dot-separated atoms of the usual characters before the `@`,
/// host labels and a top-level domain of letters after it, short enough for any
/// length rule. A subset: what it matches is accepted.
pub const EMAIL_PATTERN: &str = "^[A-Za-z0-9_+-]{1,20}(?:\\.[A-Za-z0-9_+-]{1,20}){0,2}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,20}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,20}[A-Za-z0-9])?){0,3}\\.[A-Za-z]{2,10}$";

/// An address as people type it into a capture form: `local@domain.tld`, ASCII,
/// within the lengths of RFC 5321. Quoted local parts and IP-literal domains are
/// refused: no capture form produces them.
fn is_email_address(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let local_ok = (1..=64).contains(&local.len())
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = domain.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()));
    text.len() <= 254 && local_ok && domain_ok
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_round_trip() {
        for event in EventName::ALL {
            assert_eq!(event.as_str().parse::<EventName>(), Ok(event));
        }
        for bad in ["", "dm", "DM.SENT", "dm.sent ", "contact.email-captured"] {
            assert!(bad.parse::<EventName>().is_err(), "{bad:?}");
        }
        let err = "dm.read".parse::<EventName>().unwrap_err().to_string();
        assert!(
            err.contains("dm.read") && err.contains("bio.unsubscribed"),
            "{err}"
        );
    }

    #[test]
    fn merges_subscriptions_in_first_seen_order() {
        let events = subscribed_events(["link.clicked", "dm.sent", "link.clicked"]).unwrap();
        assert_eq!(events, [EventName::LinkClicked, EventName::DmSent]);
        assert!(subscribed_events([]).is_err());
        assert!(subscribed_events(["dm.sent", "nope"]).is_err());
    }

    fn contact() -> Value {
        json!({"contact": {
            "id": "ct_1", "igUserId": "1784", "username": "maria", "email": "maria@example.com",
            "accountId": "acc_1", "automationId": "auto_1"
        }})
    }

    #[test]
    fn payload_has_the_wire_shape() {
        let ws = WorkspaceId::generate();
        let payload = EventPayload::new(EventName::ContactEmailCaptured, ws, contact()).unwrap();
        let json: Value = serde_json::from_str(&payload.to_json()).unwrap();
        assert_eq!(json["id"], payload.id.to_string());
        assert_eq!(json["event"], "contact.email_captured");
        assert_eq!(json["workspaceId"], ws.to_string());
        assert_eq!(json["occurredAt"], payload.occurred_at.to_string());
        assert_eq!(json["data"], contact());
        assert_eq!(json.as_object().unwrap().len(), 5);
        // Field order is part of what is signed; keep it stable.
        assert!(payload.to_json().starts_with(r#"{"id":"evt_"#));
    }

    #[test]
    fn data_must_be_an_object() {
        let ws = WorkspaceId::generate();
        for data in [json!(null), json!([]), json!("x"), json!(1)] {
            assert!(EventPayload::new(EventName::DmSent, ws, data).is_err());
        }
        assert!(EventPayload::new(EventName::DmSent, ws, json!({})).is_ok());
        assert!(EventPayload::new(EventName::LinkClicked, ws, json!({"any": [1, 2]})).is_ok());
    }

    #[test]
    fn email_captured_data_is_checked_field_by_field() {
        let ws = WorkspaceId::generate();
        let emit = |data| EventPayload::new(EventName::ContactEmailCaptured, ws, data);
        assert!(emit(json!({})).is_err());
        assert!(emit(json!({"contact": "x"})).is_err());
        for field in CONTACT_FIELDS {
            let mut missing = contact();
            missing["contact"].as_object_mut().unwrap().remove(field);
            let err = emit(missing).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
            let mut wrong_type = contact();
            wrong_type["contact"][field] = json!(42);
            assert!(emit(wrong_type).is_err(), "{field} as a number");
        }
        let mut bad_email = contact();
        bad_email["contact"]["email"] = json!("not-an-email");
        assert!(emit(bad_email).is_err());
    }

    #[test]
    fn recognises_email_addresses() {
        for good in [
            "a@b.co",
            "first.last+tag@mail.example.org",
            "x_y@sub-domain.io",
        ] {
            assert!(is_email_address(good), "{good}");
        }
        for bad in [
            "",
            "a",
            "a@",
            "@b.co",
            "a@b",
            "a@b.c",
            "a b@c.de",
            "a..b@c.de",
            ".a@c.de",
            "a@-b.de",
            "a@b..de",
            "a@b.d3",
            "ä@b.de",
            "a@[127.0.0.1]",
        ] {
            assert!(!is_email_address(bad), "{bad}");
        }
        assert!(!is_email_address(&format!("{}@b.de", "a".repeat(65))));
    }
}
