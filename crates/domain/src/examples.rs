//! One realistic example of each event's data, as `docs/events.md` documents it (a
//! test keeps the two identical). The sample endpoint returns these for events that
//! never fired.

use serde_json::{Map, Value};

use crate::EventName;

impl EventName {
    /// The documented example of this event's data.
    pub fn example_data(self) -> Map<String, Value> {
        let text = match self {
            EventName::DmSent => {
                r#"{"message":{"id":"msg_7f3a91c2","text":"Here is your 20% code: SPRING20","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R","automationId":"auto_welcome_dm"},"contact":{"id":"ct_5b21e0d4","igUserId":"17841400123456789","username":"maria.rossi"}}"#
            }
            EventName::DmFailed => {
                r#"{"message":{"id":"msg_2c8e44a0","text":"Here is your 20% code: SPRING20","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R","automationId":"auto_welcome_dm"},"contact":{"id":"ct_5b21e0d4","igUserId":"17841400123456789","username":"maria.rossi"},"error":{"code":"recipient_unavailable","message":"The recipient cannot receive messages from this account right now."}}"#
            }
            EventName::LinkClicked => {
                r#"{"link":{"id":"lnk_91d0c7e3","url":"https://shop.example.com/spring-sale"},"contact":{"id":"ct_5b21e0d4","igUserId":"17841400123456789","username":"maria.rossi"},"accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R","automationId":"auto_welcome_dm"}"#
            }
            EventName::ContactCreated => {
                r#"{"contact":{"id":"ct_5b21e0d4","igUserId":"17841400123456789","username":"maria.rossi","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R"}}"#
            }
            EventName::ContactEmailCaptured => {
                r#"{"contact":{"id":"ct_5b21e0d4","igUserId":"17841400123456789","username":"maria.rossi","email":"maria.rossi@example.com","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R","automationId":"auto_email_capture"}}"#
            }
            EventName::BioSubscribed => {
                r#"{"subscription":{"id":"sub_4e7a2b19","email":"maria.rossi@example.com","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R"}}"#
            }
            EventName::BioUnsubscribed => {
                r#"{"subscription":{"id":"sub_4e7a2b19","email":"maria.rossi@example.com","accountId":"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R"}}"#
            }
        };
        // The texts above are checked JSON objects (tests below).
        serde_json::from_str(text).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ```json block under each event's heading in docs/events.md.
    fn documented(event: EventName) -> Value {
        let doc = include_str!("../../../docs/events.md");
        let heading = format!("## `{event}`");
        let section = &doc[doc.find(&heading).expect("event documented")..];
        let start = section.find("```json").expect("example block") + "```json".len();
        let end = start + section[start..].find("```").expect("closed block");
        serde_json::from_str(&section[start..end]).expect("documented example is JSON")
    }

    #[test]
    fn examples_are_the_documented_ones_and_valid() {
        for event in EventName::ALL {
            let example = event.example_data();
            assert!(!example.is_empty(), "{event}");
            assert_eq!(Value::Object(example.clone()), documented(event), "{event}");
            event.validate_data(&example).unwrap();
        }
    }
}
