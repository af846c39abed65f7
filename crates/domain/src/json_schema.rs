//! The JSON Schema of each type the APIs show (feature `json-schema`), read off
//! the rules that parse and print it: an id's pattern, the names of an enum. The
//! OpenAPI documents are generated from these and the wire types that hold them.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};

use crate::{
    ApiKeyStatus, DisabledReason, EventName, HealthState, HealthWindow, Id, IdKind, Plan,
    Timestamp, WebhookSource,
};

fn schema(value: Value) -> Schema {
    Schema::try_from(value).unwrap_or_default()
}

/// Inline, `{type: string, pattern}`: each id kind its own pattern.
impl<K: IdKind> JsonSchema for Id<K> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(format!("{}Id", K::PREFIX))
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema(json!({ "type": "string", "pattern": Self::pattern() }))
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema(json!({ "type": "string", "format": "date-time",
            "description": "UTC with milliseconds, e.g. 2026-11-22T10:04:05.123Z" }))
    }
}

/// A string enum of `$names`, named (a `$ref`) or inline.
macro_rules! string_enum {
    ($($type:ident: $inline:literal, $names:expr;)*) => {$(
        impl JsonSchema for $type {
            fn inline_schema() -> bool {
                $inline
            }

            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($type))
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                schema(json!({ "type": "string", "enum": $names.map($type::as_str) }))
            }
        }
    )*};
}

string_enum! {
    EventName: false, EventName::ALL;
    Plan: false, Plan::ALL;
    ApiKeyStatus: true, ApiKeyStatus::ALL;
    DisabledReason: true, DisabledReason::ALL;
    WebhookSource: true, WebhookSource::ALL;
    HealthWindow: true, HealthWindow::ALL;
    HealthState: true, HealthState::ALL;
}

#[cfg(test)]
mod tests {
    use schemars::SchemaGenerator;

    use super::*;
    use crate::WebhookId;

    #[test]
    fn ids_are_inline_with_their_kind_s_pattern() {
        let mut generator = SchemaGenerator::default();
        let id = generator.subschema_for::<WebhookId>();
        assert_eq!(id.get("pattern"), Some(&json!(WebhookId::pattern())));
        assert!(generator.definitions().is_empty());
    }

    #[test]
    fn enums_list_every_name_as_written() {
        let mut generator = SchemaGenerator::default();
        let reference = generator.subschema_for::<EventName>();
        assert_eq!(reference.get("$ref"), Some(&json!("#/$defs/EventName")));
        let names = &generator.definitions()["EventName"]["enum"];
        assert_eq!(names, &json!(EventName::ALL.map(EventName::as_str)));
    }
}
