//! The text log line for files and pipes: the very text tracing-subscriber's
//! default format (`Full`, without colours) writes, byte for byte, written
//! straight into the line. The library's formatter goes through `fmt` machinery
//! for every piece (the timestamp's seven padded numbers, a style painted around
//! each name, an escaping writer fed one character at a time), and every request
//! logs a line: see PERFORMANCE.md, "The text log line written by hand, and
//! the connection watchdog woken only when waited on". A
//! terminal keeps the library's own formatter and its colours.
//!
//! `tests::writes_what_the_library_writes` holds the two texts equal.

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use hookline_domain::Timestamp;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// An event's line: `{time} {LEVEL} {span}{{fields}}:…: {target}: {fields}`.
#[derive(Debug, Default)]
pub(crate) struct TextLine<T = LogTime> {
    time: T,
}

impl<S, T> FormatEvent<S, TextFields> for TextLine<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, TextFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if self.time.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        writer.write_str(level(meta.level()))?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                seen = true;
                if let Some(fields) = span.extensions().get::<FormattedFields<TextFields>>()
                    && !fields.is_empty()
                {
                    writer.write_char('{')?;
                    writer.write_str(fields)?;
                    writer.write_char('}')?;
                }
                writer.write_char(':')?;
            }
            if seen {
                writer.write_char(' ')?;
            }
        }
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

/// The level as the library pads it, with the space after the time before it
/// and the space after it.
fn level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => " TRACE ",
        Level::DEBUG => " DEBUG ",
        Level::INFO => "  INFO ",
        Level::WARN => "  WARN ",
        Level::ERROR => " ERROR ",
    }
}

/// Fields as the library's `DefaultFields` writes them: the message bare
/// (control characters escaped), then `name=value` with values in `Debug`,
/// one space between.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TextFields;

impl<'writer> FormatFields<'writer> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = FieldWriter {
            sanitize: writer.sanitizes_ansi_escapes(),
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct FieldWriter<'writer> {
    writer: Writer<'writer>,
    sanitize: bool,
    first: bool,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    /// The space before every field but the first, and the `name=` of a field
    /// that is not the message; false when the message is to be written.
    fn start(&mut self, field: &Field) -> bool {
        if !std::mem::take(&mut self.first) {
            self.result = self.writer.write_char(' ');
        }
        let name = field.name();
        if name == "message" {
            return false;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = self
            .result
            .and_then(|()| self.writer.write_str(name))
            .and_then(|()| self.writer.write_char('='));
        true
    }

    /// A number or a truth value: the same text in `Debug` as in `Display`,
    /// with nothing to escape.
    fn plain(&mut self, field: &Field, value: impl fmt::Display) {
        if self.result.is_ok() {
            self.start(field);
            if self.result.is_ok() {
                self.result = write!(self.writer, "{value}");
            }
        }
    }
}

impl Visit for FieldWriter<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.plain(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.plain(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.plain(field, value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let sanitize = self.sanitize;
        let error = Escaped(format_args!("{value}"), sanitize);
        match value.source() {
            Some(source) => self.record_debug(
                field,
                &format_args!(
                    "{error} {}.sources={}",
                    field.name(),
                    Sources(source, sanitize)
                ),
            ),
            None => self.record_debug(field, &format_args!("{error}")),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let named = self.start(field);
        if self.result.is_err() {
            return;
        }
        self.result = if named || !self.sanitize {
            write!(self.writer, "{value:?}")
        } else {
            write!(Escaping(&mut self.writer), "{value:?}")
        };
    }
}

/// An error's sources, `[first, second]`, each escaped as the message is.
struct Sources<'a>(&'a (dyn std::error::Error + 'static), bool);

impl fmt::Display for Sources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        let mut next = Some(self.0);
        while let Some(error) = next {
            list.entry(&Escaped(format_args!("{error}"), self.1));
            next = error.source();
        }
        list.finish()
    }
}

/// A value whose control characters are escaped when the flag says so.
struct Escaped<T>(T, bool);

impl<T: fmt::Display> fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 {
            write!(Escaping(f), "{}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl<T: fmt::Display> fmt::Debug for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Writes through, escaping what a terminal would act on (ESC, BEL, BS, FF,
/// DEL and the C1 controls), as the library's sanitizing does: a text without
/// any goes out in one write.
struct Escaping<W>(W);

impl<W: fmt::Write> fmt::Write for Escaping<W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut clean_from = 0;
        for (at, ch) in text.char_indices() {
            let escaped = match ch {
                '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' | '\u{80}'..='\u{9f}' => ch,
                _ => continue,
            };
            self.0.write_str(&text[clean_from..at])?;
            match escaped {
                '\u{80}'..='\u{9f}' => write!(self.0, "\\u{{{:x}}}", u32::from(escaped))?,
                _ => write!(self.0, "\\x{:02x}", u32::from(escaped))?,
            }
            clean_from = at + ch.len_utf8();
        }
        self.0.write_str(&text[clean_from..])
    }
}

/// The system clock as the library writes it (`2026-12-01T21:31:00.123456Z`),
/// the date and time of day made once a second per thread.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LogTime;

impl FormatTime for LogTime {
    fn format_time(&self, writer: &mut Writer<'_>) -> fmt::Result {
        // A clock before 1970 or past 9999: the library's own formatter, which
        // writes such years (reading the clock itself).
        write_time(writer, SystemTime::now())
            .unwrap_or_else(|| tracing_subscriber::fmt::time::SystemTime.format_time(writer))
    }
}

thread_local! {
    /// The second last written by this thread, and its `YYYY-MM-DDTHH:MM:SS.`.
    static SECOND: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
}

/// `at`, with microseconds; `None` for an instant `Timestamp` cannot hold
/// (before 1970, past 9999), with nothing written.
fn write_time(writer: &mut Writer<'_>, at: SystemTime) -> Option<fmt::Result> {
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    let (seconds, micros) = (since.as_secs(), since.subsec_micros());
    let (cached, mut prefix) = SECOND.get();
    if cached != seconds {
        let millis = i64::try_from(seconds).ok()?.checked_mul(1000)?;
        let day = Timestamp::from_unix_millis(millis).ok()?;
        let text = day.to_string();
        prefix.copy_from_slice(&text.as_bytes()[..20]);
        SECOND.set((seconds, prefix));
    }
    let mut tail = *b"000000Z";
    let mut rest = micros;
    for digit in tail[..6].iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let (Ok(prefix), Ok(tail)) = (std::str::from_utf8(&prefix), std::str::from_utf8(&tail)) else {
        return Some(Err(fmt::Error));
    };
    Some(
        writer
            .write_str(prefix)
            .and_then(|()| writer.write_str(tail)),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Where a test subscriber's lines go.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl MakeWriter<'_> for Captured {
        type Writer = Captured;

        fn make_writer(&self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Both formatters are given this one time.
    #[derive(Clone, Copy)]
    struct Fixed;

    impl FormatTime for Fixed {
        fn format_time(&self, writer: &mut Writer<'_>) -> fmt::Result {
            writer.write_str("2026-12-01T21:31:00.123456Z")
        }
    }

    #[derive(Debug)]
    struct Outer(Inner);

    #[derive(Debug)]
    struct Inner;

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer \x1b[31mred")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("inner \u{9b} cause")
        }
    }

    impl std::error::Error for Inner {}

    /// Every kind of field, span and message this process logs.
    fn log_everything() {
        let request = tracing::info_span!(
            "request",
            request_id = %"req_01",
            method = %"GET",
            route = tracing::field::Empty,
            workspace = tracing::field::Empty,
        );
        let _request = request.enter();
        tracing::info!("a line in a span");
        request.record("route", "/api/v1/me");
        request.record("workspace", tracing::field::display("ws_1"));
        let inner = tracing::debug_span!("attempt", attempt = 3_u64, ok = true);
        let _inner = inner.enter();
        tracing::info!(status = 200_u16, latency_us = 812_u64, "request");
        tracing::warn!(
            delta = -4_i64,
            ratio = 0.5_f64,
            big = 1_u128 << 70,
            "numbers"
        );
        tracing::error!(
            error = &Outer(Inner) as &(dyn std::error::Error + 'static),
            "failed"
        );
        tracing::error!(error = &Inner as &(dyn std::error::Error + 'static));
        tracing::info!(
            r#type = "quoted \"text\"\n",
            "escaped \x1b[2J\x07\x08\x0c\x7f\u{85} é"
        );
        tracing::info!(message = "message as a str \x1b", other = ?Some("x"));
        tracing::trace!(bytes = ?b"ab", "trace");
        tracing::debug!(id = %"wh_1", "debug");
        tracing::info!(name = "only fields");
        drop(_inner);
        tracing::info_span!("empty").in_scope(|| tracing::info!("in an empty span"));
    }

    #[test]
    fn writes_what_the_library_writes() {
        let (ours, theirs) = (Captured::default(), Captured::default());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(ours.clone())
            .with_max_level(tracing::level_filters::LevelFilter::TRACE)
            .with_ansi(false)
            .fmt_fields(TextFields)
            .event_format(TextLine { time: Fixed })
            .finish();
        tracing::subscriber::with_default(subscriber, log_everything);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(theirs.clone())
            .with_max_level(tracing::level_filters::LevelFilter::TRACE)
            .with_ansi(false)
            .with_timer(Fixed)
            .finish();
        tracing::subscriber::with_default(subscriber, log_everything);
        let (ours, theirs) = (ours.text(), theirs.text());
        assert_eq!(ours.lines().count(), 11, "{ours}");
        for (ours, theirs) in ours.lines().zip(theirs.lines()) {
            assert_eq!(ours, theirs);
        }
        assert_eq!(ours, theirs);
    }

    /// The time written for `at`, as one line's start.
    fn time_of(at: SystemTime) -> String {
        let mut text = String::new();
        write_time(&mut Writer::new(&mut text), at)
            .unwrap()
            .unwrap();
        text
    }

    #[test]
    fn writes_the_time_with_microseconds() {
        let second = UNIX_EPOCH + Duration::from_secs(1_796_160_660);
        assert_eq!(
            time_of(second + Duration::from_nanos(123_456_789)),
            "2026-12-01T21:31:00.123456Z"
        );
        assert_eq!(
            time_of(second + Duration::from_micros(7)),
            "2026-12-01T21:31:00.000007Z"
        );
        // The next second, and back: the cached second is replaced each time.
        assert_eq!(
            time_of(second + Duration::from_millis(1_999)),
            "2026-12-01T21:31:01.999000Z"
        );
        assert_eq!(time_of(second), "2026-12-01T21:31:00.000000Z");
        assert_eq!(
            time_of(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000000Z"
        );
        // Out of `Timestamp`'s range: nothing written, for the library to write.
        let mut text = String::new();
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert!(write_time(&mut Writer::new(&mut text), before).is_none());
        assert_eq!(text, "");
    }
}
