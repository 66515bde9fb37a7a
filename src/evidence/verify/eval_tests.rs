//! Evaluator tests: for every check kind a passing, a failing and an inconclusive case, the
//! five negative tests of the tool-call contract guide (the source guide of docs/src/reference/contracts.md), and the case where
//! greedy matching would give the wrong answer.

use serde_json::{json, Value};

use super::eval::{evaluate, max_matching, ContractResult, Status};

/// The verdict's reasons of contract results, as their messages.
fn verdict_effect(results: &[ContractResult]) -> Vec<String> {
    crate::evidence::verdict::contract_reasons(results)
        .into_iter()
        .map(|r| r.message)
        .collect()
}
use super::input::{AgentEvent, Call, Evidence, Item};
use super::model::{contract_hash, parse, tests_support::SPEC_YAML, ToolCallContract};

use Status::{Failed, Inconclusive, Passed};

const LOOKUP: &str = "crm/lookup_contact_by_phone";
const BOOK: &str = "crm/book_appointment";

struct C(Call);

impl C {
    fn new(sequence: u64, tool: &str, status: &str) -> C {
        let (i, o) = tool.split_once('/').unwrap();
        C(Call {
            sequence,
            integration: i.into(),
            operation_id: Some(o.into()),
            result_status: status.into(),
            http_status: Some(200),
            arguments: json!({}),
            result: json!({"status": 200, "data": {}}),
            source: "mock".into(),
            is_write: false,
            trace_id: Some(format!("trace-{sequence}")),
            idempotency_key_ref: None,
            fault_after_effect: false,
        })
    }
    fn args(mut self, v: Value) -> C {
        self.0.arguments = v;
        self
    }
    fn result(mut self, v: Value) -> C {
        self.0.result = v;
        self
    }
    fn http(mut self, s: u16) -> C {
        self.0.http_status = Some(s);
        self
    }
    fn write(mut self, key: Option<&str>) -> C {
        self.0.is_write = true;
        self.0.idempotency_key_ref = key.map(Into::into);
        self
    }
    fn source(mut self, s: &str) -> C {
        self.0.source = s.into();
        self
    }
    fn item(self) -> Item {
        Item::Call(self.0)
    }
}

fn ev(sequence: u64, name: &str, data: Value) -> Item {
    Item::Event(AgentEvent {
        sequence,
        name: name.into(),
        kind: "agent_message".into(),
        test_run_id: Some("run_1".into()),
        text: None,
        data,
    })
}

fn lookup(seq: u64) -> C {
    C::new(seq, LOOKUP, "ok")
        .args(json!({"Phone": "+15550100"}))
        .result(json!({"status": 200, "data": {"records": [{"Id": "003A"}, {"Id": "003B"}]}}))
}

fn book(seq: u64, status: &str) -> C {
    C::new(seq, BOOK, status)
        .args(json!({"Contact__c": "003B", "Requested_Date__c": "2026-12-03"}))
        .result(json!({"status": 201, "data": {"success": true}}))
        .http(201)
        .write(Some("k1"))
}

/// The agent that does everything right.
fn good() -> Evidence {
    Evidence {
        attempt_id: "att_1".into(),
        test_run_id: Some("run_1".into()),
        ended: true,
        cleanup_verified: true,
        remaining_keys: Some(0),
        final_state: Some(json!({"crm": {"booked": true}})),
        has_gap: false,
        unreadable: false,
        items: vec![
            lookup(1).item(),
            ev(2, "caller_asked_for_date", json!({"date": "2026-12-03"})),
            ev(3, "caller_confirmed", json!({})),
            book(4, "ok").item(),
            ev(5, "told_caller_booked", json!({})),
        ],
    }
}

fn spec() -> ToolCallContract {
    parse("book_appointment_contract.yaml", SPEC_YAML).unwrap()
}

fn contract(extra: &str) -> ToolCallContract {
    parse(
        "c.yaml",
        &format!("version: 1\nid: c\ntool: {BOOK}\n{extra}"),
    )
    .unwrap()
}

fn run(c: &ToolCallContract, e: &Evidence) -> ContractResult {
    evaluate(c, &contract_hash(c), e)
}

/// (status, evidence) of check `id`; panics when absent.
fn get(r: &ContractResult, id: &str) -> (Status, String) {
    let c = r
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id} in {:#?}", r.checks));
    (c.status, c.evidence.clone())
}

fn st(c: &ToolCallContract, e: &Evidence, id: &str) -> Status {
    get(&run(c, e), id).0
}

fn with_items(items: Vec<Item>) -> Evidence {
    Evidence { items, ..good() }
}

fn replace(e: &mut Evidence, seq: u64, item: Item) {
    let i = e.items.iter().position(|x| x.sequence() == seq).unwrap();
    e.items[i] = item;
}

fn remove(e: &mut Evidence, seq: u64) {
    e.items.retain(|x| x.sequence() != seq);
}

#[test]
fn the_good_agent_passes_every_check_of_the_spec_contract() {
    let c = spec();
    let r = run(&c, &good());
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "tool[crm/book_appointment]",
            "preconditions.required_before[crm/lookup_contact_by_phone]",
            "preconditions.forbidden_before[crm/delete_contact]",
            "preconditions.events_before[caller_confirmed]",
            "arguments.required[Contact__c]",
            "arguments.required[Requested_Date__c]",
            "arguments.forbidden[Phone]",
            "arguments.forbidden[payment.card_number]",
            "arguments.sources[Contact__c]",
            "arguments.sources[Requested_Date__c]",
            "arguments.values[Requested_Date__c]",
            "calls.exactly_once",
            "order[in_order]",
            "side_effects.no_upstream_writes",
            "side_effects.max_writes[crm]",
            "side_effects.forbidden[crm/delete_contact]",
            "expected.result_status",
            "expected.http_status",
            "expected.result[data.success]",
            "expected.final_state[crm.booked]",
            "expected.after_success_only[told_caller_booked]",
            "cleanup.required",
            "evidence.trace_id_required",
            "evidence.correlation",
        ]
    );
    for ch in &r.checks {
        assert_eq!(ch.status, Passed, "{}: {}", ch.id, ch.evidence);
    }
    assert_eq!(r.status, Passed);
    assert_eq!(
        get(
            &r,
            "preconditions.required_before[crm/lookup_contact_by_phone]"
        )
        .1,
        "sequence 1 (ok) precedes the first effective call at sequence 4"
    );
    assert!(verdict_effect(&[r]).is_empty());
}

#[test]
fn the_result_serializes_like_spec_14() {
    let c = spec();
    let r = run(&c, &good());
    let v = serde_json::to_value(&r).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        vec![
            "checks",
            "contract_hash",
            "contract_id",
            "policy_version",
            "risk",
            "status"
        ]
    );
    assert_eq!(v["contract_id"], "book_appointment_contract");
    assert_eq!(v["policy_version"], "booking_v3");
    assert_eq!(v["risk"], "blocking");
    assert_eq!(v["status"], "passed");
    assert_eq!(v["contract_hash"], json!(contract_hash(&c)));
    assert_eq!(
        v["checks"][1],
        json!({"id": "preconditions.required_before[crm/lookup_contact_by_phone]", "status": "passed",
               "evidence": "sequence 1 (ok) precedes the first effective call at sequence 4"})
    );
    let back: ContractResult = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    let mut e = good();
    remove(&mut e, 4);
    remove(&mut e, 5);
    let v = serde_json::to_value(run(&c, &e)).unwrap();
    assert_eq!(v["status"], "inconclusive");
    let mut c2 = contract("");
    c2.policy_version = None;
    assert_eq!(
        serde_json::to_value(run(&c2, &good())).unwrap()["policy_version"],
        Value::Null
    );
}

#[test]
fn tool_check() {
    let c = contract("");
    let id = "tool[crm/book_appointment]";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut e = good();
    replace(&mut e, 4, book(4, "blocked").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Failed,
            "crm/book_appointment was called but never took effect: sequence 4 (blocked)"
        )
    );
    remove(&mut e, 4);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Inconclusive,
            "crm/book_appointment was never called (1 call recorded)"
        )
    );
    // `calls.max: 0` is about a tool the agent must not use: no tool check then.
    let c = contract("calls: {max: 0}\n");
    assert!(run(&c, &e).checks.iter().all(|c| c.id != id));
    assert_eq!(run(&c, &e).status, Passed);
}

#[test]
fn required_before() {
    let c = contract(&format!("preconditions: {{required_before: [{LOOKUP}]}}\n"));
    let id = "preconditions.required_before[crm/lookup_contact_by_phone]";
    assert_eq!(st(&c, &good(), id), Passed);
    // Lookup after the booking.
    let e = with_items(vec![book(1, "ok").item(), lookup(2).item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(
        t,
        "crm/book_appointment at sequence 1 came before any effective crm/lookup_contact_by_phone (calls of crm/lookup_contact_by_phone: sequence 2 (ok))"
    );
    // A lookup that was not effective does not count.
    let e = with_items(vec![
        C::new(1, LOOKUP, "input_error").item(),
        book(2, "ok").item(),
    ]);
    assert_eq!(st(&c, &e, id), Failed);
    let e = with_items(vec![book(1, "ok").item()]);
    assert!(get(&run(&c, &e), id)
        .1
        .ends_with("(crm/lookup_contact_by_phone was never called)"));
    // The booking never took effect: nothing to check before.
    let e = with_items(vec![lookup(1).item(), book(2, "blocked").item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Inconclusive,
            "crm/book_appointment has no effective call (sequence 2 (blocked))"
        )
    );
}

#[test]
fn forbidden_before() {
    let c = contract("preconditions: {forbidden_before: [crm/delete_contact]}\n");
    let id = "preconditions.forbidden_before[crm/delete_contact]";
    assert_eq!(st(&c, &good(), id), Passed);
    let e = with_items(vec![
        C::new(1, "crm/delete_contact", "ok").item(),
        book(2, "ok").item(),
    ]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(t, "crm/delete_contact at sequence 1 (ok) came before the first effective crm/book_appointment at sequence 2");
    let e = with_items(vec![
        C::new(1, "crm/delete_contact", "blocked").item(),
        book(2, "ok").item(),
    ]);
    assert_eq!(st(&c, &e, id), Passed, "a blocked delete deleted nothing");
    let e = with_items(vec![
        book(1, "ok").item(),
        C::new(2, "crm/delete_contact", "ok").item(),
    ]);
    assert_eq!(st(&c, &e, id), Passed, "after is not before");
    let e = with_items(vec![C::new(1, "crm/delete_contact", "ok").item()]);
    assert_eq!(st(&c, &e, id), Inconclusive);
}

#[test]
fn events_before() {
    let c = contract("preconditions: {events_before: [caller_confirmed]}\n");
    let id = "preconditions.events_before[caller_confirmed]";
    assert_eq!(st(&c, &good(), id), Passed);
    let e = with_items(vec![
        book(1, "ok").item(),
        ev(2, "caller_confirmed", json!({})),
    ]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(t, "event caller_confirmed came only at sequence 2, after the first effective call of crm/book_appointment at sequence 1");
    let e = with_items(vec![book(1, "ok").item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (Inconclusive, "no event caller_confirmed was recorded")
    );
    let e = with_items(vec![ev(1, "caller_confirmed", json!({}))]);
    assert_eq!(st(&c, &e, id), Inconclusive, "tool never called");
}

#[test]
fn arguments_required() {
    let c = contract("arguments: {required: [Contact__c, slot.id]}\n");
    let mut e = good();
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Contact__c": "[redacted]", "slot": {"id": "S1"}}))
            .item(),
    );
    assert_eq!(
        st(&c, &e, "arguments.required[Contact__c]"),
        Passed,
        "a redacted member is present"
    );
    assert_eq!(st(&c, &e, "arguments.required[slot.id]"), Passed);
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Contact__c": "003B", "slot": {}}))
            .item(),
    );
    let (s, t) = get(&run(&c, &e), "arguments.required[slot.id]");
    assert_eq!((s, t.as_str()), (Failed, "slot.id is absent at sequence 4"));
    // Input errors are the agent's recoverable mistake; the corrected call is judged.
    let e = with_items(vec![
        C::new(1, BOOK, "input_error").args(json!({})).item(),
        book(2, "ok")
            .args(json!({"Contact__c": "x", "slot": {"id": 1}}))
            .item(),
    ]);
    assert_eq!(st(&c, &e, "arguments.required[slot.id]"), Passed);
    let e = with_items(vec![C::new(1, BOOK, "input_error").item()]);
    let (s, t) = get(&run(&c, &e), "arguments.required[Contact__c]");
    assert_eq!(s, Inconclusive);
    assert!(
        t.contains("every call of crm/book_appointment ended in an input error"),
        "{t}"
    );
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, "arguments.required[Contact__c]"), Inconclusive);
}

#[test]
fn arguments_forbidden() {
    let c = contract("arguments: {forbidden: [Phone, payment.card_number]}\n");
    assert_eq!(st(&c, &good(), "arguments.forbidden[Phone]"), Passed);
    let e = with_items(vec![
        C::new(1, BOOK, "input_error")
            .args(json!({"payment": {"card_number": "4111"}}))
            .item(),
        book(2, "ok").args(json!({"Phone": "[redacted]"})).item(),
    ]);
    let r = run(&c, &e);
    let (s, t) = get(&r, "arguments.forbidden[payment.card_number]");
    assert_eq!(
        (s, t.as_str()),
        (
            Failed,
            "payment.card_number is present at sequence 1 (value not shown)"
        ),
        "input errors count: it was sent"
    );
    assert_eq!(
        get(&r, "arguments.forbidden[Phone]").0,
        Failed,
        "redacted is still present"
    );
    assert!(
        !serde_json::to_string(&r).unwrap().contains("4111"),
        "values of forbidden fields are never echoed"
    );
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, "arguments.forbidden[Phone]"), Inconclusive);
}

#[test]
fn sources_result_of() {
    let c = contract(&format!(
        "arguments: {{sources: {{Contact__c: {{result_of: {LOOKUP}, path: \"data.records.*.Id\"}}}}}}\n"
    ));
    let id = "arguments.sources[Contact__c]";
    let (s, t) = get(&run(&c, &good()), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Passed,
            "Contact__c at sequence 4 (\"003B\") was found at data.records.*.Id of sequence 1"
        )
    );
    // Invented id.
    let mut e = good();
    replace(
        &mut e,
        4,
        book(4, "ok").args(json!({"Contact__c": "003Z"})).item(),
    );
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(
        t,
        "Contact__c at sequence 4 (\"003Z\") was not found at data.records.*.Id of any earlier effective crm/lookup_contact_by_phone result (looked at sequence 1)"
    );
    // The right value, but only from a later lookup, or from a lookup that did not take effect.
    let e = with_items(vec![book(1, "ok").item(), lookup(2).item()]);
    assert!(get(&run(&c, &e), id).1.ends_with("(there was none)"));
    assert_eq!(st(&c, &e, id), Failed);
    let mut l = lookup(1);
    l.0.result_status = "replayed".into();
    let e = with_items(vec![l.item(), book(2, "ok").item()]);
    assert_eq!(st(&c, &e, id), Failed);
    // Numbers compare by value.
    let e = with_items(vec![
        lookup(1)
            .result(json!({"data": {"records": [{"Id": 7}]}}))
            .item(),
        book(2, "ok").args(json!({"Contact__c": 7.0})).item(),
    ]);
    assert_eq!(st(&c, &e, id), Passed);
    // Redacted argument or redacted origin: cannot be proven.
    let mut e = good();
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Contact__c": "[redacted]"}))
            .item(),
    );
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Inconclusive,
            "Contact__c at sequence 4 is redacted: its origin cannot be proven"
        )
    );
    let e = with_items(vec![
        lookup(1)
            .result(json!({"data": {"records": [{"Id": "[redacted]"}]}}))
            .item(),
        book(2, "ok").item(),
    ]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Inconclusive);
    assert!(t.contains("are redacted"), "{t}");
    // Absent from every call: nothing to trace.
    let e = with_items(vec![lookup(1).item(), book(2, "ok").args(json!({})).item()]);
    assert_eq!(st(&c, &e, id), Inconclusive);
    // One good call and one invented: failed.
    let e = with_items(vec![
        lookup(1).item(),
        book(2, "ok").item(),
        book(3, "ok").args(json!({"Contact__c": "nope"})).item(),
    ]);
    assert_eq!(st(&c, &e, id), Failed);
}

// Mutation testing found the `inconclusive` arm of `calls.exactly_once` could be deleted:
// a tool that was never called is missing evidence (inconclusive), not a counted failure —
// and neither passes.
#[test]
fn exactly_once_is_inconclusive_when_the_tool_was_never_called() {
    let c = contract("calls: {exactly_once: true}\n");
    let e = with_items(vec![lookup(1).item()]);
    let (s, t) = get(&run(&c, &e), "calls.exactly_once");
    assert_eq!(s, Inconclusive, "{t}");
    assert_ne!(run(&c, &e).status, Passed);
    // Called but never effective: a failure.
    let e = with_items(vec![book(1, "blocked").item()]);
    assert_eq!(st(&c, &e, "calls.exactly_once"), Failed);
}

// Mutation testing found `o.sequence < c.sequence` → `<=` survived: a call must never be its
// own source. A tool whose argument is sourced from the same tool's results (a paging or
// follow-up call) passes only with an EARLIER call's result, never with its own.
#[test]
fn a_call_is_never_its_own_source() {
    let c = contract(&format!(
        "arguments: {{sources: {{Contact__c: {{result_of: {BOOK}, path: \"data.Contact__c\"}}}}}}\n"
    ));
    let id = "arguments.sources[Contact__c]";
    let echo = |seq: u64| {
        book(seq, "ok")
            .args(json!({"Contact__c": "003B"}))
            .result(json!({"status": 201, "data": {"Contact__c": "003B"}}))
    };
    // Only its own result holds the value: not an earlier origin.
    let e = with_items(vec![echo(1).item()]);
    assert_eq!(st(&c, &e, id), Failed);
    // An earlier call of the same tool answered it: a proven origin for the second call —
    // and the first call (no earlier origin) still fails the check.
    let e = with_items(vec![echo(1).item(), echo(2).item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed, "{t}");
    assert!(t.contains("sequence 1"), "{t}");
}

// The same for event sources, and an event with the call's own sequence cannot exist (one
// sequence is shared): a source event must come strictly before.
#[test]
fn a_source_event_must_come_before_the_call() {
    let c = contract(
        "arguments: {sources: {Requested_Date__c: {event: caller_asked_for_date, path: date}}}\n",
    );
    let id = "arguments.sources[Requested_Date__c]";
    let e = with_items(vec![
        book(1, "ok").item(),
        ev(2, "caller_asked_for_date", json!({"date": "2026-12-03"})),
    ]);
    assert_eq!(st(&c, &e, id), Failed);
    let e = with_items(vec![
        ev(1, "caller_asked_for_date", json!({"date": "2026-12-03"})),
        book(2, "ok").item(),
    ]);
    assert_eq!(st(&c, &e, id), Passed);
}

#[test]
fn sources_event() {
    let c = contract(
        "arguments: {sources: {Requested_Date__c: {event: caller_asked_for_date, path: date}}}\n",
    );
    let id = "arguments.sources[Requested_Date__c]";
    let (s, t) = get(&run(&c, &good()), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Passed,
            "Requested_Date__c at sequence 4 (\"2026-12-03\") was found at date of sequence 2"
        )
    );
    let mut e = good();
    replace(
        &mut e,
        2,
        ev(2, "caller_asked_for_date", json!({"date": "2026-12-04"})),
    );
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(t, "Requested_Date__c at sequence 4 (\"2026-12-03\") was not found at date of any earlier event caller_asked_for_date (looked at sequence 2)");
    let e = with_items(vec![
        book(1, "ok").item(),
        ev(2, "caller_asked_for_date", json!({"date": "2026-12-03"})),
    ]);
    assert_eq!(st(&c, &e, id), Failed, "the event came after the call");
    let mut e = good();
    remove(&mut e, 2);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Inconclusive);
    assert!(
        t.ends_with("no event caller_asked_for_date was recorded to take it from"),
        "{t}"
    );
}

#[test]
fn values() {
    let c = contract(
        "arguments: {values: {Requested_Date__c: {pattern: \"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"}, Contact__c: {equals: \"003B\"}, n: {one_of: [1, 2]}}}\n",
    );
    let mut e = good();
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Requested_Date__c": "2026-12-03", "Contact__c": "003B", "n": 2.0}))
            .item(),
    );
    let r = run(&c, &e);
    for id in [
        "arguments.values[Requested_Date__c]",
        "arguments.values[Contact__c]",
        "arguments.values[n]",
    ] {
        assert_eq!(get(&r, id).0, Passed, "{id}: {}", get(&r, id).1);
    }
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Requested_Date__c": "tomorrow", "Contact__c": "003C", "n": 3}))
            .item(),
    );
    let r = run(&c, &e);
    assert_eq!(
        get(&r, "arguments.values[Requested_Date__c]"),
        (Failed, "Requested_Date__c at sequence 4 (\"tomorrow\") does not match ^[0-9]{4}-[0-9]{2}-[0-9]{2}$".to_string())
    );
    assert_eq!(get(&r, "arguments.values[Contact__c]").0, Failed);
    assert_eq!(
        get(&r, "arguments.values[n]"),
        (
            Failed,
            "n at sequence 4 (3) is not one of [1, 2]".to_string()
        )
    );
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Requested_Date__c": 20261203}))
            .item(),
    );
    assert_eq!(
        st(&c, &e, "arguments.values[Requested_Date__c]"),
        Failed,
        "a number does not match a pattern"
    );
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Requested_Date__c": "[redacted]"}))
            .item(),
    );
    let r = run(&c, &e);
    assert_eq!(
        get(&r, "arguments.values[Requested_Date__c]").0,
        Inconclusive
    );
    assert!(!get(&r, "arguments.values[Contact__c]")
        .1
        .contains("redacted"));
    assert_eq!(
        get(&r, "arguments.values[Contact__c]").0,
        Inconclusive,
        "absent everywhere"
    );
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, "arguments.values[n]"), Inconclusive);
}

#[test]
fn calls_exactly_once() {
    let c = contract("calls: {exactly_once: true}\n");
    let id = "calls.exactly_once";
    assert_eq!(st(&c, &good(), id), Passed);
    // A retry answered `replayed` is not a second effect.
    let mut e = good();
    e.items.push(book(6, "replayed").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Passed);
    assert_eq!(t, "1 effective call of crm/book_appointment (sequence 4 (ok)); not effective: sequence 6 (replayed)");
    let mut e = good();
    e.items.push(book(6, "ok").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert!(
        t.contains("2 effective calls")
            && t.contains("sequences 4, 6 share idempotency_key_ref k1"),
        "{t}"
    );
    let e = with_items(vec![book(1, "blocked").item()]);
    assert_eq!(st(&c, &e, id), Failed, "called, never took effect");
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, id), Inconclusive);
}

#[test]
fn calls_min_and_max() {
    let c = contract("calls: {min: 1, max: 2}\n");
    assert_eq!(st(&c, &good(), "calls.min"), Passed);
    assert_eq!(st(&c, &good(), "calls.max"), Passed);
    let mut e = good();
    e.items.push(book(6, "simulated").item());
    e.items.push(book(7, "forwarded").item());
    let (s, t) = get(&run(&c, &e), "calls.max");
    assert_eq!(s, Failed);
    assert!(
        t.starts_with("3 effective calls of crm/book_appointment"),
        "{t}"
    );
    let e = with_items(vec![book(1, "input_error").item()]);
    assert_eq!(st(&c, &e, "calls.min"), Failed);
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, "calls.min"), Inconclusive);
    assert_eq!(st(&c, &e, "calls.max"), Passed, "absence is within max");
    let e = with_items(vec![]);
    assert_eq!(
        st(&c, &e, "calls.max"),
        Inconclusive,
        "nothing recorded at all"
    );
}

#[test]
fn a_fault_after_the_effect_counts_as_effective() {
    let c = contract("calls: {exactly_once: true}\n");
    let mut late = book(6, "harness_error");
    late.0.fault_after_effect = true;
    let mut e = good();
    e.items.push(late.item());
    assert_eq!(st(&c, &e, "calls.exactly_once"), Failed);
}

/// Issue 15: the booking timed out after the write (`ok` + fault after the effect), and the
/// agent retried.
fn timed_out_then(retry: C) -> Evidence {
    let mut faulted = book(4, "ok");
    faulted.0.fault_after_effect = true;
    with_items(vec![lookup(1).item(), faulted.item(), retry.item()])
}

#[test]
fn a_retry_with_the_same_key_is_replayed_and_passes_exactly_once() {
    let c = contract("calls: {exactly_once: true}\nside_effects: {max_writes: {crm: 1}}\nexpected: {http_status: [201]}\n");
    let e = timed_out_then(book(5, "replayed"));
    for id in [
        "calls.exactly_once",
        "side_effects.max_writes[crm]",
        "expected.http_status",
    ] {
        assert_eq!(st(&c, &e, id), Passed, "{id}");
    }
}

#[test]
fn a_retry_with_a_new_key_books_twice_and_fails_exactly_once() {
    let c = contract("calls: {exactly_once: true}\nside_effects: {max_writes: {crm: 1}}\n");
    let e = timed_out_then(book(5, "ok").write(Some("k2")));
    assert_eq!(st(&c, &e, "calls.exactly_once"), Failed);
    assert_eq!(st(&c, &e, "side_effects.max_writes[crm]"), Failed);
}

#[test]
fn a_fault_before_the_effect_never_counts_and_a_lost_answer_is_no_success() {
    let c = contract("calls: {exactly_once: true}\n");
    // `after_effect: false` is recorded as `blocked`: no effect, so nothing was booked.
    let e = with_items(vec![lookup(1).item(), book(4, "blocked").item()]);
    assert_eq!(st(&c, &e, "calls.exactly_once"), Failed);
    // "Told the caller it was booked after a timeout": the agent never saw the answer.
    let c = contract("expected: {after_success_only: [told_caller_booked]}\n");
    let mut e = timed_out_then(book(5, "blocked"));
    e.items.push(ev(6, "told_caller_booked", json!({})));
    assert_eq!(
        st(&c, &e, "expected.after_success_only[told_caller_booked]"),
        Failed
    );
    // After the replayed retry the agent did hear of the success; before it, it had not.
    let id = "expected.after_success_only[told_caller_booked]";
    let mut e = timed_out_then(book(6, "replayed"));
    e.items.push(ev(7, "told_caller_booked", json!({})));
    assert_eq!(st(&c, &e, id), Passed);
    e.items.push(ev(5, "told_caller_booked", json!({})));
    assert_eq!(st(&c, &e, id), Failed);
}

fn order_contract(mode: &str, tools: &str) -> ToolCallContract {
    contract(&format!("order: {{mode: {mode}, tools: [{tools}]}}\n"))
}

fn traj(tools: &[&str]) -> Evidence {
    let items = tools
        .iter()
        .enumerate()
        .map(|(i, t)| C::new(i as u64 + 1, t, "ok").item())
        .collect();
    with_items(items)
}

#[test]
fn order_modes() {
    let a = "crm/a";
    let b = "crm/b";
    let x = "crm/x";
    let cases: &[(&str, &str, &[&str], Status)] = &[
        ("exact", "crm/a, crm/b", &[a, b], Passed),
        ("exact", "crm/a, crm/b", &[a, b, b], Failed),
        ("exact", "crm/a, crm/b", &[b, a], Failed),
        ("exact", "crm/a, crm/b", &[a], Failed),
        ("in_order", "crm/a, crm/b", &[x, a, x, b], Passed),
        ("in_order", "crm/a, crm/b", &[b, a], Failed),
        ("in_order", "crm/a, crm/a", &[a, x], Failed),
        ("unordered", "crm/a, crm/b, crm/b", &[b, a, b], Passed),
        ("unordered", "crm/a, crm/b, crm/b", &[b, a], Failed),
        ("unordered", "crm/a, crm/b", &[b, a, x], Failed),
        ("subset", "crm/a, crm/b", &[b], Passed),
        ("subset", "crm/a, crm/b", &[b, b], Failed),
        ("subset", "crm/a, crm/b", &[a, x], Failed),
        ("superset", "crm/a, crm/b", &[x, b, a, x], Passed),
        ("superset", "crm/a, crm/a", &[a, x], Failed),
    ];
    for (mode, tools, calls, want) in cases {
        let c = order_contract(mode, tools);
        let id = format!("order[{mode}]");
        let (s, t) = get(&run(&c, &traj(calls)), &id);
        assert_eq!(s, *want, "{mode} [{tools}] over {calls:?}: {t}");
    }
    // Non-effective calls are not on the trajectory.
    let c = order_contract("exact", "crm/a, crm/b");
    let e = with_items(vec![
        C::new(1, a, "ok").item(),
        C::new(2, x, "blocked").item(),
        C::new(3, b, "ok").item(),
    ]);
    assert_eq!(st(&c, &e, "order[exact]"), Passed);
    let (_, t) = get(&run(&c, &traj(&[a, b, b])), "order[exact]");
    assert!(
        t.starts_with("sequence 3 crm/b is an extra effective call"),
        "{t}"
    );
    // The contract's tool is listed but never called: missing evidence, inconclusive.
    let c = order_contract("in_order", &format!("{LOOKUP}, {BOOK}"));
    let (s, t) = get(&run(&c, &traj(&[LOOKUP])), "order[in_order]");
    assert_eq!(
        (s, t.as_str()),
        (
            Inconclusive,
            "crm/book_appointment was never called (1 call recorded)"
        )
    );
    let e = with_items(vec![lookup(1).item(), book(2, "blocked").item()]);
    assert_eq!(
        st(&c, &e, "order[in_order]"),
        Failed,
        "called but never took effect: a real failure"
    );
    // Nothing took effect: inconclusive, in every mode.
    for mode in ["exact", "in_order", "unordered", "subset", "superset"] {
        let c = order_contract(mode, "crm/a");
        let e = with_items(vec![C::new(1, a, "blocked").item()]);
        assert_eq!(st(&c, &e, &format!("order[{mode}]")), Inconclusive);
    }
}

#[test]
fn order_uses_maximum_matching_where_greedy_first_fit_is_wrong() {
    // List [crm/*, crm/lookup] over calls [crm/lookup, crm/book]. Greedy first fit gives
    // the lookup call to `crm/*` (the first entry that fits), then finds no entry for the
    // booking; the maximum matching pairs lookup↔crm/lookup and book↔crm/*.
    let tools = ["crm/*", LOOKUP];
    let calls = [LOOKUP, BOOK];
    let greedy = {
        let mut used = [false; 2];
        calls.iter().all(|c| {
            let call = C::new(1, c, "ok").0;
            match (0..2).find(|&l| !used[l] && entry_fits(tools[l], &call)) {
                Some(l) => {
                    used[l] = true;
                    true
                }
                None => false,
            }
        })
    };
    assert!(!greedy, "greedy first fit fails here");
    for mode in ["subset", "unordered", "superset"] {
        let c = order_contract(mode, &tools.join(", "));
        let (s, t) = get(&run(&c, &traj(&calls)), &format!("order[{mode}]"));
        assert_eq!(s, Passed, "{mode}: {t}");
    }
    // And a real mismatch is still caught.
    let c = order_contract("unordered", &tools.join(", "));
    let (s, t) = get(&run(&c, &traj(&[BOOK, BOOK])), "order[unordered]");
    assert_eq!(s, Failed);
    assert!(
        t.contains("listed but not called effectively: crm/lookup_contact_by_phone"),
        "{t}"
    );
    // The matching itself: a path of augmentations.
    let m = max_matching(3, 3, |l, r| {
        [(0, 0), (0, 1), (1, 0), (2, 1), (2, 2)].contains(&(l, r))
    });
    assert_eq!(m.iter().filter(|o| o.is_some()).count(), 3, "{m:?}");
}

fn entry_fits(entry: &str, call: &Call) -> bool {
    match entry.strip_suffix("/*") {
        Some(i) => call.integration == i,
        None => call.is(entry),
    }
}

#[test]
fn no_upstream_writes() {
    let c = contract("side_effects: {no_upstream_writes: true}\n");
    let id = "side_effects.no_upstream_writes";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut e = good();
    replace(&mut e, 4, book(4, "forwarded").source("upstream").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!((s, t.as_str()), (Failed, "writes reached a real upstream: sequence 4 (forwarded) crm/book_appointment (source upstream)"));
    // A read forwarded upstream is not a write.
    let e = with_items(vec![
        lookup(1).source("upstream").item(),
        book(2, "ok").item(),
    ]);
    assert_eq!(st(&c, &e, id), Passed);
    assert_eq!(st(&c, &with_items(vec![]), id), Inconclusive);
}

#[test]
fn max_writes() {
    let c = contract("side_effects: {max_writes: {crm: 1}}\n");
    let id = "side_effects.max_writes[crm]";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut e = good();
    e.items.push(book(6, "replayed").item());
    e.items.push(book(7, "blocked").item());
    assert_eq!(
        st(&c, &e, id),
        Passed,
        "replayed and blocked writes took no effect"
    );
    e.items.push(book(8, "simulated").write(None).item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert!(
        t.starts_with("2 effective writes to crm (sequence 4 (ok), sequence 8 (simulated))"),
        "{t}"
    );
    assert_eq!(st(&c, &with_items(vec![]), id), Inconclusive);
}

#[test]
fn side_effects_forbidden() {
    let c = contract("side_effects: {forbidden: [crm/delete_contact]}\n");
    let id = "side_effects.forbidden[crm/delete_contact]";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut e = good();
    e.items
        .push(C::new(6, "crm/delete_contact", "blocked").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Passed,
            "no effective call of crm/delete_contact (held back: sequence 6 (blocked))"
        )
    );
    e.items.push(C::new(7, "crm/delete_contact", "ok").item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (Failed, "crm/delete_contact took effect at sequence 7 (ok)")
    );
    assert_eq!(st(&c, &with_items(vec![]), id), Inconclusive);
}

#[test]
fn expected_result_status_and_http_status() {
    let c = contract("expected: {result_status: ok, http_status: [201]}\n");
    assert_eq!(st(&c, &good(), "expected.result_status"), Passed);
    assert_eq!(st(&c, &good(), "expected.http_status"), Passed);
    // The last effective call is judged: an earlier success and a later replay do not hide it.
    let mut e = good();
    e.items.push(book(6, "simulated").http(202).item());
    e.items.push(book(7, "replayed").item());
    let r = run(&c, &e);
    assert_eq!(
        get(&r, "expected.result_status"),
        (
            Failed,
            "the last effective call, sequence 6 (simulated) is not ok".to_string()
        )
    );
    assert_eq!(get(&r, "expected.http_status").0, Failed);
    // No effective call: the last call is judged, so `blocked` can be asserted.
    let blocked = contract("expected: {result_status: blocked}\n");
    let e = with_items(vec![book(1, "blocked").http(403).item()]);
    assert_eq!(st(&blocked, &e, "expected.result_status"), Passed);
    assert_eq!(st(&c, &e, "expected.result_status"), Failed);
    let mut e = good();
    replace(&mut e, 4, {
        let mut b = book(4, "ok");
        b.0.http_status = None;
        b.item()
    });
    assert_eq!(st(&c, &e, "expected.http_status"), Inconclusive);
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&c, &e, "expected.result_status"), Inconclusive);
    assert_eq!(st(&c, &e, "expected.http_status"), Inconclusive);
}

#[test]
fn expected_result() {
    let c = contract("expected: {result: {data.success: true}}\n");
    let id = "expected.result[data.success]";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut e = good();
    replace(
        &mut e,
        4,
        book(4, "ok")
            .result(json!({"data": {"success": false}}))
            .item(),
    );
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!((s, t.as_str()), (Failed, "data.success in the result of the last effective call, sequence 4 (ok) is false, expected true"));
    replace(&mut e, 4, book(4, "ok").result(json!({"data": {}})).item());
    assert_eq!(st(&c, &e, id), Failed);
    replace(
        &mut e,
        4,
        book(4, "ok")
            .result(json!({"data": {"success": "[redacted]"}}))
            .item(),
    );
    assert_eq!(st(&c, &e, id), Inconclusive);
    assert_eq!(st(&c, &with_items(vec![]), id), Inconclusive);
}

#[test]
fn expected_final_state() {
    let c = contract("expected: {final_state: {crm.booked: true}}\n");
    let id = "expected.final_state[crm.booked]";
    assert_eq!(st(&c, &good(), id), Passed);
    let e = Evidence {
        final_state: Some(json!({"crm": {"booked": false}})),
        ..good()
    };
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Failed,
            "crm.booked in the final state is false, expected true"
        )
    );
    let e = Evidence {
        final_state: Some(json!({"crm": {}})),
        ..good()
    };
    assert_eq!(st(&c, &e, id), Failed);
    let e = Evidence {
        final_state: None,
        ..good()
    };
    assert_eq!(st(&c, &e, id), Inconclusive);
    let e = Evidence {
        final_state: Some(json!({"crm": {"booked": "[redacted]"}})),
        ..good()
    };
    assert_eq!(st(&c, &e, id), Inconclusive);
    // The tool was never called: the state cannot speak for it.
    let e = Evidence {
        final_state: Some(json!({"crm": {}})),
        ..with_items(vec![])
    };
    assert_eq!(st(&c, &e, id), Inconclusive);
}

#[test]
fn after_success_only() {
    let c = contract("expected: {after_success_only: [told_caller_booked]}\n");
    let id = "expected.after_success_only[told_caller_booked]";
    let (s, t) = get(&run(&c, &good()), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Passed,
            "event told_caller_booked at sequence 5 follows the first ok call at sequence 4"
        )
    );
    let told = |seq| ev(seq, "told_caller_booked", json!({}));
    let e = with_items(vec![told(1), book(2, "ok").item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Failed);
    assert_eq!(t, "event told_caller_booked at sequence 1 came before any successful crm/book_appointment (crm/book_appointment had not been called; the first success came at sequence 2)");
    // "Booked" with no booking call at all is a false claim, not missing evidence.
    let e = with_items(vec![lookup(1).item(), told(2)]);
    assert_eq!(st(&c, &e, id), Failed);
    let mut e = good();
    remove(&mut e, 5);
    assert_eq!(st(&c, &e, id), Inconclusive);
    assert_eq!(
        get(&run(&c, &e), id).1,
        "no event told_caller_booked was recorded"
    );
}

#[test]
fn cleanup_required() {
    let c = contract("cleanup: {required: true}\n");
    let id = "cleanup.required";
    assert_eq!(st(&c, &good(), id), Passed);
    let e = Evidence {
        remaining_keys: None,
        ..good()
    };
    assert_eq!(st(&c, &e, id), Failed);
    let e = Evidence {
        cleanup_verified: false,
        ..good()
    };
    assert_eq!(
        get(&run(&c, &e), id),
        (
            Failed,
            "the attempt ended but its cleanup was not verified".to_string()
        )
    );
    let not_required = contract("cleanup: {required: false}\n");
    assert!(run(&not_required, &e).checks.iter().all(|c| c.id != id));
    // Inconclusive: the store cannot be read.
    let e = Evidence {
        unreadable: true,
        ..good()
    };
    assert_eq!(st(&c, &e, id), Inconclusive);
}

#[test]
fn trace_id_required() {
    let c = contract("evidence: {trace_id_required: true}\n");
    let id = "evidence.trace_id_required";
    assert_eq!(st(&c, &good(), id), Passed);
    let mut b = book(6, "replayed");
    b.0.trace_id = None;
    let mut e = good();
    e.items.push(b.item());
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        (s, t.as_str()),
        (Failed, "no trace id (traceparent) at sequence 6")
    );
    let mut b = book(4, "ok");
    b.0.trace_id = Some(String::new());
    let mut e = good();
    replace(&mut e, 4, b.item());
    assert_eq!(st(&c, &e, id), Failed, "an empty trace id is none");
    assert_eq!(
        st(&c, &with_items(vec![lookup(1).item()]), id),
        Inconclusive
    );
}

#[test]
fn correlation() {
    let c = contract("evidence: {correlation: test_run_id}\n");
    let id = "evidence.correlation";
    let (s, t) = get(&run(&c, &good()), id);
    assert_eq!(
        (s, t.as_str()),
        (
            Passed,
            "3 events (sequence 2, 3, 5) carry the attempt's test_run_id run_1"
        )
    );
    let mut e = good();
    if let Item::Event(x) = &mut e.items[1] {
        x.test_run_id = None;
    }
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(
        s, Failed,
        "an event without a test_run_id cannot be shown to belong to the run"
    );
    assert!(
        t.starts_with("event caller_asked_for_date at sequence 2 carries no test_run_id"),
        "{t}"
    );
    let e = with_items(vec![book(1, "ok").item()]);
    assert_eq!(
        get(&run(&c, &e), id),
        (Inconclusive, "no agent-side event was recorded".to_string())
    );
    let e = Evidence {
        test_run_id: None,
        ..good()
    };
    assert_eq!(st(&c, &e, id), Inconclusive);
}

#[test]
fn a_gap_or_an_unreadable_store_makes_every_check_inconclusive() {
    let c = spec();
    let e = Evidence {
        has_gap: true,
        ..good()
    };
    let r = run(&c, &e);
    assert_eq!(r.status, Inconclusive);
    assert!(r.checks.iter().all(|c| c.status == Inconclusive));
    assert!(
        r.checks[0].evidence.starts_with("the evidence has a gap"),
        "{}",
        r.checks[0].evidence
    );
    // A breach on the events present is kept in the text.
    let e = Evidence {
        has_gap: true,
        ended: false,
        ..good()
    };
    let (s, t) = get(&run(&c, &e), "cleanup.required");
    assert_eq!(s, Inconclusive);
    assert!(t.contains("failed — the attempt has not ended"), "{t}");
    let e = Evidence {
        unreadable: true,
        items: vec![],
        ..good()
    };
    let r = run(&c, &e);
    assert_eq!(r.status, Inconclusive);
    assert!(r
        .checks
        .iter()
        .all(|c| c.status == Inconclusive && c.evidence == "the evidence store could not be read"));
    assert_eq!(r.checks.len(), 24, "the ids stay stable");
}

#[test]
fn contract_status_and_verdict_effect() {
    let c = spec();
    // One failure among inconclusives: failed.
    let mut e = good();
    remove(&mut e, 5);
    e.items.push(C::new(6, "crm/delete_contact", "ok").item());
    let r = run(&c, &e);
    assert_eq!(r.status, Failed);
    let codes: Vec<String> = crate::evidence::verdict::contract_reasons(std::slice::from_ref(&r))
        .into_iter()
        .map(|r| r.code)
        .collect();
    assert_eq!(
        codes,
        vec![
            "contract:book_appointment_contract:side_effects.forbidden[crm/delete_contact]",
            "contract:book_appointment_contract:expected.after_success_only[told_caller_booked]",
        ]
    );
    let reasons = verdict_effect(std::slice::from_ref(&r));
    assert_eq!(
        reasons,
        vec![
            "contract book_appointment_contract: failed — side_effects.forbidden[crm/delete_contact]: crm/delete_contact took effect at sequence 6 (ok) (failed)",
            "contract book_appointment_contract: failed — expected.after_success_only[told_caller_booked]: no event told_caller_booked was recorded (inconclusive)",
        ]
    );
    // Only inconclusives: inconclusive, and it still fails the verdict.
    let mut e = good();
    remove(&mut e, 5);
    let r = run(&c, &e);
    assert_eq!(r.status, Inconclusive);
    assert_eq!(verdict_effect(std::slice::from_ref(&r)).len(), 1);
    // Advisory contracts are reported, never a reason.
    let mut adv = c.clone();
    adv.risk = super::model::Risk::Advisory;
    let r2 = run(&adv, &e);
    assert_eq!(r2.status, Inconclusive);
    assert!(verdict_effect(&[r2]).is_empty());
    assert!(verdict_effect(&[run(&c, &good())]).is_empty());
}

// ---- The five negative tests of the tool-call contract guide (the source guide of docs/src/reference/contracts.md) ----

#[test]
fn negative_1_missing_tool_event_is_inconclusive_and_never_passes() {
    let c = spec();
    let e = with_items(vec![
        lookup(1).item(),
        ev(2, "caller_asked_for_date", json!({"date": "2026-12-03"})),
        ev(3, "caller_confirmed", json!({})),
    ]);
    let e = Evidence {
        final_state: Some(json!({"crm": {"booked": true}})),
        ..e
    };
    let r = run(&c, &e);
    assert_eq!(r.status, Inconclusive, "{:#?}", r.checks);
    assert_eq!(get(&r, "tool[crm/book_appointment]").0, Inconclusive);
    assert_eq!(get(&r, "calls.exactly_once").0, Inconclusive);
    assert!(
        !verdict_effect(&[r]).is_empty(),
        "a blocking inconclusive contract fails the verdict"
    );
}

#[test]
fn negative_2_duplicate_side_effect_fails_while_a_replayed_retry_passes() {
    let c = spec();
    // Same idempotency key, both applied.
    let mut e = good();
    e.items.push(book(6, "ok").item());
    let r = run(&c, &e);
    assert_eq!(r.status, Failed);
    assert!(get(&r, "calls.exactly_once")
        .1
        .contains("share idempotency_key_ref k1"));
    assert_eq!(get(&r, "side_effects.max_writes[crm]").0, Failed);
    // No key at all and exactly_once.
    let mut e = good();
    replace(&mut e, 4, book(4, "ok").write(None).item());
    e.items.push(book(6, "ok").write(None).item());
    let r = run(&c, &e);
    assert_eq!(get(&r, "calls.exactly_once").0, Failed);
    assert!(get(&r, "calls.exactly_once")
        .1
        .contains("carry no idempotency key"));
    // The retry was answered `replayed`: one effect, the contract passes.
    let mut e = good();
    e.items.push(book(6, "replayed").item());
    let r = run(&c, &e);
    assert_eq!(r.status, Passed, "{:#?}", r.checks);
}

#[test]
fn negative_3_broken_correlation_fails() {
    let c = spec();
    let mut e = good();
    replace(
        &mut e,
        5,
        Item::Event(AgentEvent {
            sequence: 5,
            name: "told_caller_booked".into(),
            kind: "agent_message".into(),
            test_run_id: Some("run_2".into()),
            text: Some("You're booked".into()),
            data: json!({}),
        }),
    );
    let r = run(&c, &e);
    assert_eq!(r.status, Failed);
    assert_eq!(
        get(&r, "evidence.correlation"),
        (Failed, "event told_caller_booked at sequence 5 carries test_run_id run_2; the attempt's test_run_id is run_1".to_string())
    );
}

#[test]
fn negative_4_false_success_fails_after_success_only() {
    let c = spec();
    let id = "expected.after_success_only[told_caller_booked]";
    for (status, http, answered) in [
        ("blocked", 403, "sequence 4 (blocked, HTTP 403)"),
        ("input_error", 400, "sequence 4 (input_error, HTTP 400)"),
        ("harness_error", 500, "sequence 4 (harness_error, HTTP 500)"),
        ("ok", 503, "sequence 4 (ok, HTTP 503)"),
        ("ok", 409, "sequence 4 (ok, HTTP 409)"),
    ] {
        let mut e = good();
        replace(&mut e, 4, book(4, status).http(http).item());
        let r = run(&c, &e);
        assert_eq!(r.status, Failed, "{status} {http}");
        assert_eq!(
            get(&r, id),
            (Failed, format!("event told_caller_booked at sequence 5 came before any successful crm/book_appointment (crm/book_appointment answered {answered}; no call succeeded)")),
        );
    }
    // A failed first try, then a success, then the confirmation: fine.
    let e = with_items(vec![
        lookup(1).item(),
        book(2, "ok").http(503).item(),
        book(3, "ok").item(),
        ev(4, "told_caller_booked", json!({})),
    ]);
    assert_eq!(st(&c, &e, id), Passed);
}

#[test]
fn negative_5_unverified_cleanup_fails() {
    let c = spec();
    let e = Evidence {
        ended: false,
        cleanup_verified: false,
        remaining_keys: None,
        ..good()
    };
    let r = run(&c, &e);
    assert_eq!(r.status, Failed);
    assert_eq!(
        get(&r, "cleanup.required"),
        (
            Failed,
            "the attempt has not ended, so its cleanup has not run".to_string()
        )
    );
    let e = Evidence {
        remaining_keys: Some(2),
        ..good()
    };
    let r = run(&c, &e);
    assert_eq!(r.status, Failed);
    assert_eq!(
        get(&r, "cleanup.required"),
        (Failed, "the cleanup left 2 state keys behind".to_string())
    );
}

#[test]
fn items_are_judged_in_sequence_order_whatever_order_they_arrive_in() {
    let c = spec();
    let mut e = good();
    e.items.reverse();
    assert_eq!(run(&c, &e).status, Passed);
}

#[test]
fn redacted_values_are_never_echoed() {
    let c = spec();
    let mut e = good();
    replace(
        &mut e,
        1,
        lookup(1)
            .result(json!({"data": {"records": [{"Id": "[redacted]"}]}}))
            .item(),
    );
    replace(
        &mut e,
        4,
        book(4, "ok")
            .args(json!({"Contact__c": "[redacted]", "Requested_Date__c": "2026-12-03"}))
            .item(),
    );
    let r = run(&c, &e);
    assert_eq!(r.status, Inconclusive);
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains("[redacted]\""), "{text}");
}

// Mutation testing found `ti == i` → `!=` survived in `order`: a wildcard of ANOTHER
// integration does not make the order list about the contract's tool, so a contract tool never
// called leaves such an order judged on the trajectory; a wildcard of its own integration
// does make it about the tool (missing evidence, inconclusive).
#[test]
fn only_a_wildcard_of_the_tools_own_integration_makes_the_order_about_the_tool() {
    let c = order_contract("subset", "erp/*");
    assert_eq!(st(&c, &traj(&["erp/a"]), "order[subset]"), Passed);
    let c = order_contract("subset", "crm/*");
    assert_eq!(st(&c, &traj(&["crm/a"]), "order[subset]"), Inconclusive);
}

// Mutation testing found `min > 0` → `>=` survived: `min: 0` requires nothing, so a tool never
// called passes it (other calls were recorded: the agent ran) — while `min: 1` is inconclusive.
#[test]
fn calls_min_zero_requires_nothing() {
    let e = with_items(vec![lookup(1).item()]);
    assert_eq!(st(&contract("calls: {min: 0}\n"), &e, "calls.min"), Passed);
    assert_eq!(
        st(&contract("calls: {min: 1}\n"), &e, "calls.min"),
        Inconclusive
    );
}

// Mutation testing found the reasons of a failed set-like order untested: each names only what
// the mode forbids — extra calls for `unordered`/`subset`, missing tools for
// `unordered`/`superset`.
#[test]
fn a_failed_order_names_only_what_its_mode_forbids() {
    let why = |mode: &str, tools: &str, calls: &[&str]| {
        let (s, t) = get(
            &run(&order_contract(mode, tools), &traj(calls)),
            &format!("order[{mode}]"),
        );
        assert_eq!(s, Failed, "{t}");
        t
    };
    let t = why("unordered", "crm/a, crm/b", &["crm/b", "crm/a", "crm/x"]);
    assert!(t.starts_with("not in the list: sequence 3 crm/x; "), "{t}");
    assert!(!t.contains("listed but not called"), "{t}");
    let t = why("superset", "crm/a, crm/a", &["crm/a", "crm/x"]);
    assert!(
        t.starts_with("listed but not called effectively: crm/a; "),
        "{t}"
    );
    assert!(!t.contains("not in the list"), "{t}");
    let t = why("subset", "crm/a, crm/b", &["crm/a", "crm/x"]);
    assert!(t.starts_with("not in the list: sequence 2 crm/x; "), "{t}");
    assert!(!t.contains("listed but not called"), "{t}");
}

// Mutation testing found `forwarded || source upstream` → `&&` survived: EITHER sign alone
// means the write reached a real system (a write answered `ok` by the upstream, a write
// `forwarded` whatever source the recorder gave it).
#[test]
fn either_sign_of_a_forwarded_write_fails_no_upstream_writes() {
    let c = contract("side_effects: {no_upstream_writes: true}\n");
    let id = "side_effects.no_upstream_writes";
    for b in [book(2, "ok").source("upstream"), book(2, "forwarded")] {
        let e = with_items(vec![lookup(1).item(), b.item()]);
        assert_eq!(st(&c, &e, id), Failed);
    }
}

// Mutation testing found the `> 1` bounds of the duplicate explanation untested: a key used
// once and a single keyless call are not duplicates and are not named as such.
#[test]
fn only_real_duplicates_are_named_in_exactly_once() {
    let c = contract("calls: {exactly_once: true}\n");
    let id = "calls.exactly_once";
    let (s, t) = get(
        &run(
            &c,
            &with_items(vec![book(1, "ok").item(), book(2, "ok").write(None).item()]),
        ),
        id,
    );
    assert_eq!(s, Failed);
    assert!(!t.contains("share idempotency_key_ref"), "{t}");
    assert!(!t.contains("carry no idempotency key"), "{t}");
    let (_, t) = get(
        &run(
            &c,
            &with_items(vec![book(1, "ok").item(), book(2, "ok").item()]),
        ),
        id,
    );
    assert!(
        t.contains("sequences 1, 2 share idempotency_key_ref k1"),
        "{t}"
    );
    let keyless = |s| book(s, "ok").write(None).item();
    let (_, t) = get(&run(&c, &with_items(vec![keyless(1), keyless(2)])), id);
    assert!(t.contains("sequences 1, 2 carry no idempotency key"), "{t}");
}

// Mutation testing found `c.sequence < first.sequence` → `<=` survived in both preconditions:
// the first effective call is never its own predecessor (a contract naming its own tool).
#[test]
fn the_first_call_is_never_its_own_precondition() {
    let e = with_items(vec![lookup(1).item(), book(2, "ok").item()]);
    let c = contract(&format!("preconditions: {{required_before: [{BOOK}]}}\n"));
    let (s, t) = get(
        &run(&c, &e),
        &format!("preconditions.required_before[{BOOK}]"),
    );
    assert_eq!(s, Failed, "{t}");
    let c = contract(&format!("preconditions: {{forbidden_before: [{BOOK}]}}\n"));
    let (s, t) = get(
        &run(&c, &e),
        &format!("preconditions.forbidden_before[{BOOK}]"),
    );
    assert_eq!(s, Passed, "{t}");
}

// An MCP tool without an output schema answers JSON in a text block (`result_form:
// call_tool_result`): `$json` parses the block, so the id the agent took from it is traced;
// the whole text never equals an id, and an invented id still fails.
#[test]
fn sources_through_a_json_text_block() {
    let text = "{\"customer\": {\"id\": \"003B\", \"plan\": \"gold\"}}";
    let mcp = |seq: u64| {
        C::new(seq, LOOKUP, "ok").result(json!({"status": 200, "data": {
            "content": [{"type": "text", "text": text}], "isError": false}}))
    };
    let c = contract(&format!(
        "arguments: {{sources: {{Contact__c: {{result_of: {LOOKUP}, path: \"data.content.*.text.$json.customer.id\"}}}}}}\n"
    ));
    let id = "arguments.sources[Contact__c]";
    let e = with_items(vec![mcp(1).item(), book(2, "ok").item()]);
    let (s, t) = get(&run(&c, &e), id);
    assert_eq!(s, Passed, "{t}");
    assert!(
        t.contains("data.content.*.text.$json.customer.id of sequence 1"),
        "{t}"
    );
    let whole = contract(&format!(
        "arguments: {{sources: {{Contact__c: {{result_of: {LOOKUP}, path: \"data.content.*.text\"}}}}}}\n"
    ));
    assert_eq!(st(&whole, &e, id), Failed);
    let e = with_items(vec![
        mcp(1).item(),
        book(2, "ok").args(json!({"Contact__c": "003Z"})).item(),
    ]);
    assert_eq!(st(&c, &e, id), Failed);
}
