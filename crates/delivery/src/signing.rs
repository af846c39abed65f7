//! Standard Webhooks v1 signatures (<https://www.standardwebhooks.com>).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hookline_domain::WebhookSecret;
use ring::hmac;

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

#[cfg(test)]
mod tests {
    use super::*;

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
