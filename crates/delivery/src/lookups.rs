//! Name lookups shared by the connects that want the same name at the same time.
//!
//! A lookup is the system resolver's (`getaddrinfo`), run on one of Tokio's
//! blocking threads. When a busy webhook's receiver needs new connections (the
//! worker starts, or the receiver closed them), every free slot connects to it at
//! once. Each lookup took a blocking thread of its own, and each of those threads
//! then kept its own allocator heap (PERFORMANCE.md: the worker's peak RSS). The
//! connects that want a name while a lookup of it is running wait for that
//! lookup's answer. Nothing is kept once the lookup ends: the next connect asks
//! the resolver again, so a name's new answer is seen at once.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

/// A lookup's answer, kept so that each waiting connect gets its own copy.
type Answer = Result<Vec<SocketAddr>, (io::ErrorKind, String)>;

/// The lookups running now, by name and port.
type Running = HashMap<(String, u16), Arc<OnceCell<Answer>>>;

/// Where the connects of one client find the lookups running.
#[derive(Debug, Default)]
pub(crate) struct Lookups {
    running: Mutex<Running>,
}

impl Lookups {
    /// The addresses of `host`: those of the lookup of it that is running, or of
    /// a new one. If the connect running the lookup is dropped (its timeout),
    /// one of those waiting runs it.
    pub(crate) async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        self.shared(host, port, || async move {
            Ok(tokio::net::lookup_host((host, port)).await?.collect())
        })
        .await
    }

    /// [`Lookups::resolve`] with `lookup` as the resolver.
    async fn shared<F, Fut>(&self, host: &str, port: u16, lookup: F) -> io::Result<Vec<SocketAddr>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<Vec<SocketAddr>>>,
    {
        let key = (host.to_owned(), port);
        let running = Arc::clone(self.lock().entry(key.clone()).or_default());
        let waiting = Waiting {
            lookups: self,
            key,
            running,
        };
        let answer = waiting
            .running
            .get_or_init(|| async {
                lookup()
                    .await
                    .map_err(|error| (error.kind(), error.to_string()))
            })
            .await
            .clone();
        answer.map_err(|(kind, text)| io::Error::new(kind, text))
    }

    fn lock(&self) -> MutexGuard<'_, Running> {
        // The map is whole after any panic: each change is one call on it.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connect's wait for a lookup. However the wait ends (answered, or the
/// connect dropped), the lookup leaves the map once it has ended or no other
/// connect waits for it, so the map holds only lookups someone waits for.
struct Waiting<'a> {
    lookups: &'a Lookups,
    key: (String, u16),
    running: Arc<OnceCell<Answer>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut running = self.lookups.lock();
        // Counts rise only under this lock: two holders are the map and this wait.
        let last = self.running.initialized() || Arc::strong_count(&self.running) == 2;
        if last
            && running
                .get(&self.key)
                .is_some_and(|cell| Arc::ptr_eq(cell, &self.running))
        {
            running.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Poll;

    use tokio::sync::Semaphore;

    use super::*;

    type Connect<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + 'a>>;

    /// Polls each connect once: each runs until it waits.
    async fn run_until_waiting(connects: &mut [Connect<'_>]) {
        std::future::poll_fn(|cx| {
            for connect in connects.iter_mut() {
                assert!(connect.as_mut().poll(cx).is_pending());
            }
            Poll::Ready(())
        })
        .await;
    }

    #[tokio::test]
    async fn connects_at_once_share_one_lookup_and_a_later_one_looks_up_again() {
        let lookups = Lookups::default();
        let started = AtomicUsize::new(0);
        let answered = Semaphore::new(0);
        let addr: SocketAddr = "192.0.2.7:443".parse().expect("an address");
        let lookup = || async {
            started.fetch_add(1, Ordering::SeqCst);
            drop(answered.acquire().await);
            Ok(vec![addr])
        };
        let mut connects: Vec<Connect<'_>> = (0..8)
            .map(|_| Box::pin(lookups.shared("receiver.example", 443, lookup)) as Connect<'_>)
            .collect();
        run_until_waiting(&mut connects).await;
        assert_eq!(started.load(Ordering::SeqCst), 1);

        // The connect running the lookup gives up: the next one runs it.
        drop(connects.remove(0));
        run_until_waiting(&mut connects).await;
        assert_eq!(started.load(Ordering::SeqCst), 2);

        answered.add_permits(2);
        for connect in connects {
            assert_eq!(connect.await.expect("answered"), vec![addr]);
        }
        assert_eq!(started.load(Ordering::SeqCst), 2);
        assert!(lookups.lock().is_empty(), "an ended lookup is not kept");

        let again = lookups.shared("receiver.example", 443, lookup).await;
        assert_eq!(again.expect("answered"), vec![addr]);
        assert_eq!(started.load(Ordering::SeqCst), 3);
        assert!(lookups.lock().is_empty());
    }

    #[tokio::test]
    async fn a_lookup_every_connect_gave_up_on_is_not_kept() {
        let lookups = Lookups::default();
        let lookup = || std::future::pending::<io::Result<Vec<SocketAddr>>>();
        let mut connects: Vec<Connect<'_>> = (0..3)
            .map(|_| Box::pin(lookups.shared("slow.example", 443, lookup)) as Connect<'_>)
            .collect();
        run_until_waiting(&mut connects).await;
        assert_eq!(lookups.lock().len(), 1);
        drop(connects.remove(0));
        assert_eq!(lookups.lock().len(), 1, "two connects still wait");
        drop(connects);
        assert!(lookups.lock().is_empty());
    }

    #[tokio::test]
    async fn a_failed_lookup_fails_each_connect_that_waited_for_it() {
        let lookups = Lookups::default();
        let lookup = || async { Err(io::Error::new(io::ErrorKind::NotFound, "no such name")) };
        let (one, two) = tokio::join!(
            lookups.shared("gone.example", 443, lookup),
            lookups.shared("gone.example", 443, lookup)
        );
        for answer in [one, two] {
            let error = answer.expect_err("the lookup failed");
            assert_eq!(
                (error.kind(), error.to_string()),
                (io::ErrorKind::NotFound, "no such name".to_owned())
            );
        }
        assert!(lookups.lock().is_empty());
    }

    #[tokio::test]
    async fn the_system_resolver_answers_localhost() {
        let addrs = Lookups::default().resolve("localhost", 8443).await;
        let addrs = addrs.expect("localhost is known");
        assert!(addrs.iter().all(|addr| addr.port() == 8443));
        assert!(
            addrs.iter().any(|addr| addr.ip().is_loopback()),
            "{addrs:?}"
        );
    }
}
