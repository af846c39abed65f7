//! Standard Webhooks v1 signatures (<https://www.standardwebhooks.com>).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hookline_domain::{ClaimedDelivery, Timestamp, WebhookSecret};
use ring::hmac;
use std::time::Duration;

/// The `webhook-signature` value for one attempt: `v1,` and the base64 HMAC-SHA256,
/// keyed with the secret's bytes, of `{id}.{timestamp}.{body}`.
pub fn sign(secret: &WebhookSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, &secret.key_bytes());
    let mut context = hmac::Context::with_key(&key);
    context.update(id.as_bytes());
    context.update(b".");
    context.update(timestamp.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    format!("v1,{}", STANDARD.encode(context.sign().as_ref()))
}

/// The Standard Webhooks headers of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: the event's id, the same on every attempt (receivers
    /// deduplicate by it).
    pub id: String,
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp: i64,
    /// `webhook-signature`: during a rotation's grace the old secret signs too,
    /// so a receiver holding either verifies.
    pub signature: String,
}

impl SignedHeaders {
    /// The headers of an attempt of `delivery` made `at`.
    pub fn of(delivery: &ClaimedDelivery, at: Timestamp) -> SignedHeaders {
        let id = delivery.event_id.to_string();
        let timestamp = at.unix_seconds();
        let body = delivery.payload.as_bytes();
        let signature = match &delivery.previous_secret {
            None => sign(&delivery.secret, &id, timestamp, body),
            Some(previous) => format!(
                "{} {}",
                sign(&delivery.secret, &id, timestamp, body),
                sign(previous, &id, timestamp, body)
            ),
        };
        SignedHeaders {
            id,
            timestamp,
            signature,
        }
    }
}

/// What [`verify`] found in a captured delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// One signature matches (`matched`, as given) and the timestamp is
    /// within tolerance, `age` seconds from now (negative: ahead of it).
    Valid {
        /// The signature that matched.
        matched: String,
        /// Seconds between the timestamp and now.
        age: i64,
    },
    /// The `webhook-signature` value holds no `v1,` signature, or one that is not
    /// base64 of 32 bytes.
    MalformedHeader(String),
    /// Well formed, but none was made with this secret of this id, timestamp and
    /// body.
    NoMatch {
        /// How many `v1,` signatures the header held.
        given: usize,
    },
    /// A signature matches, but the timestamp is `age` seconds from now, more
    /// than the tolerance.
    OutsideTolerance {
        /// The signature that matched.
        matched: String,
        /// Seconds between the timestamp and now.
        age: i64,
        /// How far it may be.
        tolerance: Duration,
    },
}

impl Verification {
    /// Whether the delivery verifies.
    pub fn is_valid(&self) -> bool {
        matches!(self, Verification::Valid { .. })
    }

    /// The signature that matched, if one did.
    pub fn matched(&self) -> Option<&str> {
        match self {
            Verification::Valid { matched, .. }
            | Verification::OutsideTolerance { matched, .. } => Some(matched),
            _ => None,
        }
    }
}

/// Says what it found, in words a receiver's developer can act on.
impl std::fmt::Display for Verification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verification::Valid { age, .. } => write!(
                f,
                "a signature matches and the timestamp is {}",
                describe_age(*age)
            ),
            Verification::MalformedHeader(why) => {
                write!(f, "the webhook-signature header is malformed: {why}")
            }
            Verification::NoMatch { given } => write!(
                f,
                "the signature matches none of the {given} given: the body, id, timestamp or secret differ from what was signed"
            ),
            Verification::OutsideTolerance { age, tolerance, .. } => write!(
                f,
                "a signature matches, but the timestamp is {}, more than the tolerance of {}",
                describe_age(*age),
                humanize(tolerance.as_secs())
            ),
        }
    }
}

fn describe_age(age: i64) -> String {
    match age {
        0 => "now".to_owned(),
        age if age > 0 => format!("{} old", humanize(age.unsigned_abs())),
        age => format!("{} in the future", humanize(age.unsigned_abs())),
    }
}

/// Seconds as `1h 2m 3s`.
fn humanize(seconds: u64) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if s > 0 || parts.is_empty() {
        parts.push(format!("{s}s"));
    }
    parts.join(" ")
}

/// Checks a delivery as a receiver would, with the code that signs them: one of
/// the space-separated `v1,…` signatures of `header` must be [`sign`]'s for
/// `secret`, and `timestamp` within `tolerance` of `now` (both in Unix
/// seconds). Signatures of other versions are skipped, as the specification
/// says. The comparison takes the same time wherever the bytes differ.
pub fn verify(
    secret: &WebhookSecret,
    id: &str,
    timestamp: i64,
    body: &[u8],
    header: &str,
    tolerance: Duration,
    now: i64,
) -> Verification {
    let mut given = Vec::new();
    for signature in header.split_whitespace() {
        let Some((version, value)) = signature.split_once(',') else {
            return Verification::MalformedHeader(format!("`{signature}` is not `version,base64`"));
        };
        if version != "v1" {
            continue;
        }
        match STANDARD.decode(value) {
            Ok(bytes) if bytes.len() == 32 => given.push((signature, bytes)),
            _ => {
                return Verification::MalformedHeader(format!(
                    "`{signature}` is not base64 of a 32-byte HMAC-SHA256"
                ));
            }
        }
    }
    if given.is_empty() {
        return Verification::MalformedHeader("it holds no `v1,` signature".to_owned());
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, &secret.key_bytes());
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let Some(matched) = given
        .iter()
        .find(|(_, bytes)| hmac::verify(&key, &signed, bytes).is_ok())
        .map(|(signature, _)| (*signature).to_owned())
    else {
        return Verification::NoMatch { given: given.len() };
    };
    let age = now.saturating_sub(timestamp);
    if age.unsigned_abs() > tolerance.as_secs() {
        return Verification::OutsideTolerance {
            matched,
            age,
            tolerance,
        };
    }
    Verification::Valid { matched, age }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn check(header: &str, timestamp: i64, body: &[u8], now: i64) -> Verification {
        let secret = WebhookSecret::parse(SECRET).unwrap();
        verify(
            &secret,
            ID,
            timestamp,
            body,
            header,
            Duration::from_secs(300),
            now,
        )
    }

    #[test]
    fn verifies_the_reference_vector_among_others() {
        let header = format!("v2,abc v1,{} {SIGNATURE}", STANDARD.encode([7u8; 32]));
        let found = check(&header, 1614265330, BODY, 1614265333);
        assert_eq!(
            found,
            Verification::Valid {
                matched: SIGNATURE.to_owned(),
                age: 3
            }
        );
        assert_eq!(
            found.to_string(),
            "a signature matches and the timestamp is 3s old"
        );
    }

    #[test]
    fn says_why_a_delivery_does_not_verify() {
        let changed = check(SIGNATURE, 1614265330, br#"{"test": 1}"#, 1614265330);
        assert_eq!(changed, Verification::NoMatch { given: 1 });
        let old = check(SIGNATURE, 1614265330, BODY, 1614265330 + 3723);
        assert!(!old.is_valid());
        assert_eq!(old.matched(), Some(SIGNATURE));
        assert_eq!(
            old.to_string(),
            "a signature matches, but the timestamp is 1h 2m 3s old, more than the tolerance of 5m"
        );
        let ahead = check(SIGNATURE, 1614265330, BODY, 1614265330 - 600);
        assert!(ahead.to_string().contains("10m in the future"));
        for malformed in ["", "v1", "v1,not-base64!", "v2,abc"] {
            assert!(
                matches!(
                    check(malformed, 1614265330, BODY, 1614265330),
                    Verification::MalformedHeader(_)
                ),
                "{malformed}"
            );
        }
    }

    /// The example of the Standard Webhooks specification's reference test suite.
    #[test]
    fn matches_the_reference_vector() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = sign(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
