//! Answers rendered once per shared read. The requests of one key-check batch
//! that list one workspace's webhooks are handed one read of them, shared (an
//! `Arc`: `WorkspaceReading::Webhooks`), and answer the same body: the first
//! to render it keeps it here, and the others of the batch copy it, instead of
//! each serialising the same list again (see PERFORMANCE.md, "GET /hooks
//! rendered once per batch, and a settle per webhook").

use std::sync::{Arc, Mutex, PoisonError, Weak};

use hyper::body::Bytes;

/// Bodies kept at most: more than the workspaces whose reads one batch
/// shares at a time; past it a body is rendered but not kept.
const MOST_KEPT: usize = 32;

/// The bodies rendered of the reads still held by some request, each found by
/// its read's address. A read's [`Weak`] keeps its allocation, so no other read
/// can be at that address while its body is kept; bodies of reads that every
/// request has let go are dropped as others are kept.
pub(crate) struct RenderedOnce<T: ?Sized> {
    bodies: Mutex<Vec<(Weak<T>, Bytes)>>,
}

impl<T: ?Sized> Default for RenderedOnce<T> {
    fn default() -> Self {
        RenderedOnce {
            bodies: Mutex::new(Vec::new()),
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for RenderedOnce<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderedOnce")
            .field("kept", &self.lock().len())
            .finish()
    }
}

impl<T: ?Sized> RenderedOnce<T> {
    /// The body `render` makes of `read`: made once for all the requests
    /// holding that same read, and made for each of a read nobody else holds.
    /// `render` must depend on nothing but `read`.
    pub(crate) fn body(&self, read: &Arc<T>, render: impl FnOnce(&T) -> Bytes) -> Bytes {
        if Arc::strong_count(read) == 1 {
            // Nobody else will ask for it: not worth keeping.
            return render(read);
        }
        if let Some(body) = self
            .lock()
            .iter()
            .find(|(kept, _)| std::ptr::addr_eq(kept.as_ptr(), Arc::as_ptr(read)))
            .map(|(_, body)| body.clone())
        {
            return body;
        }
        let body = render(read);
        let mut bodies = self.lock();
        bodies.retain(|(kept, _)| kept.strong_count() > 0);
        if bodies.len() < MOST_KEPT {
            bodies.push((Arc::downgrade(read), body.clone()));
        }
        body
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Weak<T>, Bytes)>> {
        self.bodies.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn render(renders: &Cell<u32>) -> impl FnOnce(&[u32]) -> Bytes + '_ {
        move |read| {
            renders.set(renders.get() + 1);
            Bytes::from(format!("{read:?}"))
        }
    }

    #[test]
    fn a_shared_read_is_rendered_once() {
        let once = RenderedOnce::<[u32]>::default();
        let renders = Cell::new(0);
        let read: Arc<[u32]> = Arc::from([1, 2, 3]);
        let held_by_another = Arc::clone(&read);
        assert_eq!(once.body(&read, render(&renders)), "[1, 2, 3]");
        assert_eq!(once.body(&held_by_another, render(&renders)), "[1, 2, 3]");
        assert_eq!(renders.get(), 1);
    }

    #[test]
    fn another_read_is_rendered_anew_even_when_equal() {
        let once = RenderedOnce::<[u32]>::default();
        let renders = Cell::new(0);
        let first: Arc<[u32]> = Arc::from([1]);
        let _held = Arc::clone(&first);
        let second: Arc<[u32]> = Arc::from([1]);
        let _also_held = Arc::clone(&second);
        once.body(&first, render(&renders));
        once.body(&second, render(&renders));
        assert_eq!(renders.get(), 2);
    }

    #[test]
    fn a_read_nobody_else_holds_is_not_kept() {
        let once = RenderedOnce::<[u32]>::default();
        let renders = Cell::new(0);
        let alone: Arc<[u32]> = Arc::from([7]);
        once.body(&alone, render(&renders));
        once.body(&alone, render(&renders));
        assert_eq!(renders.get(), 2);
        assert_eq!(once.lock().len(), 0);
    }

    #[test]
    fn bodies_of_reads_let_go_are_dropped_as_others_are_kept() {
        let once = RenderedOnce::<[u32]>::default();
        let renders = Cell::new(0);
        for n in 0..100 {
            let read: Arc<[u32]> = Arc::from([n]);
            let _held = Arc::clone(&read);
            once.body(&read, render(&renders));
        }
        assert_eq!(renders.get(), 100);
        assert!(
            once.lock().len() <= 1,
            "only the last read's body may be left"
        );
    }

    #[test]
    fn past_the_most_kept_a_body_is_rendered_but_not_kept() {
        let once = RenderedOnce::<[u32]>::default();
        let renders = Cell::new(0);
        let reads: Vec<Arc<[u32]>> = (0..40).map(|n| Arc::from([n])).collect();
        let held: Vec<Arc<[u32]>> = reads.iter().map(Arc::clone).collect();
        for read in &reads {
            once.body(read, render(&renders));
        }
        assert_eq!(once.lock().len(), MOST_KEPT);
        for read in &held {
            once.body(read, render(&renders));
        }
        assert_eq!(renders.get(), 40 + 40 - MOST_KEPT as u32);
    }
}
