//! The regular expressions the OpenAPI documents give for each input agree with
//! the rules that parse it: exactly for labels, handles and ids (a client that
//! checks with them refuses what the service refuses, and nothing else), and as a
//! subset for URLs (whatever matches is accepted).
#![allow(clippy::unwrap_used)] // Tests: a failure is the test failing.

use hookline_domain::{
    AttemptCursor, EMAIL_PATTERN, EventId, EventName, EventPayload, TargetPolicy, Username,
    WebhookDescription, WebhookId, WebhookUrl, WorkspaceId, WorkspaceName,
};
use regex::Regex;
use serde_json::json;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid regular expression")
}

/// Strings made of `alphabet`, up to `max` pieces long, from a fixed seed.
fn strings(alphabet: &[&str], max: usize, count: usize) -> Vec<String> {
    // A linear congruential generator (Knuth's MMIX constants), high bits out.
    let mut state = 1_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    (0..count)
        .map(|_| {
            let len = (next() % (max as u64 + 1)) as usize;
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        })
        .collect()
}

/// Characters at the edges of each rule: white space that is and is not
/// control, control that is not white space, the information separators (white
/// space to Python, not to Rust), letters and symbols.
const TRICKY: &[&str] = &[
    " ", "\t", "\n", "\u{b}", "\u{c}", "\r", "\u{85}", "\u{a0}", "\u{1680}", "\u{2003}",
    "\u{2028}", "\u{3000}", "\u{feff}", "\u{180e}", "\u{0}", "\u{1c}", "\u{1f}", "\u{7f}",
    "\u{9f}", "a", "Z", "0", "9", "@", ".", "_", "-", "é", "ß", "😀", "/", ":", "%",
];

#[test]
fn label_patterns_are_exactly_the_label_rules() {
    let pattern = regex(WorkspaceName::PATTERN);
    let mut cases = strings(TRICKY, 6, 20_000);
    cases.extend(
        [
            "", " ", "a", " a ", "a b", "a\tb", "\ta\n", "\u{85}a", "a\u{85}b", "\u{a0}",
        ]
        .map(String::from),
    );
    for case in &cases {
        assert_eq!(
            pattern.is_match(case),
            WorkspaceName::parse(case).is_ok(),
            "{case:?}"
        );
    }
}

#[test]
fn the_description_pattern_takes_blanks_too() {
    let pattern = regex(WebhookDescription::OPTIONAL_PATTERN);
    let url = WebhookUrl::parse("https://example.com/", TargetPolicy::PublicOnly).unwrap();
    for case in strings(TRICKY, 6, 20_000) {
        assert_eq!(
            pattern.is_match(&case),
            WebhookDescription::parse_or_default(Some(&case), None, &url).is_ok(),
            "{case:?}"
        );
    }
}

#[test]
fn the_username_pattern_is_exactly_the_handle_rule() {
    let pattern = regex(Username::PATTERN);
    let mut cases = strings(TRICKY, 8, 20_000);
    cases.extend([
        "@".to_owned(),
        "@a".to_owned(),
        "@@a".to_owned(),
        " @maria ".to_owned(),
        "a".repeat(64),
        "a".repeat(65),
    ]);
    for case in &cases {
        assert_eq!(
            pattern.is_match(case),
            Username::parse(case).is_ok(),
            "{case:?}"
        );
    }
}

#[test]
fn id_patterns_are_exactly_the_id_rules() {
    let pattern = regex(&WebhookId::pattern());
    let id = WebhookId::generate().to_string();
    let mut cases = vec![
        id.clone(),
        id.to_lowercase(),
        id.replace("wh_", "ws_"),
        format!("{id}0"),
        id[..id.len() - 1].to_owned(),
        "wh_8ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_owned(),
        "wh_7ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_owned(),
        "wh_7ZZZZZZZZZZZZZZZZZZZZZZZZI".to_owned(),
        WorkspaceId::generate().to_string(),
        "undefined".to_owned(),
    ];
    cases.extend(strings(
        &["w", "h", "_", "0", "7", "8", "Z", "I", "L", "O", "U", "a"],
        30,
        5_000,
    ));
    for case in &cases {
        assert_eq!(
            pattern.is_match(case),
            case.parse::<WebhookId>().is_ok(),
            "{case:?}"
        );
    }
}

#[test]
fn the_attempt_cursor_pattern_is_exactly_the_cursor_rule() {
    let pattern = regex(&format!("^{}$", AttemptCursor::unanchored_pattern()));
    let event = EventId::generate().to_string();
    let mut cases = vec![format!("{event}:1"), format!("{event}:1:1795388289427")];
    // The longest number and time, and one digit more of each.
    for tail in [
        ":999999999:99999999999999",
        ":1:999999999999999",
        ":1234567890",
    ] {
        cases.push(format!("{event}{tail}"));
    }
    for tail in strings(&[":", "0", "9", "1234567", "+", "-", " ", "a"], 6, 5_000) {
        cases.push(format!("{event}{tail}"));
    }
    cases.extend(strings(&["evt_", &event[4..], ":", "1", "wh_"], 5, 2_000));
    for case in &cases {
        assert_eq!(
            pattern.is_match(case),
            case.parse::<AttemptCursor>().is_ok(),
            "{case:?}"
        );
    }
}

#[test]
fn what_the_url_pattern_matches_is_a_url_the_rules_accept() {
    let pattern = regex(WebhookUrl::PATTERN);
    for url in [
        "https://hooks.zapier.com/hooks/catch/123/abc/",
        "HTTPS://Example.COM:8443",
        "https://example.com./x?y=%20#z",
        "https://my_host.example.com/",
        "https://93.184.216.34/",
        "https://hook.eu1.make.com/abc",
        "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws/",
        "https://localhost:65535/",
    ] {
        assert!(pattern.is_match(url), "{url}");
        assert!(
            WebhookUrl::parse(url, TargetPolicy::AllowPrivate).is_ok(),
            "{url}"
        );
    }
    let alphabet = [
        "https://", "http://", "a", "Z", "0", "9", "255", "256", ".", "-", "_", ":", "/", "?", "#",
        "%", "%2f", "@", "[", "]", "{", " ", "\n", "é", "0x7f", ":0", ":65536",
    ];
    let mut matched = 0;
    for case in strings(&alphabet, 10, 200_000) {
        if pattern.is_match(&case) {
            matched += 1;
            assert!(
                WebhookUrl::parse(&case, TargetPolicy::AllowPrivate).is_ok(),
                "{case:?}"
            );
        }
    }
    assert!(matched > 100, "the corpus reaches the pattern: {matched}");
    // The longest host names the pattern takes stay within DNS's 253 characters.
    let longest = format!(
        "https://{}.{}{}/",
        "a".repeat(63),
        format!("{}.", "b".repeat(30)).repeat(5),
        "c".repeat(30)
    );
    assert!(pattern.is_match(&longest));
    assert!(WebhookUrl::parse(&longest, TargetPolicy::AllowPrivate).is_ok());
}

#[test]
fn what_the_email_pattern_matches_is_an_address_the_rules_accept() {
    let pattern = regex(EMAIL_PATTERN);
    let alphabet = [
        "a", "Z", "0", "_", "+", "-", ".", "@", "@ex.com", "@-x.io", ".io", ".c0", "..", "é", " ",
        "\"", "x-", "-x",
    ];
    let mut matched = 0;
    for case in strings(&alphabet, 7, 100_000) {
        if pattern.is_match(&case) {
            matched += 1;
            let data = json!({ "contact": { "id": "ct_1", "igUserId": "1", "username": "m",
                "email": case, "accountId": "acc_1", "automationId": "auto_1" } });
            assert!(
                EventPayload::new(
                    EventName::ContactEmailCaptured,
                    WorkspaceId::generate(),
                    data
                )
                .is_ok(),
                "{case:?}"
            );
        }
    }
    assert!(matched > 100, "the corpus reaches the pattern: {matched}");
    assert!(pattern.is_match("maria.lopez+news@mail.example.com"));
}
