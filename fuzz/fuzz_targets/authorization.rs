//! The `Authorization` header as both APIs read it: never panics, whatever the
//! bytes.
#![no_main]

use hookline_domain::KeyPrefix;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hookline_auth::presented(std::iter::once(data), &KeyPrefix::default());
    let _ = hookline_auth::presented([data, data].into_iter(), &KeyPrefix::admin());
});
