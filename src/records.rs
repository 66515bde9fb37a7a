//! The serde types the data dir keeps (docs/src/concepts/attempts.md, docs/src/reference/evidence-envelope.md, docs/src/operations/durability.md, docs/src/reference/contracts.md, docs/src/reference/events.md): revisions, attempts and their
//! pins (of revisions and of tool-call contracts), the one [`ToolEvent`] recorded per call and
//! the [`AgentEvent`]s a test runner posts (docs/src/reference/events.md), which share the attempt's sequence. The store encodes them as JSON and knows
//! nothing else about them; the evidence module reads them to build the envelope and verdict.
//!
//! Field names are the evidence envelope's (docs/src/reference/evidence-envelope.md): they are the stored form and the exported form at once, so a
//! rename here is a format change.
//!
//! The words of an event are typed ([`ResultStatus`], [`EventSource`], serde snake_case) but
//! reading stays tolerant: a word outside the list (written by another version, or by hand)
//! deserializes as `Unknown` *with its text*, so the verdict can still name it and fail.
//! Members added after the first data dirs were written (`contracts`, `final_state` of an
//! attempt) default when absent, so older data dirs still read.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::mock::model::Fault;

/// An immutable, numbered copy of a mock definition (docs/src/concepts/operations.md, docs/src/operations/durability.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionRecord {
    pub revision: u64,
    pub contract_hash: String,
    /// `sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of `definition`.
    pub definition_hash: String,
    pub definition: Value,
    /// RFC 3339.
    pub saved_at: String,
    /// `file`, `api` or `record`.
    pub source: String,
}

/// The head of a revision: what the file-rule sync and pinning read of it — everything but
/// the definition, and of the definition only its `initial_state` (issue 20: decoding whole
/// records was a sixth of a warm start). Decoded from the stored [`RevisionRecord`], skipping
/// the rest of the definition without building it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RevisionHead {
    pub revision: u64,
    pub contract_hash: String,
    pub definition_hash: String,
    pub source: String,
    /// The definition's `initial_state` when it is an object.
    #[serde(rename = "definition", deserialize_with = "initial_state_of")]
    pub initial_state: Option<Map<String, Value>>,
}

impl From<RevisionRecord> for RevisionHead {
    fn from(rec: RevisionRecord) -> RevisionHead {
        RevisionHead {
            revision: rec.revision,
            contract_hash: rec.contract_hash,
            definition_hash: rec.definition_hash,
            source: rec.source,
            initial_state: rec
                .definition
                .get("initial_state")
                .and_then(|v| v.as_object())
                .cloned(),
        }
    }
}

/// A definition's `initial_state` when it is an object; every other member (and a definition
/// that is not an object) is skipped unbuilt.
fn initial_state_of<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
    struct InitialState;
    impl<'de> Visitor<'de> for InitialState {
        type Value = Option<Map<String, Value>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a mock definition")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = None;
            while let Some(k) = m.next_key::<String>()? {
                if k == "initial_state" {
                    out = match m.next_value::<Value>()? {
                        Value::Object(o) => Some(o),
                        _ => None,
                    };
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(InitialState)
}

/// The revision an attempt pinned for one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub revision: u64,
    pub contract_hash: String,
}

/// An attempt's pins: `"<integration>/<operation_id>"` → [`Pin`] — a **revision set**.
///
/// Shared, not copied: every attempt pinned between two changes of the revisions holds the
/// same `Arc`, so creating an attempt copies no pin, and the store keeps each set once,
/// named by [`Pins::id`] (an attempt record stores that id in `revision_set`). Serializes as
/// the plain map (the exported `pins` of docs/src/concepts/attempts.md, docs/src/reference/evidence-envelope.md, and the stored form of records
/// written before revision sets).
#[derive(Clone, Default)]
pub struct Pins(Arc<PinsInner>);

#[derive(Default)]
struct PinsInner {
    map: BTreeMap<String, Pin>,
    id: OnceLock<String>,
}

impl Pins {
    pub fn new(map: BTreeMap<String, Pin>) -> Pins {
        Pins(Arc::new(PinsInner {
            map,
            id: OnceLock::new(),
        }))
    }

    /// A set read back from the store under its id (not hashed again).
    pub fn with_id(map: BTreeMap<String, Pin>, id: String) -> Pins {
        Pins(Arc::new(PinsInner {
            map,
            id: OnceLock::from(id),
        }))
    }

    /// The set's id: `rs_` + the first 32 hex characters of the SHA-256 of its JSON (sorted
    /// keys, so equal sets have equal ids in every process). Computed once per set.
    pub fn id(&self) -> &str {
        self.0.id.get_or_init(|| {
            let bytes = serde_json::to_vec(&self.0.map).unwrap_or_default();
            let digest = Sha256::digest(&bytes);
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("rs_{hex}")
        })
    }

    /// Whether `self` and `other` are the same shared set (no comparison of pins).
    pub fn same(&self, other: &Pins) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Pins {
    type Target = BTreeMap<String, Pin>;
    fn deref(&self) -> &BTreeMap<String, Pin> {
        &self.0.map
    }
}

impl From<BTreeMap<String, Pin>> for Pins {
    fn from(map: BTreeMap<String, Pin>) -> Pins {
        Pins::new(map)
    }
}

impl PartialEq for Pins {
    fn eq(&self, other: &Pins) -> bool {
        self.same(other) || self.0.map == other.0.map
    }
}

impl std::fmt::Debug for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.map.fmt(f)
    }
}

impl Serialize for Pins {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.map.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Pins {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pins, D::Error> {
        BTreeMap::deserialize(d).map(Pins::new)
    }
}

/// One attempt (docs/src/concepts/attempts.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Must not contain a NUL character.
    pub attempt_id: String,
    /// Lowercase hex SHA-256 of the capability token.
    pub token_hash: String,
    /// Hex, 32 bytes: the HMAC key of idempotency key refs.
    pub secret: String,
    pub test_run_id: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub expires_at: Option<String>,
    /// `"<integration>/<operation_id>"` → pin: the attempt's revision set. In memory always
    /// the resolved set; the store writes it empty and names the set in `revision_set`
    /// instead (records written before revision sets hold the whole map here, and still read).
    #[serde(default)]
    pub pins: Pins,
    /// The stored form only: the id of the attempt's revision set ([`Pins::id`]), replaced by
    /// the set itself when the store reads the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_set: Option<String>,
    pub variants: BTreeMap<String, String>,
    pub is_default: bool,
    /// `{"status":"verified","remaining_state_keys":0}` once cleanup ran.
    pub cleanup: Option<Value>,
    /// Tool-call contract id → the pinned contract (docs/src/reference/contracts.md): its hash and the contract
    /// itself, so a verdict read after a restart or a contract edit evaluates this version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contracts: BTreeMap<String, PinnedContract>,
    /// The state as it stood when the attempt ended (integration → state object): ending
    /// drops the live state, the envelope keeps this snapshot as `final_state` (docs/src/reference/contracts.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_state: Option<BTreeMap<String, Map<String, Value>>>,
    /// Seeded chaos of `POST /attempts` `"faults"`: `"<integration>/<operation_id>"` → when
    /// its calls fault ([`crate::operation::fault`]). Absent in records written before faults.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub faults: BTreeMap<String, ChaosFault>,
    /// When its calls are durable ([`Durability`]); absent (`call`) in older records.
    #[serde(default, skip_serializing_if = "Durability::is_call")]
    pub durability: Durability,
    /// Set at start-up for an attempt with durability `attempt` that was still open when
    /// the process holding the store died: calls answered after the last flush may be lost,
    /// so its verdict is `fail` (`crate::evidence`), never a pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Calls of this attempt answered 500 `store_error` (their evidence could not be made
    /// durable): written before the 500 leaves, on a path independent of the failed event
    /// write, so every reader after any restart fails the attempt (`store_failure`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store_failures: u64,
    /// `false` when the attempt was created with `"expect_calls": false`: an attempt with no
    /// call and no agent-side event then passes (else it fails with `no_calls`). Absent
    /// (`true`) in older records.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub expect_calls: bool,
    /// Created with `"exclusive": true` (or by `understudy test`): while it is open, a call
    /// that reaches the server without its token fails it (`outside_attempt`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// Calls that reached the server without this (exclusive) attempt's token while it was
    /// open; [`AttemptRecord::outside`] describes the first ones.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outside_calls: u64,
    /// The first [`MAX_OUTSIDE_LISTED`] calls outside the attempt, one line each
    /// (`"<time> <method> <target>: <why>"`, without query strings or credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<String>,
    /// The default attempt's retention: what rolled out of the store at its bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_over: Option<RolledOver>,
}

impl AttemptRecord {
    /// The last sequence that rolled out of the store (0: none did): the attempt's
    /// timeline is `rolled_through() + 1 ..= last_sequence`.
    pub fn rolled_through(&self) -> u64 {
        self.rolled_over.as_ref().map_or(0, |r| r.through)
    }
}

/// What rolled out of the store of the default attempt at its retention bound
/// (`default_attempt.max_entries` of `understudy.json`,
/// docs/src/reference/evidence-envelope.md#retention): every entry up to `through` was
/// judged, then removed; what the verdict found in them is kept here, counted per code, so
/// a failure that rolled out still fails the attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RolledOver {
    /// Every entry with `sequence <= through` rolled out: the timeline starts after it.
    pub through: u64,
    /// How many times the attempt rolled over.
    pub rolls: u64,
    /// Tool calls that rolled out.
    pub calls: u64,
    /// Agent-side events that rolled out.
    pub events: u64,
    /// Reason code → what the verdict found in the entries that rolled out.
    #[serde(default)]
    pub findings: BTreeMap<String, RolledFinding>,
}

/// The findings of one reason code in the entries that rolled out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RolledFinding {
    /// How many reasons of this code.
    pub count: u64,
    /// The first of them: its sequence (when it has one) and its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sequence: Option<u64>,
    pub first_message: String,
}

/// How many calls outside an exclusive attempt its record describes (all are counted).
pub const MAX_OUTSIDE_LISTED: usize = 20;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn yes() -> bool {
    true
}

impl Default for AttemptRecord {
    fn default() -> AttemptRecord {
        AttemptRecord {
            attempt_id: String::new(),
            token_hash: String::new(),
            secret: String::new(),
            test_run_id: None,
            started_at: String::new(),
            ended_at: None,
            expires_at: None,
            pins: Pins::default(),
            revision_set: None,
            variants: BTreeMap::new(),
            is_default: false,
            cleanup: None,
            contracts: BTreeMap::new(),
            final_state: None,
            faults: BTreeMap::new(),
            durability: Durability::Call,
            interrupted: false,
            store_failures: 0,
            expect_calls: true,
            exclusive: false,
            outside_calls: 0,
            outside: Vec::new(),
            rolled_over: None,
        }
    }
}

/// When an attempt's calls become durable (`"durability"` of `understudy.json` and of
/// `POST /attempts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Every call is durable before it is answered (a group commit per batch of calls).
    #[default]
    Call,
    /// Calls are written in order but answered before their fsync (flushed in the
    /// background); the evidence is made durable when it is read for a verdict or the
    /// attempt ends. A crash before then marks the attempt `interrupted`.
    Attempt,
}

impl Durability {
    pub fn is_call(&self) -> bool {
        *self == Durability::Call
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Call => "call",
            Durability::Attempt => "attempt",
        }
    }

    /// `"call"` or `"attempt"`; anything else is refused naming both.
    pub fn from_json(v: &Value) -> Result<Durability, String> {
        match v.as_str() {
            Some("call") => Ok(Durability::Call),
            Some("attempt") => Ok(Durability::Attempt),
            _ => Err(format!(
                "expected `call` (every call durable before its answer, the default) or `attempt` (calls flushed in the background, durable when the attempt is read for a verdict or ended), got {v}"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Durability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Durability, D::Error> {
        Durability::from_json(&Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A tool-call contract an attempt pinned at creation (docs/src/reference/contracts.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedContract {
    /// `sha256:` of the contract's RFC 8785 canonical JSON.
    pub contract_hash: String,
    /// The contract as parsed (defaults filled in), kept as JSON: a later model that cannot
    /// read it makes its result inconclusive rather than the record unreadable.
    pub contract: Value,
}

/// One agent-side event (docs/src/reference/events.md): what the agent said or what the runner observed, posted to
/// `POST /attempts/{id}/events`. It shares the attempt's sequence with the tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    /// Assigned by the store, in the attempt's one sequence.
    pub sequence: u64,
    pub name: String,
    pub kind: AgentEventKind,
    #[serde(default)]
    pub test_run_id: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub data: Option<Value>,
    /// RFC 3339, when understudy received it.
    pub timestamp: String,
}

/// The `kind` of an agent-side event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentEventKind {
    AgentMessage,
    CallerMessage,
    Checkpoint,
    FinalState,
    /// A kind outside the list, kept as read.
    #[serde(untagged)]
    Unknown(String),
}

impl AgentEventKind {
    /// Every kind of docs/src/reference/events.md.
    pub const KNOWN: [AgentEventKind; 4] = [
        AgentEventKind::AgentMessage,
        AgentEventKind::CallerMessage,
        AgentEventKind::Checkpoint,
        AgentEventKind::FinalState,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            AgentEventKind::AgentMessage => "agent_message",
            AgentEventKind::CallerMessage => "caller_message",
            AgentEventKind::Checkpoint => "checkpoint",
            AgentEventKind::FinalState => "final_state",
            AgentEventKind::Unknown(s) => s,
        }
    }

    /// A kind of docs/src/reference/events.md, or `None`.
    pub fn parse(s: &str) -> Option<AgentEventKind> {
        AgentEventKind::KNOWN.into_iter().find(|k| k.as_str() == s)
    }
}

/// One entry of an attempt's evidence file: a call or an agent-side event.
// Calls are the common entry: boxing them to shrink the rare event would cost every read.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum EvidenceEntry {
    Call(ToolEvent),
    Agent(AgentEvent),
}

impl EvidenceEntry {
    pub fn sequence(&self) -> u64 {
        match self {
            EvidenceEntry::Call(e) => e.sequence,
            EvidenceEntry::Agent(e) => e.sequence,
        }
    }
}

/// One call as the attempt saw it. One record per call, whatever its outcome. (Its JSON
/// Schema is part of the evidence envelope's, `understudy schema evidence`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ToolEvent {
    /// 1, 2, 3… per attempt; assigned by the store.
    pub sequence: u64,
    pub execution_attempt_id: String,
    pub integration: String,
    pub operation_id: Option<String>,
    pub revision: Option<u64>,
    pub variant: Option<String>,
    pub rule: Option<usize>,
    pub is_write: bool,
    pub arguments: Value,
    pub result: Value,
    pub result_status: ResultStatus,
    pub http_status: u16,
    pub latency_ms: f64,
    pub delay_ms: u64,
    pub idempotency_key_ref: Option<String>,
    pub trace_id: Option<String>,
    pub source: EventSource,
    /// `{"code","message","path"}` for input and harness errors.
    pub error: Option<Value>,
    /// RFC 3339.
    pub timestamp: String,
    /// The call's answer failed on purpose (issue 15, [`crate::operation::fault`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultRecord>,
}

/// The `result_status` of an event (docs/src/reference/evidence-envelope.md).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Ok,
    InputError,
    HarnessError,
    Blocked,
    Simulated,
    Forwarded,
    Replayed,
    /// A status outside docs/src/reference/evidence-envelope.md's list, kept as read: the verdict fails on it.
    #[serde(untagged)]
    Unknown(String),
}

impl ResultStatus {
    /// Every status of docs/src/reference/evidence-envelope.md.
    pub const KNOWN: [ResultStatus; 7] = [
        ResultStatus::Ok,
        ResultStatus::InputError,
        ResultStatus::HarnessError,
        ResultStatus::Blocked,
        ResultStatus::Simulated,
        ResultStatus::Forwarded,
        ResultStatus::Replayed,
    ];

    /// The word as stored (`input_error`, …; an unknown status as it was read).
    pub fn as_str(&self) -> &str {
        match self {
            ResultStatus::Ok => "ok",
            ResultStatus::InputError => "input_error",
            ResultStatus::HarnessError => "harness_error",
            ResultStatus::Blocked => "blocked",
            ResultStatus::Simulated => "simulated",
            ResultStatus::Forwarded => "forwarded",
            ResultStatus::Replayed => "replayed",
            ResultStatus::Unknown(s) => s,
        }
    }
}

/// Reads a word as stored: a status of docs/src/reference/evidence-envelope.md, else [`ResultStatus::Unknown`] with its text.
impl From<&str> for ResultStatus {
    fn from(s: &str) -> Self {
        ResultStatus::KNOWN
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| ResultStatus::Unknown(s.to_string()))
    }
}

impl std::fmt::Display for ResultStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who produced an event's result: the mock, the real system, or the real system with the
/// call tagged as test traffic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    Mock,
    Upstream,
    ToolTest,
    /// A source outside the list, kept as read.
    #[serde(untagged)]
    Unknown(String),
}

impl EventSource {
    /// The word as stored (`mock`, `upstream`, `tool_test`; an unknown one as it was read).
    pub fn as_str(&self) -> &str {
        match self {
            EventSource::Mock => "mock",
            EventSource::Upstream => "upstream",
            EventSource::ToolTest => "tool_test",
            EventSource::Unknown(s) => s,
        }
    }
}

/// Reads a word as stored: a known source, else [`EventSource::Unknown`] with its text.
impl From<&str> for EventSource {
    fn from(s: &str) -> Self {
        [
            EventSource::Mock,
            EventSource::Upstream,
            EventSource::ToolTest,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
        .unwrap_or_else(|| EventSource::Unknown(s.to_string()))
    }
}

impl std::fmt::Display for EventSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `fault` member of a call's evidence (issue 15; [`crate::operation::fault`]): the call's answer
/// failed on purpose. `kind` is a fault kind word (`timeout`, …), kept as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FaultRecord {
    pub kind: String,
    /// The call took effect (`result_status: "ok"`); `false`: nothing changed (`blocked`).
    pub after_effect: bool,
    /// `mock` (the definition) or `chaos` (the attempt's seeded faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The status line the client received; absent when none was sent (reset, close,
    /// timeout). The event's `http_status` is the decided one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_status: Option<u16>,
}

/// One attempt as the store holds it: its record, calls, agent-side events and live state
/// (read by [`crate::store::Store::attempt_evidence`]; [`crate::evidence::Inputs::of`] borrows it).
#[derive(Debug, Clone)]
pub struct AttemptEvidence {
    pub attempt: AttemptRecord,
    pub calls: Vec<ToolEvent>,
    pub events: Vec<AgentEvent>,
    pub live_state: BTreeMap<String, Map<String, Value>>,
}

// ---------------------------------------------------------------------------------------------
// Seeded chaos (the rules that use it: crate::operation::fault)

/// One operation's entry of `POST /attempts` `"faults"`: a fault, and when it fires. Stored
/// in the attempt record. Serialized flat: the fault's members plus `probability`, `seed`,
/// `times`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosFault {
    pub fault: Fault,
    /// 0..=1; default 1 (every call until `times` is reached).
    pub probability: f64,
    pub seed: u64,
    /// At most this many calls fault; `None`: no bound.
    pub times: Option<u64>,
}

impl Serialize for ChaosFault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = match serde_json::to_value(&self.fault).map_err(serde::ser::Error::custom)? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        m.insert("probability".into(), self.probability.into());
        m.insert("seed".into(), self.seed.into());
        if let Some(t) = self.times {
            m.insert("times".into(), t.into());
        }
        m.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChaosFault {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut m = Map::<String, Value>::deserialize(d)?;
        fn take<T: serde::de::DeserializeOwned, E: Error>(
            m: &mut Map<String, Value>,
            key: &str,
            what: &str,
        ) -> Result<Option<T>, E> {
            match m.remove(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => serde_json::from_value(v)
                    .map(Some)
                    .map_err(|e| E::custom(format!("`{key}`: {e}: expected {what}"))),
            }
        }
        let probability = take(&mut m, "probability", "a number 0..=1")?.unwrap_or(1.0);
        let seed = take(&mut m, "seed", "an unsigned 64-bit integer")?.unwrap_or(0);
        let times = take(&mut m, "times", "an integer ≥ 1")?;
        let fault = serde_json::from_value(Value::Object(m)).map_err(D::Error::custom)?;
        Ok(ChaosFault {
            fault,
            probability,
            seed,
            times,
        })
    }
}

/// The chaos entries of an attempt, by operation key.
pub type ChaosFaults = BTreeMap<String, ChaosFault>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_as_snake_case_and_unknown_ones_keep_their_text() {
        for s in ResultStatus::KNOWN {
            let json = serde_json::to_value(&s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<ResultStatus>(json).unwrap(), s);
        }
        let pending: ResultStatus = serde_json::from_str("\"pending\"").unwrap();
        assert_eq!(pending, ResultStatus::Unknown("pending".into()));
        assert_eq!(serde_json::to_string(&pending).unwrap(), "\"pending\"");
        for (s, word) in [
            (EventSource::Mock, "mock"),
            (EventSource::Upstream, "upstream"),
            (EventSource::ToolTest, "tool_test"),
        ] {
            assert_eq!(serde_json::to_value(&s).unwrap(), word);
            assert_eq!(
                serde_json::from_value::<EventSource>(word.into()).unwrap(),
                s
            );
        }
        assert_eq!(ResultStatus::from("replayed"), ResultStatus::Replayed);
        assert_eq!(EventSource::from("tool_test"), EventSource::ToolTest);
        let odd: EventSource = serde_json::from_str("\"replay\"").unwrap();
        assert_eq!(odd.as_str(), "replay");
    }
}
