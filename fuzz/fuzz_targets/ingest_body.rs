//! An HTTP ingest body and the payload made of it: never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hookline_http::fuzzing::ingest_body(data);
});
