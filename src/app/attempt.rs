//! Attempts (docs/src/concepts/attempts.md): capability tokens, leases, pins, and the per-attempt state lock.
//!
//! - **Tokens** are 256 random bits from the OS (`getrandom`), spelled `ust_` + 64 lowercase
//!   hex characters (URL-safe). Only `sha256(token)` (hex) is stored; a lookup finds the
//!   attempt by that hash and then compares the hashes again in constant time.
//! - **Secrets**: each attempt has 32 random bytes that key the HMAC-SHA256 of idempotency key
//!   refs ([`idempotency_key_ref`]), so raw idempotency keys never leave the proxy.
//! - **Leases**: `expires_at` (RFC 3339 in the record), parsed once when the record is
//!   loaded into memory ([`Attempt::new`], [`Attempt::set_record`]) so a call's lease check
//!   compares two times; the [`Clock`] is injectable so tests advance time instead of
//!   sleeping. A call after the lease is `lease_expired` ([`lease_error`]).
//! - **Pins**: a pinned revision answers only while it was checked against the operation's
//!   current contract, else `stale_contract` ([`stale_pin`]). These two rules are written
//!   here once, for the proxy and for `POST /tools/execute`.
//! - **State lock**: one [`tokio::sync::Mutex`] per attempt ([`Attempt::lock`]) guards the
//!   state of *all* the attempt's integrations and its idempotency table. A call evaluates,
//!   validates, renders and records its evidence (with the new state) while holding it, so
//!   concurrent calls to one attempt behave as if run one after another (docs/src/reference/mock-definition.md#state), whichever
//!   integration they come through. Different attempts never share a lock.
//! - [`Attempts`] is the in-memory registry; attempts not in memory (after a restart) are
//!   loaded from the store on first use, exactly once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use hmac::{KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{HarnessCode, HarnessError};
use crate::records::{AttemptRecord, Pin, ResultStatus, ToolEvent};
use crate::store::{CallLock, Store, StoreError};
use crate::util::ids::{hex, new_uuid, random_hex, unhex};
use crate::util::time::rfc3339;

// ---------------------------------------------------------------------------------------------
// Tokens, secrets, hashes

/// A new capability token: `ust_` + 256 random bits in hex.
pub fn new_token() -> String {
    format!("ust_{}", random_hex(32))
}

/// A new attempt secret: 32 random bytes, hex.
pub fn new_secret() -> String {
    random_hex(32)
}

/// Lowercase hex SHA-256 of a token: what the store keeps.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Constant-time equality (the time depends only on the lengths).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// The opaque evidence token of an idempotency key (docs/src/reference/operation-files.md#idempotency): the first 16 hex characters
/// of HMAC-SHA256(key = the attempt secret, message = the raw key).
pub fn idempotency_key_ref(secret_hex: &str, key: &str) -> String {
    let secret = unhex(secret_hex).unwrap_or_else(|| secret_hex.as_bytes().to_vec());
    let mut mac =
        <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&secret).expect("HMAC takes any key");
    mac.update(key.as_bytes());
    let out = mac.finalize().into_bytes();
    hex(&out)[..16].to_string()
}

/// A W3C `traceparent` value → its trace id, or `None` when the header is invalid
/// (docs/src/reference/evidence-envelope.md#tool-events: version `00` layout, `ff` forbidden, lowercase hex, non-zero ids).
/// Future versions (`01`–`fe`) are parsed by their first four fields, as the spec asks.
pub fn trace_id(traceparent: &str) -> Option<String> {
    // One parser of the header: the span export reads the same one ([`crate::telemetry::Caller`]).
    crate::telemetry::Caller::parse(traceparent).map(|c| c.trace_id.to_string())
}

// ---------------------------------------------------------------------------------------------
// Time

/// Where "now" comes from: the system clock in production, a [`ManualClock`] in tests of
/// leases (no sleeping).
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::<Utc>::from(std::time::SystemTime::now())
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock(Mutex::new(start))
    }
    pub fn advance(&self, d: chrono::Duration) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *t += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

// ---------------------------------------------------------------------------------------------
// Attempts

/// Where an attempt stands for a call arriving now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    Active,
    /// `expires_at` has passed.
    Expired,
    /// `DELETE /attempts/{id}` ended it.
    Ended,
}

impl Lease {
    pub fn as_str(self) -> &'static str {
        match self {
            Lease::Active => "active",
            Lease::Expired => "expired",
            Lease::Ended => "ended",
        }
    }
}

/// The first response of an idempotent call, replayed for a repeat with the same key and
/// the same arguments (docs/src/reference/operation-files.md#idempotency).
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotentEntry {
    pub arguments: Value,
    /// The envelope that was answered (`{"status","data"?,"headers"?}`).
    pub result: Value,
    pub http_status: u16,
    pub revision: Option<u64>,
    pub variant: Option<String>,
    pub rule: Option<usize>,
}

/// Everything the state lock guards.
#[derive(Debug, Default)]
pub struct AttemptState {
    /// Integration → its state object.
    pub state: BTreeMap<String, Map<String, Value>>,
    /// (`"<integration>/<operation_id>"`, idempotency key ref) → the first response.
    pub idempotency: HashMap<(String, String), IdempotentEntry>,
    /// `"<integration>/<operation_id>"` → how far its seeded chaos has gone
    /// ([`crate::operation::fault::decide`]). Rebuilt from the events after a restart
    /// ([`AttemptState::with_evidence`]).
    pub chaos: HashMap<String, crate::operation::fault::ChaosCounter>,
    /// How many state changes (state or idempotency entry) calls have published: a call
    /// answered `store_error` withdraws its change only while it is still the latest
    /// (`crate::proxy::pipeline::commit`).
    pub published: u64,
    /// The calls recorded when this state was rebuilt from evidence (seeds
    /// [`Attempt::calls`] after a restart).
    pub calls: u64,
}

impl AttemptState {
    /// The state another process of a fleet left, read under the attempt's row lock: its
    /// state and idempotency table, and its chaos counters as the store derived them from
    /// the whole evidence (the idempotency rows alone would restart them at 0, and a `times`
    /// limit would be exceeded).
    pub fn fresh(f: crate::store::Fresh) -> AttemptState {
        let mut s = AttemptState::with_evidence(f.state, &f.idempotent);
        s.chaos = f
            .chaos
            .into_iter()
            .map(|(op, calls, fired)| (op, crate::operation::fault::ChaosCounter { calls, fired }))
            .collect();
        // The idempotency rows are not every call: the call counter (`Sforce-Limit-Info`)
        // counts this process's calls only on a fleet (docs/src/guides/salesforce.md).
        s.calls = 0;
        s
    }

    /// Rebuild the idempotency table from evidence (after a restart): the first `ok` event
    /// of each (operation, key ref) — a fault after the effect is `ok`, so its key is
    /// remembered; one before it is `blocked` and is not. And the chaos counters: every
    /// evaluated call of an operation (`ok`, or `blocked` with a `fault` member) advanced its
    /// index, every `fault` of origin `chaos` its fired count — so a restarted server goes on
    /// with the same seeded sequence.
    pub fn with_evidence(
        state: BTreeMap<String, Map<String, Value>>,
        events: &[ToolEvent],
    ) -> AttemptState {
        let mut s = AttemptState {
            state,
            idempotency: HashMap::new(),
            chaos: HashMap::new(),
            published: 0,
            calls: 0,
        };
        events.iter().for_each(|e| s.absorb(e));
        s
    }

    /// One more call of the evidence, in sequence order (the rules of
    /// [`AttemptState::with_evidence`]): the evidence can be read chunk by chunk.
    pub fn absorb(&mut self, e: &ToolEvent) {
        self.calls += 1;
        if let Some(op) = &e.operation_id {
            let evaluated = e.result_status == ResultStatus::Ok
                || (e.result_status == ResultStatus::Blocked && e.fault.is_some());
            if evaluated && e.source == crate::records::EventSource::Mock {
                let c = self
                    .chaos
                    .entry(format!("{}/{}", e.integration, op))
                    .or_default();
                c.calls += 1;
                if e.fault
                    .as_ref()
                    .is_some_and(|f| f.origin.as_deref() == Some("chaos"))
                {
                    c.fired += 1;
                }
            }
        }
        if e.result_status != ResultStatus::Ok {
            return;
        }
        if let (Some(r), Some(op)) = (&e.idempotency_key_ref, &e.operation_id) {
            self.idempotency
                .entry((format!("{}/{}", e.integration, op), r.clone()))
                .or_insert_with(|| IdempotentEntry {
                    arguments: e.arguments.clone(),
                    result: e.result.clone(),
                    http_status: e.http_status,
                    revision: e.revision,
                    variant: e.variant.clone(),
                    rule: e.rule,
                });
        }
    }
}

/// Takes the store's row lock of one call (docs/src/operations/fleet-store.md) for an attempt whose in-memory lock the
/// caller holds (`state` is what it guards), and makes `state` what the store says: with a
/// shared store (PostgreSQL) another process may have called since, so the pre-call state
/// and the idempotency table read under the row lock replace the in-memory copy (unless
/// this process wrote the attempt last). A failure is logged and kept by the store: the
/// call's `write_call` then fails and the call ends as `store_error`. With the embedded
/// store this does nothing and returns at once.
///
/// Call it right after `attempt.lock.lock().await`, before evaluating, and keep the
/// returned [`CallLock`] until after the call's `write_call`.
pub async fn lock_in_store(store: &Store, attempt_id: &str, state: &mut AttemptState) -> CallLock {
    let (lock, fresh) = store.lock_call(attempt_id).await;
    match fresh {
        Ok(None) => {}
        Ok(Some(f)) => *state = AttemptState::fresh(f),
        Err(e) => {
            tracing::warn!(attempt = %attempt_id, error = %e, "cannot lock the attempt in the store")
        }
    }
    lock
}

/// [`lock_in_store`] for a read outside calls (`POST /tools/execute` with an attempt,
/// `GET /attempts/{id}/state`): `state` becomes what the store says under the attempt's row
/// lock, and a store failure is returned (the route answers `store_error`) instead of being
/// kept for a `write_call`. Drop the returned [`CallLock`] once read: it commits nothing
/// (its transaction is rolled back). With the embedded store this does nothing.
pub async fn read_in_store(
    store: &Store,
    attempt_id: &str,
    state: &mut AttemptState,
) -> Result<CallLock, StoreError> {
    let (lock, fresh) = store.lock_call(attempt_id).await;
    if let Some(f) = fresh? {
        *state = AttemptState::fresh(f);
    }
    Ok(lock)
}

/// One attempt in memory: its record and its state lock.
#[derive(Debug)]
pub struct Attempt {
    pub id: String,
    record: RwLock<Held>,
    /// The state lock (see the module doc). Hold it across evaluate → record evidence.
    pub lock: tokio::sync::Mutex<AttemptState>,
    /// Calls of this run answered 500 `store_error` (their evidence could not be made
    /// durable), counted in memory at once ([`Attempt::note_store_failure`]; the record's
    /// `store_failures` is the durable count): a verdict read in this process takes the
    /// larger of the two.
    pub store_failures: std::sync::atomic::AtomicU64,
    /// The record's `durability` (fixed at creation): what a call's answer waits for.
    pub durability: crate::records::Durability,
    /// Calls of this attempt committed so far (this process, plus those its evidence held at
    /// load): the Salesforce profile's `Sforce-Limit-Info: api-usage=N/M` and `/limits`.
    pub calls: std::sync::atomic::AtomicU64,
}

impl Attempt {
    pub fn new(record: AttemptRecord, state: AttemptState) -> Arc<Attempt> {
        Arc::new(Attempt {
            id: record.attempt_id.clone(),
            durability: record.durability,
            record: RwLock::new(Held::new(record)),
            calls: std::sync::atomic::AtomicU64::new(state.calls),
            lock: tokio::sync::Mutex::new(state),
            store_failures: Default::default(),
        })
    }

    /// A call of this attempt is about to be answered 500 `store_error`: it fails the
    /// attempt in memory at once, then durably in its record
    /// ([`crate::store::Store::mark_store_failure`]); when even that cannot be written, the
    /// store is told to interrupt every open attempt at its next start
    /// ([`crate::store::Store::store_failure_unrecorded`]). Call it before the 500 leaves.
    pub fn note_store_failure(&self, store: &crate::store::Store) {
        self.store_failures
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match store.mark_store_failure(&self.id) {
            Ok(n) => {
                let mut r = self.record();
                r.store_failures = r.store_failures.max(n);
                self.set_record(r);
            }
            Err(e) => {
                // The record in memory carries it: whatever writes the record next (the
                // end of the attempt) makes it durable.
                let mut r = self.record();
                r.store_failures = r.store_failures.max(
                    self.store_failures
                        .load(std::sync::atomic::Ordering::SeqCst),
                );
                self.set_record(r);
                tracing::error!(attempt = %self.id, error = %e, "cannot record the store failure in the attempt's record: the attempt fails in this process, and every open attempt is interrupted at the next start");
                if let Err(e) = store.store_failure_unrecorded(&self.id) {
                    tracing::error!(attempt = %self.id, error = %e, "cannot leave the sign of an unrecorded store failure either");
                }
            }
        }
    }

    /// A copy of the current record.
    pub fn record(&self) -> AttemptRecord {
        self.read_record().clone()
    }

    /// The current record, borrowed (no copy of its pins: one per operation). Hold it
    /// briefly and never across an `.await`: it blocks [`Attempt::set_record`].
    pub fn read_record(&self) -> RecordRef<'_> {
        RecordRef(self.record.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replace the record (the caller has persisted it).
    pub fn set_record(&self, r: AttemptRecord) {
        *self.record.write().unwrap_or_else(|p| p.into_inner()) = Held::new(r);
    }

    pub fn is_default(&self) -> bool {
        self.read_record().is_default
    }

    /// The lease as of `now`.
    pub fn lease(&self, now: DateTime<Utc>) -> Lease {
        self.read_record().lease(now)
    }
}

/// An attempt's record in memory with its `expires_at` parsed.
#[derive(Debug)]
struct Held {
    rec: AttemptRecord,
    expires_at: Option<DateTime<Utc>>,
}

impl Held {
    fn new(rec: AttemptRecord) -> Held {
        let expires_at = rec.expires_at.as_deref().and_then(parse_time);
        Held { rec, expires_at }
    }
}

/// An attempt's record, borrowed ([`Attempt::read_record`]).
pub struct RecordRef<'a>(std::sync::RwLockReadGuard<'a, Held>);

impl std::ops::Deref for RecordRef<'_> {
    type Target = AttemptRecord;
    fn deref(&self) -> &AttemptRecord {
        &self.0.rec
    }
}

impl RecordRef<'_> {
    /// The lease as of `now`, from the parsed `expires_at`.
    pub fn lease(&self, now: DateTime<Utc>) -> Lease {
        if self.0.rec.ended_at.is_some() {
            return Lease::Ended;
        }
        match self.0.expires_at {
            Some(exp) if now >= exp => Lease::Expired,
            _ => Lease::Active,
        }
    }
}

/// The lease of a record as of `now` (a record read from the store; one in memory has
/// [`Attempt::lease`]).
pub fn lease_of(r: &AttemptRecord, now: DateTime<Utc>) -> Lease {
    if r.ended_at.is_some() {
        return Lease::Ended;
    }
    match r.expires_at.as_deref().and_then(parse_time) {
        Some(exp) if now >= exp => Lease::Expired,
        _ => Lease::Active,
    }
}

/// The lease rule: a call to an attempt whose lease expired as of `now` is the harness error
/// `lease_expired`, one after the attempt ended `attempt_ended` (answered 410), saying when;
/// `None` while the lease is active.
pub fn lease_error(r: &AttemptRecord, lease: Lease) -> Option<HarnessError> {
    let message = match lease {
        Lease::Active => return None,
        Lease::Expired => format!(
            "the lease of attempt {} expired at {}",
            r.attempt_id,
            r.expires_at.as_deref().unwrap_or("?")
        ),
        Lease::Ended => {
            return Some(HarnessError::new(
                HarnessCode::AttemptEnded,
                format!(
                "attempt {} was ended at {}: a call after the end is refused and fails the attempt",
                r.attempt_id,
                r.ended_at.as_deref().unwrap_or("?")
            ),
            ))
        }
    };
    Some(HarnessError::new(HarnessCode::LeaseExpired, message))
}

/// The pin rule: `pin` (of the operation `key`, pinned by `attempt_id` when it comes from an
/// attempt) is usable only when it was checked against `contract_hash`, the operation's
/// contract now; otherwise the harness error `stale_contract` naming both hashes.
pub fn stale_pin(
    attempt_id: Option<&str>,
    key: &str,
    pin: &Pin,
    contract_hash: &str,
) -> Option<HarnessError> {
    if pin.contract_hash == contract_hash {
        return None;
    }
    Some(HarnessError::new(
        HarnessCode::StaleContract,
        format!(
            "{} revision {} of `{key}`, checked against contract {}, but the operation's contract is now {contract_hash}",
            attempt_id.map_or("the pinned".to_string(), |a| format!("attempt {a} pinned")),
            pin.revision,
            pin.contract_hash,
        ),
    ))
}

/// The in-memory registry of attempts, backed by the store.
#[derive(Debug, Default)]
pub struct Attempts {
    by_id: RwLock<HashMap<String, Arc<Attempt>>>,
    /// token hash → attempt id.
    by_hash: RwLock<HashMap<String, String>>,
    default_id: RwLock<Option<String>>,
}

impl Attempts {
    pub fn new() -> Attempts {
        Attempts::default()
    }

    /// Register an attempt; when one with the same id is already registered, that one is kept
    /// and returned (so an attempt has exactly one state lock).
    pub fn insert(&self, a: Arc<Attempt>) -> Arc<Attempt> {
        let mut m = self.by_id.write().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = m.get(&a.id) {
            return existing.clone();
        }
        if a.is_default() {
            *self.default_id.write().unwrap_or_else(|p| p.into_inner()) = Some(a.id.clone());
        }
        let hash = a.record().token_hash;
        if !hash.is_empty() {
            self.by_hash
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(hash, a.id.clone());
        }
        m.insert(a.id.clone(), a.clone());
        a
    }

    /// The server's default attempt (requests without a token).
    pub fn default_attempt(&self) -> Option<Arc<Attempt>> {
        let id = self
            .default_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        self.by_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    /// The attempt `id` if it is in memory (never loads).
    pub fn loaded(&self, id: &str) -> Option<Arc<Attempt>> {
        self.by_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// At start: every stored attempt created `exclusive` whose lease is active is brought
    /// into memory, so that a call without its token fails it ([`Attempts::note_outside`]
    /// looks at the attempts in memory) even before a call with its token loads it again.
    pub fn load_open_exclusive(&self, store: &Store, now: DateTime<Utc>) -> Result<(), StoreError> {
        for rec in store.attempts()? {
            if rec.exclusive && !rec.is_default && lease_of(&rec, now) == Lease::Active {
                self.get(store, &rec.attempt_id)?;
            }
        }
        Ok(())
    }

    /// An attempt by id, loading it from the store when it is not in memory.
    pub fn get(&self, store: &Store, id: &str) -> Result<Option<Arc<Attempt>>, StoreError> {
        if let Some(a) = self.by_id.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Ok(Some(a.clone()));
        }
        match store.attempt(id)? {
            Some(rec) => Ok(Some(self.load(store, rec)?)),
            None => Ok(None),
        }
    }

    /// The attempt a capability token names, or `None` (fail closed). The token is hashed,
    /// the attempt found by hash, and the hashes compared again in constant time.
    pub fn by_token(&self, store: &Store, token: &str) -> Result<Option<Arc<Attempt>>, StoreError> {
        let h = token_hash(token);
        let found = {
            let id = self
                .by_hash
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&h)
                .cloned();
            id.and_then(|id| {
                self.by_id
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&id)
                    .cloned()
            })
            .filter(|a| {
                let r = a.read_record();
                !r.token_hash.is_empty() && ct_eq(r.token_hash.as_bytes(), h.as_bytes())
            })
        };
        if let Some(a) = found {
            return Ok(Some(a));
        }
        match store.attempt_by_token_hash(&h)? {
            Some(rec)
                if !rec.token_hash.is_empty() && ct_eq(rec.token_hash.as_bytes(), h.as_bytes()) =>
            {
                Ok(Some(self.load(store, rec)?))
            }
            _ => Ok(None),
        }
    }

    /// The attempt `id` when `proves(secret)` holds for its secret, or `None` (fail closed).
    /// A stored attempt is brought into memory only after the proof held, so a claim that
    /// names an attempt without proving it loads nothing.
    pub fn proven(
        &self,
        store: &Store,
        id: &str,
        proves: impl Fn(&str) -> bool,
    ) -> Result<Option<Arc<Attempt>>, StoreError> {
        if let Some(a) = self.loaded(id) {
            let ok = proves(&a.read_record().secret);
            return Ok(ok.then_some(a));
        }
        match store.attempt(id)? {
            Some(rec) if proves(&rec.secret) => Ok(Some(self.load(store, rec)?)),
            _ => Ok(None),
        }
    }

    /// Bring a stored attempt into memory: its state, and its idempotency table rebuilt from
    /// its evidence.
    fn load(&self, store: &Store, rec: AttemptRecord) -> Result<Arc<Attempt>, StoreError> {
        let id = rec.attempt_id.clone();
        let mut st = AttemptState::with_evidence(store.state(&id)?, &[]);
        // Chunk by chunk: an attempt of a million calls is rebuilt in the memory of its
        // idempotency table, not of its history.
        let mut chunks =
            store.timeline_chunks(&id, rec.rolled_through(), store.last_sequence(&id)?);
        while let Some(chunk) = chunks()? {
            for e in &chunk {
                if let crate::records::EvidenceEntry::Call(c) = e {
                    st.absorb(c);
                }
            }
        }
        Ok(self.insert(Attempt::new(rec, st)))
    }

    /// A call reached the server without an attempt's token (it was recorded in the default
    /// attempt: no token, proxy credentials dropped, an unknown host refused at the forward
    /// proxy): every open attempt created `exclusive` counts it in its record, durably, and
    /// fails with `outside_attempt`. `line` describes the call (no query, no credentials).
    /// On a shared store (a fleet) that includes the exclusive attempts other processes
    /// created and this one never loaded (they are loaded now), and the count is one atomic
    /// update of the stored record, which also decides whether the attempt is still open.
    pub async fn note_outside(&self, store: &Store, now: DateTime<Utc>, line: &str) {
        if store.is_shared() {
            match store.open_exclusive_attempts().await {
                Ok(ids) => {
                    for id in ids.iter().filter(|id| self.loaded(id).is_none()) {
                        if let Err(e) = self.get(store, id) {
                            tracing::error!(attempt = %id, error = %e, "cannot load an exclusive attempt of another process: a call that missed it is not counted");
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot list the open exclusive attempts of the fleet: a call that missed one created by another process is not counted")
                }
            }
        }
        for a in self.all() {
            {
                let r = a.read_record();
                if r.is_default || !r.exclusive || r.lease(now) != Lease::Active {
                    continue;
                }
            }
            // Under its state lock: no other write of its record by this process interleaves.
            let _g = a.lock.lock().await;
            match store.count_outside_call(&a.id, line, now) {
                Ok(Some(stored)) => {
                    let mut r = a.record();
                    r.outside_calls = stored.outside_calls;
                    r.outside = stored.outside;
                    a.set_record(r);
                }
                Ok(None) => continue, // ended (or expired) meanwhile, maybe by another process
                Err(e) => {
                    tracing::error!(attempt = %a.id, error = %e, "cannot record a call outside the exclusive attempt: it fails in this process");
                    a.store_failures
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            tracing::warn!(attempt = %a.id, call = line, "a call reached the server without the token of this exclusive attempt");
        }
    }

    /// Every attempt in memory.
    pub fn all(&self) -> Vec<Arc<Attempt>> {
        self.by_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// What a new attempt is made of (the body of `POST /attempts`, or the default attempt).
#[derive(Debug, Default)]
pub struct NewAttempt<'a> {
    pub token: Option<&'a str>,
    /// `None` → no lease (the default attempt).
    pub ttl_s: Option<u64>,
    pub test_run_id: Option<String>,
    pub pins: crate::records::Pins,
    pub variants: BTreeMap<String, String>,
    pub is_default: bool,
    /// The tool-call contracts it pins (docs/src/reference/contracts.md).
    pub contracts: BTreeMap<String, crate::records::PinnedContract>,
    /// Seeded chaos per operation (validated by the caller: [`crate::operation::fault::chaos_problems`]).
    pub faults: crate::records::ChaosFaults,
    /// When its calls are durable (the project's `durability` unless the body names one).
    pub durability: crate::records::Durability,
}

/// Build a new attempt record (not yet stored).
pub fn new_record(now: DateTime<Utc>, new: NewAttempt<'_>) -> AttemptRecord {
    let NewAttempt {
        token,
        ttl_s,
        test_run_id,
        pins,
        variants,
        is_default,
        contracts,
        faults,
        durability,
    } = new;
    AttemptRecord {
        attempt_id: new_uuid(),
        token_hash: token.map(token_hash).unwrap_or_default(),
        secret: new_secret(),
        test_run_id,
        started_at: rfc3339(now),
        ended_at: None,
        expires_at: ttl_s.map(|s| rfc3339(now + chrono::Duration::seconds(s as i64))),
        pins,
        revision_set: None,
        variants,
        is_default,
        cleanup: None,
        contracts,
        final_state: None,
        faults,
        durability,
        interrupted: false,
        ..AttemptRecord::default()
    }
}

#[cfg(test)]
#[path = "attempt_tests.rs"]
mod tests;
