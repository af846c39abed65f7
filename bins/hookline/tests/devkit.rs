//! The developer kit's commands as a receiver's developer runs them
//! (`docs/spec/devkit-v1.md`): the built binary, checked by its output and exit
//! status.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::process::{Output, Stdio};

use hookline_domain::WebhookSecret;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY: &str = r#"{"type":"dm.sent","data":{"messageId":"m_1"}}"#;
const ID: &str = "evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R";
const AT: i64 = 1_764_000_000;

/// Runs `hookline verify --json` on a delivery signed with [`SECRET`], changed as
/// `args` says (later flags win), with `body` on standard input.
async fn verify(body: &str, args: &[&str]) -> (Output, Value) {
    let secret = WebhookSecret::parse(SECRET).unwrap();
    let signature = hookline_delivery::sign(&secret, ID, AT, BODY.as_bytes());
    let at = AT.to_string();
    let mut all = vec![
        "verify",
        "--json",
        "--secret",
        SECRET,
        "--id",
        ID,
        "--timestamp",
        &at,
        "--signature",
        &signature,
        "--now",
        "1764000060",
    ];
    all.extend_from_slice(args);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(dedup_flags(&all))
        .env_remove("HOOKLINE_WEBHOOK_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(body.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}): {out:?}"));
    (out, json)
}

/// The flags with a later repeat of a `--flag value` pair replacing the earlier.
fn dedup_flags<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = vec![args[0], args[1]];
    for pair in args[2..].chunks(2) {
        match out.iter().position(|arg| *arg == pair[0]) {
            Some(at) => out[at + 1] = pair[1],
            None => out.extend_from_slice(pair),
        }
    }
    out
}

#[tokio::test]
async fn verify_accepts_a_delivery_as_signed() {
    let (out, json) = verify(BODY, &[]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json["valid"], true);
    assert_eq!(
        json["reason"],
        "a signature matches and the timestamp is 1m old"
    );
    assert!(json["matched"].as_str().unwrap().starts_with("v1,"));
}

#[tokio::test]
async fn verify_says_why_a_delivery_does_not_verify() {
    let changed = r#"{"type":"dm.sent","data":{"messageId":"m_2"}}"#;
    let cases: [(&str, &[&str], &str); 4] = [
        (
            changed,
            &[],
            "matches none of the 1 given: the body, id, timestamp or secret differ",
        ),
        (
            BODY,
            &["--secret", "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk="],
            "matches none",
        ),
        (
            BODY,
            &["--now", "1764003600"],
            "the timestamp is 1h old, more than the tolerance of 5m",
        ),
        (
            BODY,
            &["--signature", "v1,???"],
            "the webhook-signature header is malformed",
        ),
    ];
    for (body, args, reason) in cases {
        let (out, json) = verify(body, args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(json["valid"], false, "{args:?}");
        let said = json["reason"].as_str().unwrap();
        assert!(said.contains(reason), "{args:?}: {said}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: the delivery does not verify"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn verify_reads_the_body_from_a_file_and_a_wider_tolerance() {
    let dir = std::env::temp_dir().join(format!("hookline-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body.json");
    std::fs::write(&file, BODY).unwrap();
    let path = file.to_str().unwrap();
    let (out, json) = verify(
        "",
        &[
            "--body-file",
            path,
            "--now",
            "1764003600",
            "--tolerance",
            "2h",
        ],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json["valid"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}
