//! A response body: whole, or a stream that goes on after its head (a listener's
//! Server-Sent Events). A stream holds its connection's in-flight guard, so the
//! connection is never idle (nor evicted) while it streams.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::sync::mpsc;

use crate::transport::connections::InFlight;

/// A response body: whole, or a stream.
pub(crate) enum AnswerBody {
    Whole(Full<Bytes>),
    Stream {
        frames: mpsc::Receiver<Bytes>,
        /// Held, not read: the request stays in flight while the stream lasts.
        _in_flight: Option<InFlight>,
    },
}

impl From<Full<Bytes>> for AnswerBody {
    fn from(body: Full<Bytes>) -> Self {
        AnswerBody::Whole(body)
    }
}

impl AnswerBody {
    /// The body, keeping `in_flight` for as long as a stream lasts (a whole
    /// body lets it go at once: its request is answered).
    pub(crate) fn holding(self, guard: InFlight) -> Self {
        match self {
            AnswerBody::Stream { frames, .. } => AnswerBody::Stream {
                frames,
                _in_flight: Some(guard),
            },
            whole => whole,
        }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            AnswerBody::Whole(body) => Pin::new(body).poll_frame(cx),
            AnswerBody::Stream { frames, .. } => frames
                .poll_recv(cx)
                .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AnswerBody::Whole(body) => body.is_end_stream(),
            AnswerBody::Stream { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            AnswerBody::Whole(body) => body.size_hint(),
            AnswerBody::Stream { .. } => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::transport::connections::{Closing, Connections};

    /// A stream keeps its connection busy (never idle, never evicted) for as
    /// long as it lasts; a whole answer lets it idle at once.
    #[tokio::test(start_paused = true)]
    async fn a_stream_holds_its_connection_in_flight_until_it_ends() {
        let connections = Connections::new(4);
        let tracked = connections.open();
        let (first, idle) = (Duration::from_secs(10), Duration::from_secs(30));
        let (sender, frames) = mpsc::channel(1);
        let body = AnswerBody::Stream {
            frames,
            _in_flight: None,
        }
        .holding(connections.request(&tracked));
        let waiting =
            tokio::time::timeout(Duration::from_secs(3600), tracked.should_close(first, idle));
        assert!(waiting.await.is_err(), "an hour of streaming is not idle");
        drop(sender);
        drop(body);
        let ended = tokio::time::Instant::now();
        assert_eq!(tracked.should_close(first, idle).await, Closing::Idle);
        assert_eq!(ended.elapsed(), idle, "idle from the stream's end");

        let whole = AnswerBody::from(Full::new(Bytes::from_static(b"{}")))
            .holding(connections.request(&tracked));
        let answered = tokio::time::Instant::now();
        assert_eq!(tracked.should_close(first, idle).await, Closing::Idle);
        assert_eq!(
            answered.elapsed(),
            idle,
            "a whole answer is done when it is made"
        );
        drop(whole);
    }
}
