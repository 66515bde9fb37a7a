//! A call's hold of its attempt's lease, from `lock_call` to its write ([`super`]'s module
//! doc), and the ways it ends without a write: a read, a failed call, a caller that went
//! away (a client that hung up) — none may leave the hold counted, or the lease would never
//! be given back and every other process would time out on the attempt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::super::{lock, Shared};
use super::{Acquired, State};
use crate::store::StoreError;

/// A call's hold of an attempt, from `lock_call` to its write.
pub(super) enum Hold {
    /// `fresh`: taking it read the attempt's state for the caller to apply (the copy is
    /// stale if the caller goes away without it).
    Owned {
        token: u64,
        own_id: u64,
        fresh: bool,
    },
    Failed {
        token: u64,
        message: String,
    },
}

impl Hold {
    pub(super) fn token(&self) -> u64 {
        match self {
            Hold::Owned { token, .. } | Hold::Failed { token, .. } => *token,
        }
    }
}

impl Shared {
    /// Step 1 of a call without leaving the caller's task, when the lease is held and the
    /// copy current ([`Shared::hold_if_current`]): the hold is recorded as `lock_call`
    /// records it. `false`: nothing was taken, call `lock_call`.
    pub(in crate::store::postgres) fn lock_call_now(&self, attempt_id: &str, token: u64) -> bool {
        let mut st = lock(&self.lane.st);
        let Some(own_id) = self.hold_if_current(&mut st, attempt_id) else {
            return false;
        };
        self.record_hold(&mut st, attempt_id, token, own_id, false);
        true
    }

    /// Step 1 of a call: hold the attempt's lease (taking it when this process has not got
    /// it). `Ok(None)`: this process's in-memory state is current; `Ok(Some)`: apply it.
    ///
    /// `gone`: set (under the lane's lock, by [`Shared::abandon`]) when the caller went away
    /// before this returned — a client that hung up. The hold then ends here instead of
    /// being kept for a write that will never come.
    pub(in crate::store::postgres) async fn lock_call(
        self: &Arc<Self>,
        attempt_id: &str,
        token: u64,
        gone: &AtomicBool,
    ) -> Result<Acquired, StoreError> {
        let r = self.hold(attempt_id).await;
        let mut st = lock(&self.lane.st);
        if gone.load(Ordering::Relaxed) {
            // Nobody applies the state read for it: the copy is stale, read it again.
            if let Ok((own_id, fresh)) = &r {
                self.end_hold(&mut st, attempt_id, *own_id, fresh.is_some());
            }
            return r.map(|_| None);
        }
        match r {
            Ok((own_id, fresh)) => {
                self.record_hold(&mut st, attempt_id, token, own_id, fresh.is_some());
                Ok(fresh)
            }
            Err(e) => {
                st.holds.insert(
                    attempt_id.to_string(),
                    Hold::Failed {
                        token,
                        message: e.to_string(),
                    },
                );
                Err(e)
            }
        }
    }

    /// Records the call's hold (`fresh`: taking it read the state for the caller). One hold
    /// per attempt is kept: a hold still there belongs to a call that went away before
    /// writing. It ends now, or it would count in `holders` for ever and the lease would
    /// never be given back.
    fn record_hold(&self, st: &mut State, attempt_id: &str, token: u64, own_id: u64, fresh: bool) {
        let before = st.holds.insert(
            attempt_id.to_string(),
            Hold::Owned {
                token,
                own_id,
                fresh,
            },
        );
        if let Some(Hold::Owned {
            own_id: old,
            fresh: stale,
            ..
        }) = before
        {
            self.end_hold(st, attempt_id, old, stale);
        }
    }

    /// The caller of `lock_call` (token `token`) went away before it returned (its future
    /// was dropped: a client that hung up). Under the lane's lock, so that exactly one of
    /// the two ends the hold: the hold is ended here when `lock_call` has taken it already,
    /// else `lock_call` ends it when it has (it reads `gone`). Either way a state read for
    /// the caller was never applied: the attempt's copy is marked stale.
    pub(in crate::store::postgres) fn abandon(
        &self,
        attempt_id: &str,
        token: u64,
        gone: &AtomicBool,
    ) {
        let mut st = lock(&self.lane.st);
        gone.store(true, Ordering::Relaxed);
        if st.holds.get(attempt_id).is_none_or(|h| h.token() != token) {
            return;
        }
        if let Some(Hold::Owned { own_id, fresh, .. }) = st.holds.remove(attempt_id) {
            self.end_hold(&mut st, attempt_id, own_id, fresh);
        }
    }

    /// One hold of acquisition `own_id` ends without a write; `stale`: the state read under
    /// it was never applied, so the next hold reads it again.
    fn end_hold(&self, st: &mut State, attempt_id: &str, own_id: u64, stale: bool) {
        if let Some(o) = st.owned.get_mut(attempt_id).filter(|o| o.own_id == own_id) {
            o.holders = o.holders.saturating_sub(1);
            if stale {
                o.current = false;
            }
            if o.wanted.is_some() && o.holders == 0 {
                self.lane.wake.notify_one();
            }
        }
        if stale {
            lock(&self.seen).remove(attempt_id);
        }
    }

    /// A hold no write consumed (a read, a failed call) ends.
    pub(in crate::store::postgres) fn release_call(&self, attempt_id: &str, token: u64) {
        let mut st = lock(&self.lane.st);
        let hold = match st.holds.get(attempt_id) {
            Some(h) if h.token() == token => st.holds.remove(attempt_id),
            _ => None,
        };
        if let Some(Hold::Owned { own_id, .. }) = hold {
            if let Some(o) = st.owned.get_mut(attempt_id) {
                if o.own_id == own_id {
                    o.holders = o.holders.saturating_sub(1);
                    if o.wanted.is_some() && o.holders == 0 {
                        self.lane.wake.notify_one();
                    }
                }
            }
        }
    }

    /// Whether a `lock_call` of the attempt waits for its write.
    pub(in crate::store::postgres) fn has_hold(&self, attempt_id: &str) -> bool {
        lock(&self.lane.st).holds.contains_key(attempt_id)
    }
}
