//! The developer kit's commands (`docs/spec/devkit-v1.md`): `verify`, and the
//! HTTP clients `trigger` and `listen`. None of them opens a database.

use std::io::Read as _;

use anyhow::{Context as _, anyhow};
use hookline_delivery::Verification;
use hookline_domain::{Timestamp, WebhookSecret};
use serde::Serialize;

use crate::cli::VerifyArgs;
use crate::output::{Render, print};

/// What `verify --json` prints.
#[derive(Debug, Serialize)]
struct VerifiedOut {
    valid: bool,
    reason: String,
    matched: Option<String>,
}

impl Render for VerifiedOut {
    fn human(&self) -> String {
        let verdict = if self.valid { "valid" } else { "invalid" };
        format!("{verdict}: {}", self.reason)
    }
}

/// Checks a captured delivery with the worker's signing code: prints what it
/// found, and fails (exit 1) when it does not verify.
pub(crate) fn verify(json: bool, args: &VerifyArgs) -> anyhow::Result<()> {
    let secret = WebhookSecret::parse(args.secret.trim()).context("--secret")?;
    let found = match args.timestamp.trim().parse::<i64>() {
        Ok(timestamp) => {
            let body = read_body(args.body_file.as_deref())?;
            let now = args.now.unwrap_or_else(|| Timestamp::now().unix_seconds());
            hookline_delivery::verify(
                &secret,
                &args.id,
                timestamp,
                &body,
                &args.signature,
                args.tolerance,
                now,
            )
        }
        Err(_) => Verification::MalformedHeader(format!(
            "the webhook-timestamp `{}` is not a whole number of Unix seconds",
            args.timestamp
        )),
    };
    let out = VerifiedOut {
        valid: found.is_valid(),
        reason: found.to_string(),
        matched: found.matched().map(str::to_owned),
    };
    print(json, &out)?;
    if out.valid {
        Ok(())
    } else {
        Err(anyhow!("the delivery does not verify: {}", out.reason))
    }
}

/// The body, byte for byte, from the file or standard input.
fn read_body(path: Option<&std::path::Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read --body-file {}", path.display())),
        None => {
            let mut body = Vec::new();
            std::io::stdin()
                .read_to_end(&mut body)
                .context("cannot read the body from standard input")?;
            Ok(body)
        }
    }
}
