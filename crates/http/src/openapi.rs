//! What both OpenAPI 3.1 documents are built of: the envelopes, an operation
//! with the failures every operation of its API answers, parameters, and
//! [`Schemas`]: each answer's schema derived from the wire type that writes it
//! (`JsonSchema`, down to the domain's ids and enums), each request body's read
//! from the domain type that parses the value (its pattern, its length, its
//! enum). Each API builds its own document (`api::openapi`, `admin::openapi`),
//! served as it is; the tests below hold every documented operation to the
//! routers, every route to the documents, and every answer to its schema.

use hookline_app::{DEFAULT_LIMIT, MAX_LIMIT};
use hookline_domain::limits::MAX_WEBHOOK_URL_LEN;
use hookline_domain::limits::{DEFAULT_SECRET_GRACE_SECONDS, MAX_SECRET_GRACE_SECONDS};
use hookline_domain::{
    DEFAULT_PORTAL_TTL_SECONDS, EventId, EventName, HEADER_VALUE_PATTERN, KeyName,
    MAX_HEADER_VALUE_LEN, MAX_PORTAL_TTL_SECONDS, MAX_WEBHOOK_HEADERS, Plan, Username,
    WebhookDescription, WebhookId, WebhookUrl, WorkspaceName, header_name_pattern,
};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::input::{Input, Kind, Rule};
use crate::transport::failure::json_response as json_answer;
use crate::wire::Failure;

/// A document, serialised once, as the answer to `GET …/openapi.json`.
pub(crate) fn served(document: &str) -> Response<Full<Bytes>> {
    json_answer(StatusCode::OK, document.to_owned())
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `#/components/schemas/NAME`.
pub(crate) fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The named schemas of one document, `components.schemas`: an answer's derived
/// from its wire type when first referenced, a request body's written here.
#[derive(Debug)]
pub(crate) struct Schemas(SchemaGenerator);

impl Schemas {
    /// With `Error`, which every operation's failures refer to.
    pub(crate) fn new() -> Self {
        let settings = SchemaSettings::draft2020_12()
            .for_serialize()
            .with(|settings| {
                settings.definitions_path = "/components/schemas".into();
                settings.meta_schema = None;
            });
        let mut schemas = Schemas(settings.into_generator());
        schemas.of::<Failure<'_>>();
        schemas
    }

    /// `T` as its answers write it: a `$ref` to its named schema, or the schema
    /// itself where it is inline (an id).
    pub(crate) fn of<T: JsonSchema>(&mut self) -> Value {
        self.0.subschema_for::<T>().to_value()
    }

    /// A request body, from its table (`crate::input`): its schema under its name
    /// (an optional field may be `null`: the bodies read it as absent), and whether
    /// it may be left out.
    pub(crate) fn body(&mut self, input: &Input) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for one in input.fields {
            let schema = field(self, one.kind);
            let schema = if one.required {
                required.push(one.name);
                schema
            } else {
                or_null(schema)
            };
            properties.insert(one.name.to_owned(), schema);
        }
        let mut body = json!({ "type": "object", "properties": properties });
        if !required.is_empty() {
            body["required"] = json!(required);
        }
        if input.closed {
            body["additionalProperties"] = json!(false);
        }
        match input.rule {
            None => {}
            Some(Rule::SomeEvent) => {
                let event = self.of::<EventName>();
                body["anyOf"] = json!([
                    { "required": ["events"], "properties": { "events": { "type": "array", "minItems": 1 } } },
                    { "required": ["event"], "properties": { "event": event } }
                ]);
            }
            Some(Rule::StatusOrError) => {
                body["anyOf"] = json!([
                    { "required": ["status"], "properties": { "status": { "type": "integer" } } },
                    { "required": ["error"], "properties": { "error": { "type": "string" } } }
                ]);
            }
            Some(Rule::DataOfItsEvent) => body["oneOf"] = data_of_its_event(),
        }
        self.0.definitions_mut().insert(input.name.to_owned(), body);
        json!({
            "required": !input.optional,
            "content": { "application/json": { "schema": schema(input.name) } }
        })
    }

    /// `components.schemas`.
    pub(crate) fn into_components(mut self) -> Map<String, Value> {
        self.0.take_definitions(true)
    }
}

/// `{success: true, data: <data>}`.
pub(crate) fn success(data: Value) -> Value {
    json!({
        "type": "object",
        "required": ["success", "data"],
        "properties": { "success": { "const": true }, "data": data }
    })
}

/// `{success: true}` alone.
pub(crate) fn bare_success() -> Value {
    json!({
        "type": "object",
        "required": ["success"],
        "properties": { "success": { "const": true } }
    })
}

pub(crate) fn json_response(description: &str, body: Value) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": body } }
    })
}

/// The failures every operation of an API can answer, by status.
fn failures(statuses: &[(&str, &str)]) -> Map<String, Value> {
    statuses
        .iter()
        .map(|(status, why)| ((*status).to_owned(), json_response(why, schema("Error"))))
        .collect()
}

/// A page of a list: `{success, data: [item], nextCursor}`.
pub(crate) fn page(item: Value) -> Value {
    json!({
        "type": "object",
        "required": ["success", "data", "nextCursor"],
        "properties": {
            "success": { "const": true },
            "data": { "type": "array", "items": item },
            "nextCursor": { "type": ["string", "null"] }
        }
    })
}

/// `limit` and the list's cursor parameter, of `cursor_form` (an unanchored
/// pattern) where the list refuses a malformed cursor; empty is the first page.
pub(crate) fn paging(cursor: &str, cursor_form: Option<String>) -> Value {
    let mut cursor_schema = json!({ "type": "string" });
    if let Some(form) = cursor_form {
        cursor_schema["pattern"] = json!(format!("^(?:{form})?$"));
    }
    json!([
        { "name": "limit", "in": "query", "required": false,
          "schema": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT } },
        { "name": cursor, "in": "query", "required": false,
          "description": "The `nextCursor` of the previous page.",
          "schema": cursor_schema }
    ])
}

/// A list's path parameter, then `limit` and its cursor.
pub(crate) fn listing(parameter: Value, cursor: &str, cursor_form: Option<String>) -> Value {
    let mut parameters = vec![parameter];
    if let Value::Array(more) = paging(cursor, cursor_form) {
        parameters.extend(more);
    }
    Value::Array(parameters)
}

/// What the attempt log's cursor is, in both APIs' descriptions of it (a
/// macro, so that `concat!` takes it).
macro_rules! attempt_cursor_is {
    () => {
        "The cursor is `<eventId>:<attempt>:<at>` (the previous page's `nextCursor`; \
         `<eventId>:<attempt>` is also read)."
    };
}
pub(crate) use attempt_cursor_is;

/// What every operation's 503 means.
pub(crate) const UNAVAILABLE_WHY: &str =
    "The database is not answering; nothing was changed. Retry after `Retry-After` seconds.";

/// An operation: its summary, parameters, request body (if any, from
/// [`Schemas::body`]) and responses, with the failures every operation of its
/// API answers.
pub(crate) fn operation(
    summary: &str,
    parameters: Value,
    body: Option<Value>,
    ok: (&str, Value),
    common: &[(&str, &str)],
) -> Value {
    let mut responses = failures(common);
    responses.insert(ok.0.to_owned(), json_response("Success.", ok.1));
    if body.is_some() {
        responses.extend(failures(&[
            (
                "400",
                "The body or one of its fields is wrong; the message names it.",
            ),
            ("413", "The body is larger than 64 KiB."),
            (
                "408",
                "The body did not arrive within 10 s; the connection is closed.",
            ),
        ]));
    }
    let mut operation = json!({
        "summary": summary,
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = body {
        operation["requestBody"] = body;
    }
    operation
}

pub(crate) fn path_parameter(name: &str, description: &str, id_pattern: String) -> Value {
    json!({
        "name": name, "in": "path", "required": true, "description": description,
        "schema": id(id_pattern)
    })
}

/// An id: its prefix and a ULID (`WebhookId::pattern()`, …).
pub(crate) fn id(pattern: String) -> Value {
    json!({ "type": "string", "pattern": pattern })
}

/// A name people give (a workspace, a key): the domain's label rule.
pub(crate) fn label(max_chars: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max_chars, "pattern": WorkspaceName::PATTERN })
}

/// `schema`, or `null` (the inputs read `null` as absent).
pub(crate) fn or_null(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// A webhook's URL: the syntax of [`WebhookUrl::PATTERN`]; a private target is
/// refused with 400 unless the service allows them.
pub(crate) fn webhook_url() -> Value {
    json!({ "type": "string", "maxLength": MAX_WEBHOOK_URL_LEN, "pattern": WebhookUrl::PATTERN,
        "description": "https:// only; a loopback, private or reserved target (by name or address) is refused unless the service allows private targets." })
}

/// A webhook's own headers as a request sets them (all of them; `{}` for none):
/// names are tokens hookline does not set itself, values write-only secrets.
pub(crate) fn headers_input() -> Value {
    json!({ "type": ["object", "null"], "maxProperties": MAX_WEBHOOK_HEADERS,
        "propertyNames": { "pattern": header_name_pattern() },
        "additionalProperties": { "type": "string", "writeOnly": true,
            "maxLength": MAX_HEADER_VALUE_LEN, "pattern": HEADER_VALUE_PATTERN },
        "description": "Sent with every delivery (for receivers that check a header, such as n8n's Header Auth). Given on a change, they replace all the webhook's headers. Not `webhook-*`, `content-type`, `content-length`, `host`, `user-agent` or a hop-by-hop header." })
}

/// A field's schema, from its kind: the domain type that parses it.
fn field(schemas: &mut Schemas, kind: Kind) -> Value {
    match kind {
        Kind::WebhookUrl => webhook_url(),
        Kind::EventNames => json!({ "type": "array", "items": schemas.of::<EventName>() }),
        Kind::EventName => schemas.of::<EventName>(),
        Kind::NewDescription => json!({ "type": ["string", "null"],
            "maxLength": WebhookDescription::MAX_CHARS, "pattern": WebhookDescription::OPTIONAL_PATTERN,
            "description": "Blank or absent: the calling platform's name, or the URL's host." }),
        Kind::Description => label(WebhookDescription::MAX_CHARS),
        Kind::Headers => headers_input(),
        Kind::Flag => json!({ "type": "boolean" }),
        Kind::WorkspaceName => label(WorkspaceName::MAX_CHARS),
        Kind::KeyName => label(KeyName::MAX_CHARS),
        Kind::Plan => schemas.of::<Plan>(),
        Kind::Username => json!({ "type": "string", "pattern": Username::PATTERN }),
        Kind::ExampleData => json!({ "type": "object",
            "description": "Merged into the example's data as a JSON merge patch (RFC 7396)." }),
        Kind::EventData => json!({ "type": "object",
            "description": "What the event says, of the shape the event catalog gives for it." }),
        Kind::GraceSeconds => json!({ "type": "integer", "minimum": 0,
            "maximum": MAX_SECRET_GRACE_SECONDS, "default": DEFAULT_SECRET_GRACE_SECONDS }),
        Kind::Time => json!({ "type": "string", "format": "date-time" }),
        Kind::WebhookId => schemas.of::<WebhookId>(),
        Kind::PortalLinkSeconds => json!({ "type": "integer", "minimum": 1,
            "maximum": MAX_PORTAL_TTL_SECONDS, "default": DEFAULT_PORTAL_TTL_SECONDS }),
        Kind::EventId => schemas.of::<EventId>(),
        Kind::Attempt => json!({ "type": "integer", "minimum": 1, "maximum": u32::MAX }),
        Kind::Status => json!({ "type": "integer", "minimum": 100, "maximum": 599,
            "description": "The local receiver's status; 2xx delivers, anything else is retried." }),
        Kind::Error => json!({ "type": "string", "description": "Why there was no status." }),
        Kind::DurationMs => json!({ "type": "integer", "minimum": 0, "maximum": u32::MAX }),
        Kind::ResponseBody => {
            json!({ "type": "string", "description": "Its first 4 KiB are kept." })
        }
    }
}

/// An emitted event's data by its event: `contact.email_captured` requires its
/// data to name the contact (as the event catalog describes it); the others
/// take any object.
fn data_of_its_event() -> Value {
    let others: Vec<&str> = EventName::ALL
        .iter()
        .filter(|event| **event != EventName::ContactEmailCaptured)
        .map(|event| event.as_str())
        .collect();
    let contact = EventName::ContactEmailCaptured.payload_schema()["properties"]["data"].clone();
    json!([
        { "properties": { "event": { "enum": others } } },
        { "required": ["data"], "properties": {
            "event": { "const": EventName::ContactEmailCaptured.as_str() }, "data": contact } }
    ])
}

pub(crate) fn document(title: &str, description: &str, paths: Value, schemas: Schemas) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": { "title": title, "version": VERSION, "description": description },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "schemas": schemas.into_components(),
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } }
        }
    })
}

#[cfg(test)]
mod tests {
    use hyper::Method;

    use super::*;

    /// Every operation of a document, as `METHOD /path/{param}`.
    fn operations(document: &Value) -> Vec<(Method, String)> {
        let mut operations = Vec::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                let method =
                    Method::from_bytes(method.to_uppercase().as_bytes()).unwrap_or_default();
                operations.push((method, path.clone()));
            }
        }
        operations
    }

    /// `{param}` → `:param`, as the routes name their patterns.
    fn pattern(path: &str) -> String {
        path.replace('{', ":").replace('}', "")
    }

    /// The path with every parameter filled in.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x1"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn the_public_document_matches_the_router_both_ways() {
        let document: Value =
            serde_json::from_str(&crate::api::openapi::PUBLIC).unwrap_or_default();
        assert_eq!(document["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let concrete = concrete(&path);
            let route = crate::api::router::route(&method, &concrete);
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.map(|route| route.name()), Ok(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::api::router::Route::ALL {
            assert!(
                documented.iter().any(|d| d == name),
                "{name} is not documented"
            );
        }
        let webhooks = document["webhooks"].as_object().map(Map::len);
        assert_eq!(webhooks, Some(EventName::ALL.len()));
    }

    #[test]
    fn the_admin_document_matches_the_router_both_ways() {
        let document: Value =
            serde_json::from_str(&crate::admin::openapi::ADMIN).unwrap_or_default();
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let route = crate::admin::route_name(&method, &concrete(&path));
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.as_deref(), Some(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::admin::router::AdminRoute::ALL {
            assert!(
                documented.iter().any(|d| d == name),
                "{name} is not documented"
            );
        }
    }

    #[test]
    fn every_reference_resolves() {
        for document in [
            &*crate::api::openapi::PUBLIC,
            &*crate::admin::openapi::ADMIN,
        ] {
            let schemas: Value = serde_json::from_str::<Value>(document).unwrap_or_default()["components"]["schemas"].clone();
            for reference in document.split("\"$ref\":\"#/components/schemas/").skip(1) {
                let name = reference.split('"').next().unwrap_or_default();
                assert!(
                    schemas.get(name).is_some(),
                    "{name} is referenced but not defined"
                );
            }
        }
    }

    /// A request body written inline in a document would be a second copy of
    /// what its handler reads: every one is a table of `crate::input`'s.
    #[test]
    fn every_request_body_is_built_from_its_table() {
        for document in [
            &*crate::api::openapi::PUBLIC,
            &*crate::admin::openapi::ADMIN,
        ] {
            let document: Value = serde_json::from_str(document).unwrap_or_default();
            for (path, item) in document["paths"].as_object().into_iter().flatten() {
                for (method, operation) in item.as_object().into_iter().flatten() {
                    let body = &operation["requestBody"]["content"]["application/json"]["schema"];
                    if operation.get("requestBody").is_some() {
                        assert!(body["$ref"].is_string(), "{method} {path}: {body}");
                    }
                }
            }
        }
    }

    /// Why `value` is not what `schema` allows, for the keywords the documents
    /// use; `$ref`s resolve in `components`.
    fn mismatch(value: &Value, schema: &Value, components: &Value, at: &str) -> Option<String> {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/schemas/");
            return mismatch(value, &components[name], components, at);
        }
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let types: Vec<&str> = match &schema["type"] {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec![kind],
        };
        let allowed = types.contains(&kind) || (kind == "integer" && types.contains(&"number"));
        if !allowed {
            return Some(format!("{at}: {kind}, not {types:?}"));
        }
        if let Some(allowed) = schema["enum"].as_array().filter(|_| !value.is_null())
            && !allowed.contains(value)
        {
            return Some(format!("{at}: {value} is not one of {allowed:?}"));
        }
        if let (Some(pattern), Some(text)) = (schema["pattern"].as_str(), value.as_str()) {
            let matches = regex::Regex::new(pattern).map(|re| re.is_match(text));
            if matches != Ok(true) {
                return Some(format!("{at}: {text:?} does not match {pattern}"));
            }
        }
        if let Some(items) = value.as_array() {
            for (i, item) in items.iter().enumerate() {
                let found = mismatch(item, &schema["items"], components, &format!("{at}[{i}]"));
                if found.is_some() {
                    return found;
                }
            }
        }
        let fields = value.as_object()?;
        for name in schema["required"].as_array().into_iter().flatten() {
            if !fields.contains_key(name.as_str().unwrap_or_default()) {
                return Some(format!("{at}: {name} is missing"));
            }
        }
        for (name, field) in fields {
            let at = format!("{at}.{name}");
            match schema["properties"].get(name) {
                Some(property) => mismatch(field, property, components, &at)?,
                None if schema["additionalProperties"].is_object() => {
                    mismatch(field, &schema["additionalProperties"], components, &at)?
                }
                None => return Some(format!("{at} is not in the schema")),
            };
        }
        None
    }

    /// The answers written by hand (`Serialize` and `JsonSchema` both
    /// implemented, not derived), checked against the schemas served.
    #[test]
    fn hand_written_answers_match_their_schemas() {
        use hookline_domain::{DeliveryAttempt, EventId, WebhookId};

        use crate::wire::AttemptObject;

        let document: Value =
            serde_json::from_str(&crate::api::openapi::PUBLIC).unwrap_or_default();
        let components = &document["components"]["schemas"];
        let answered = DeliveryAttempt {
            event_id: EventId::generate(),
            webhook_id: WebhookId::generate(),
            event: EventName::DmSent,
            attempt: 2,
            at: hookline_domain::Timestamp::now(),
            status: Some(500),
            error: Some("HTTP 500".to_owned()),
            duration_ms: 12,
            response_body: Some("oops".to_owned()),
        };
        let unanswered = DeliveryAttempt {
            status: None,
            response_body: None,
            ..answered.clone()
        };
        for attempt in [&answered, &unanswered] {
            let value = serde_json::to_value(AttemptObject::with_response_body(attempt));
            let value = value.unwrap_or_default();
            assert_eq!(
                mismatch(&value, &schema("Attempt"), components, "attempt"),
                None
            );
        }
        let short = serde_json::to_value(AttemptObject::log(&answered)).unwrap_or_default();
        assert!(mismatch(&short, &schema("Attempt"), components, "log").is_some());
    }
}
