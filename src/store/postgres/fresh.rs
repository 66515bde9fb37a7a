//! A read that callers share only when it is fresh for each of them: one started after the
//! caller arrived. Every call of the default attempt on a fleet asks for the open exclusive
//! attempts ([`super::Postgres::open_exclusive_attempts`]); a call must see every exclusive
//! attempt created before it arrived (by any process), so a cached answer would let a call
//! that missed a just-created attempt go uncounted. Sharing a read that *starts* after a
//! caller's arrival is as good as the caller's own read: at most one read is in flight, and
//! every caller that arrived while it ran is served by the next one — one query per round
//! trip instead of one per call (docs/src/operations/fleet-store.md).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Shares reads among callers, each served by a read that started after it arrived.
pub(super) struct FreshRead<T> {
    /// Arrivals so far: a caller's ticket is the value after its own increment.
    arrivals: AtomicU64,
    /// One read at a time (FIFO, so callers waiting here find the next read's answer).
    flight: tokio::sync::Mutex<()>,
    /// The last read: the arrivals it covers (every ticket up to this number) and its answer.
    last: Mutex<(u64, Option<T>)>,
}

impl<T: Clone> FreshRead<T> {
    pub(super) fn new() -> Self {
        Self {
            arrivals: AtomicU64::new(0),
            flight: tokio::sync::Mutex::new(()),
            last: Mutex::new((0, None)),
        }
    }

    /// The answer of a read started after this call arrived: `read()` run now, or the answer
    /// of a read another caller started after this one's arrival.
    pub(super) async fn get<F, Fut>(&self, read: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let ticket = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(v) = self.covering(ticket) {
            return v;
        }
        let _flight = self.flight.lock().await;
        if let Some(v) = self.covering(ticket) {
            return v;
        }
        // Every caller that has a ticket by now arrived before this read starts.
        let covers = self.arrivals.load(Ordering::SeqCst);
        let v = read().await;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = (covers, Some(v.clone()));
        v
    }

    fn covering(&self, ticket: u64) -> Option<T> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &last.1 {
            Some(v) if last.0 >= ticket => Some(v.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FreshRead;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// A caller that arrives while a read is in flight is NOT served by that read (it may
    /// have started before something the caller must see), but by the next one.
    #[tokio::test]
    async fn a_caller_arriving_during_a_read_gets_a_later_read() {
        let fresh = Arc::new(FreshRead::<u64>::new());
        let source = Arc::new(AtomicU64::new(1));
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (fresh, source) = (fresh.clone(), source.clone());
            tokio::spawn(async move {
                fresh
                    .get(|| async move {
                        let v = source.load(Ordering::SeqCst);
                        started_tx.send(()).unwrap();
                        release_rx.await.unwrap();
                        v
                    })
                    .await
            })
        };
        started_rx.await.unwrap();
        // The value changes after the first read took its snapshot; the second caller
        // arrives after the change and must see it.
        source.store(2, Ordering::SeqCst);
        let second = {
            let (fresh, source) = (fresh.clone(), source.clone());
            tokio::spawn(async move {
                fresh
                    .get(|| async move { source.load(Ordering::SeqCst) })
                    .await
            })
        };
        tokio::task::yield_now().await;
        release_tx.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        assert_eq!(second.await.unwrap(), 2, "a stale read was shared");
    }

    /// Callers that arrive together share reads: far fewer reads than callers, and each
    /// answer is at least as new as the value when its caller arrived.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_reads_and_none_sees_an_older_value() {
        let fresh = Arc::new(FreshRead::<u64>::new());
        let source = Arc::new(AtomicU64::new(0));
        let reads = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..200 {
            let (fresh, source, reads) = (fresh.clone(), source.clone(), reads.clone());
            tasks.push(tokio::spawn(async move {
                let at_arrival = source.fetch_add(1, Ordering::SeqCst) + 1;
                let seen = fresh
                    .get(|| async {
                        reads.fetch_add(1, Ordering::SeqCst);
                        let v = source.load(Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        v
                    })
                    .await;
                (at_arrival, seen)
            }));
        }
        for t in tasks {
            let (at_arrival, seen) = t.await.unwrap();
            assert!(seen >= at_arrival, "saw {seen}, arrived at {at_arrival}");
        }
        let n = reads.load(Ordering::SeqCst);
        assert!(n < 200, "{n} reads for 200 callers: none shared");
    }
}
