//! `WebhookUrl::parse` under both target policies: never panics, and a URL it
//! accepts reads back as itself.
#![no_main]

use hookline_domain::{TargetPolicy, WebhookUrl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for policy in [TargetPolicy::PublicOnly, TargetPolicy::AllowPrivate] {
        if let Ok(url) = WebhookUrl::parse(text, policy) {
            let again =
                WebhookUrl::parse(url.as_str(), policy).expect("an accepted URL reads back");
            assert_eq!(again.as_str(), url.as_str());
        }
    }
});
