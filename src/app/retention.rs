//! The default attempt's retention bound (docs/src/reference/evidence-envelope.md#retention):
//! after each committed call of the default attempt, when the entries the store keeps for it
//! reach `default_attempt.max_entries` ([`crate::config::retention::DefaultAttempt::due`]),
//! the attempt rolls over under its state lock: every entry kept so far is judged by the one
//! verdict fold ([`crate::evidence::verdict::Judge::roll_over`]), the findings are added to
//! the record's `rolled_over` summary, and the entries leave the store
//! ([`crate::store::Store::roll_over`]). The attempt, its token-less routing, its state and
//! its idempotency table in memory stay as they were; its sequences go on.
//!
//! Limits (the book's retention section): the bound is checked after calls, so agent-side
//! events and calls in flight at the roll can exceed it until the next call; a tool-call
//! contract evaluated over a rolled-over attempt is inconclusive (its evidence no longer
//! starts at 1); a process that loads the attempt after a roll (PostgreSQL) rebuilds its
//! idempotency table from the kept entries only.

use crate::app::attempt::Attempt;
use crate::app::App;
use crate::evidence::verdict::Judge;
use crate::records::{EvidenceEntry, RolledOver};
use crate::store::{Store, StoreError};

/// After the call of `attempt` (the default attempt) committed at `sequence`: rolls it over
/// when it is due. A failure is logged: the entries stay, and the next call tries again.
pub async fn after_call(app: &App, attempt: &Attempt, sequence: u64) {
    let bound = app.config.default_attempt;
    if !bound.due(sequence, attempt.read_record().rolled_through()) {
        return;
    }
    let _state = attempt.lock.lock().await;
    let due = |through, last| bound.due(last, through);
    // Judging a generation reads up to `max_entries` entries: off the async workers when
    // the runtime has others.
    let rolled = match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| roll_over(&app.store, &attempt.id, due))
        }
        _ => roll_over(&app.store, &attempt.id, due),
    };
    match rolled {
        Ok(Outcome { rolled, now }) => {
            if rolled {
                if let Some(r) = &now {
                    tracing::info!(attempt = %attempt.id, through = r.through, rolls = r.rolls, findings = r.findings.len(), "the default attempt rolled over at its retention bound");
                }
            }
            // Another process of a fleet may have rolled it: this process's copy follows.
            let mut rec = attempt.record();
            if rec.rolled_over != now {
                rec.rolled_over = now;
                attempt.set_record(rec);
            }
        }
        Err(e) => {
            tracing::error!(attempt = %attempt.id, error = %e, "the default attempt could not roll over at its retention bound: its entries stay in the store")
        }
    }
}

/// What [`roll_over`] did: whether it rolled, and the attempt's summary as the store holds
/// it now.
#[derive(Debug)]
pub struct Outcome {
    pub rolled: bool,
    pub now: Option<RolledOver>,
}

/// Rolls attempt `id` over (the caller holds its state lock) when `due(rolled_through,
/// last_sequence)` says so, as the store holds them now: judges the entries kept, then hands
/// the new summary to the store (which refuses it when another process rolled first).
pub fn roll_over(
    store: &Store,
    id: &str,
    due: impl Fn(u64, u64) -> bool,
) -> Result<Outcome, StoreError> {
    let Some(rec) = store.attempt(id)? else {
        return Ok(Outcome {
            rolled: false,
            now: None,
        });
    };
    let floor = rec.rolled_through();
    let through = store.last_sequence(id)?;
    if through <= floor || !due(floor, through) {
        return Ok(Outcome {
            rolled: false,
            now: rec.rolled_over,
        });
    }
    let mut judge = Judge::new(&rec);
    let mut chunks = store.timeline_chunks(id, floor, through);
    while let Some(chunk) = chunks()? {
        for e in &chunk {
            match e {
                EvidenceEntry::Call(c) => judge.call(c),
                EvidenceEntry::Agent(a) => judge.event(a),
            }
        }
    }
    judge.expect_last(through);
    let summary = judge.roll_over(through);
    if store.roll_over(id, floor, &summary)? {
        return Ok(Outcome {
            rolled: true,
            now: Some(summary),
        });
    }
    let now = store.attempt(id)?.and_then(|r| r.rolled_over);
    Ok(Outcome { rolled: false, now })
}
