//! `hookline`: the service and its operator CLI ("Settings" in the specification).
//!
//! Argument parsing and wiring only: every rule lives in the library crates.

mod allocator;
mod cli;
mod commands;
mod devkit;
mod logging;
mod output;
mod priority;

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    allocator::return_freed_memory_promptly();
    priority::note_the_starting_value();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return cli::exit_on_usage_error(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        // A blocking thread the delivery threads create starts with their value.
        .on_thread_start(|| priority::set_this_thread(0))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::from(error)),
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// One line on stderr, whatever the error's own text holds.
fn fail(error: &anyhow::Error) -> ExitCode {
    let message = one_line(&format!("{error:#}"));
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::FAILURE
}

/// `text` as one line that shows what it holds: control characters (a `\r` in an
/// echoed argument would move the cursor and hide what precedes it), line and
/// paragraph separators and the bidirectional overrides are written as escapes.
pub(crate) fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                line.push_str(&c.escape_unicode().to_string());
            }
            c => line.push(c),
        }
    }
    line
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_escapes_what_would_break_or_hide_the_line() {
        assert_eq!(super::one_line("plain: ñ é"), "plain: ñ é");
        assert_eq!(super::one_line("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(super::one_line("x\u{2028}y\u{7}z"), "x\\u{2028}y\\u{7}z");
        assert_eq!(super::one_line("\u{202e}evil"), "\\u{202e}evil");
    }
}
