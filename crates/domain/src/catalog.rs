//! The event catalog: what each event means, the JSON Schema of its delivered
//! payload, and its example. Automation platforms fill their trigger dropdowns
//! from it; the OpenAPI document's `webhooks` section holds the same schemas.

use serde_json::{Map, Value, json};

use crate::{
    CONTACT_FIELDS, EMAIL_PATTERN, EventId, EventName, EventPayload, Timestamp, WorkspaceId,
};

impl EventName {
    /// What happened, in one sentence (the first line under the event's heading in
    /// docs/events.md; a test keeps the two identical).
    pub fn description(self) -> &'static str {
        match self {
            EventName::DmSent => "A direct message was sent by an automation.",
            EventName::DmFailed => "A direct message could not be sent.",
            EventName::LinkClicked => "A tracked link was clicked.",
            EventName::ContactCreated => {
                "A contact was created (someone wrote to or interacted with a connected account)."
            }
            EventName::ContactEmailCaptured => "A contact's e-mail address was captured.",
            EventName::BioSubscribed => "Someone subscribed through the account's bio page.",
            EventName::BioUnsubscribed => "A bio-page subscription ended.",
        }
    }

    /// The JSON Schema of this event's delivered payload. `data` is described by
    /// its documented example (each field's type; fields may be added, so none is
    /// required), except `contact.email_captured`'s, whose every field the
    /// specification requires.
    pub fn payload_schema(self) -> Value {
        let data = match self {
            EventName::ContactEmailCaptured => {
                let mut contact = Map::new();
                for field in CONTACT_FIELDS {
                    contact.insert(
                        field.to_owned(),
                        json!({ "type": "string", "minLength": 1 }),
                    );
                }
                contact.insert(
                    "email".to_owned(),
                    json!({ "type": "string", "pattern": EMAIL_PATTERN }),
                );
                json!({ "type": "object", "required": ["contact"], "properties": {
                    "contact": { "type": "object", "required": CONTACT_FIELDS, "properties": contact } } })
            }
            _ => schema_of(&Value::Object(self.example_data())),
        };
        json!({
            "type": "object",
            "required": ["id", "event", "workspaceId", "occurredAt", "data"],
            "properties": {
                "id": { "type": "string", "pattern": EventId::pattern(),
                    "description": "The event id; the `webhook-id` header carries the same, on every retry." },
                "event": { "const": self.as_str() },
                "workspaceId": { "type": "string", "pattern": WorkspaceId::pattern() },
                "occurredAt": { "type": "string", "format": "date-time" },
                "data": data
            }
        })
    }
}

impl EventPayload {
    /// The example a sample gives when the event never happened in `workspace`: its
    /// documented data, a fresh id, now.
    pub fn example(event: EventName, workspace: WorkspaceId) -> EventPayload {
        EventPayload {
            id: EventId::generate(),
            event,
            workspace_id: workspace,
            occurred_at: Timestamp::now(),
            data: event.example_data(),
        }
    }

    /// A test event: the example, its `data` merged with `patch` as a JSON merge
    /// patch (RFC 7396: a field set to `null` is removed, an object merges field
    /// by field, anything else replaces). The result is not held to the event's
    /// shape: a developer may test how a receiver takes a payload it must refuse.
    pub fn test(
        event: EventName,
        workspace: WorkspaceId,
        patch: Option<&Value>,
    ) -> crate::Result<EventPayload> {
        let mut payload = EventPayload::example(event, workspace);
        let Some(patch) = patch else {
            return Ok(payload);
        };
        let Value::Object(patch) = patch else {
            return Err(crate::Error::invalid("data", "must be a JSON object"));
        };
        merge_patch(&mut payload.data, patch);
        Ok(payload)
    }
}

/// RFC 7396's merge of `patch` into `target`.
fn merge_patch(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (name, value) in patch {
        match value {
            Value::Null => {
                target.remove(name);
            }
            Value::Object(fields) => {
                let slot = target
                    .entry(name.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(inner) = slot {
                    merge_patch(inner, fields);
                }
            }
            other => {
                target.insert(name.clone(), other.clone());
            }
        }
    }
}

/// The types of a JSON value, as a schema: an object's fields each described, none
/// required.
fn schema_of(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|(name, value)| (name.clone(), schema_of(value)))
                .collect();
            json!({ "type": "object", "properties": properties })
        }
        Value::Array(items) => match items.first() {
            Some(item) => json!({ "type": "array", "items": schema_of(item) }),
            None => json!({ "type": "array" }),
        },
        Value::String(_) => json!({ "type": "string" }),
        Value::Number(number) if number.is_i64() || number.is_u64() => json!({ "type": "integer" }),
        Value::Number(_) => json!({ "type": "number" }),
        Value::Bool(_) => json!({ "type": "boolean" }),
        Value::Null => json!({ "type": "null" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_event_merges_its_data_into_the_example() {
        let ws = WorkspaceId::generate();
        let patch = json!({"messageId": "m_9", "text": null, "extra": {"a": 1}});
        let payload = EventPayload::test(EventName::DmSent, ws, Some(&patch)).unwrap();
        let mut expected = EventName::DmSent.example_data();
        expected.insert("messageId".into(), json!("m_9"));
        expected.remove("text");
        expected.insert("extra".into(), json!({"a": 1}));
        assert_eq!(payload.data, expected);
        let nested = json!({"contact": {"email": "new@example.com"}});
        let payload =
            EventPayload::test(EventName::ContactEmailCaptured, ws, Some(&nested)).unwrap();
        assert_eq!(payload.data["contact"]["email"], "new@example.com");
        assert_eq!(
            payload.data["contact"]["id"],
            EventName::ContactEmailCaptured.example_data()["contact"]["id"]
        );
        let broken = json!({"contact": {"email": "not an address"}});
        let payload =
            EventPayload::test(EventName::ContactEmailCaptured, ws, Some(&broken)).unwrap();
        assert_eq!(
            payload.data["contact"]["email"], "not an address",
            "not held to the shape"
        );
        assert!(EventPayload::test(EventName::DmSent, ws, Some(&json!([1]))).is_err());
    }

    #[test]
    fn descriptions_are_the_documented_ones() {
        let doc = include_str!("../../../docs/events.md");
        for event in EventName::ALL {
            let heading = format!("## `{event}`\n");
            let section = &doc[doc.find(&heading).expect("event documented") + heading.len()..];
            let first_line = section.lines().next().unwrap_or_default();
            assert!(
                first_line.starts_with(event.description()),
                "{event}: {first_line:?}"
            );
        }
    }

    #[test]
    fn each_schema_describes_its_example() {
        for event in EventName::ALL {
            let schema = event.payload_schema();
            let example = EventPayload::example(event, WorkspaceId::generate());
            let payload: Value = serde_json::from_str(&example.to_json()).unwrap();
            assert_eq!(schema["properties"]["event"]["const"], event.as_str());
            for field in payload["data"].as_object().unwrap().keys() {
                assert!(
                    schema["properties"]["data"]["properties"]
                        .get(field)
                        .is_some(),
                    "{event}: {field}"
                );
            }
        }
    }
}
