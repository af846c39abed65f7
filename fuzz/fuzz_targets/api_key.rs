//! The API-key (and admin-token) parser: never panics, and an accepted key
//! reads back as itself.
#![no_main]

use hookline_domain::{ApiKey, KeyPrefix};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for prefix in [KeyPrefix::default(), KeyPrefix::admin()] {
        if let Ok(key) = ApiKey::parse(&prefix, text) {
            let again = ApiKey::parse(&prefix, key.expose()).expect("an accepted key reads back");
            assert_eq!(again.expose(), key.expose());
        }
    }
});
