use super::*;

#[test]
fn chaos_counters_and_keys_are_rebuilt_from_faulted_events() {
    let ev = |seq: u64, status: &str, fault: Option<(bool, &str)>| ToolEvent {
        sequence: seq,
        execution_attempt_id: format!("exec_{seq}"),
        integration: "crm".into(),
        operation_id: Some("book".into()),
        revision: Some(1),
        variant: Some("ok".into()),
        rule: None,
        is_write: true,
        arguments: serde_json::json!({"n": seq}),
        result: serde_json::json!({"status": 201}),
        result_status: status.into(),
        http_status: 201,
        latency_ms: 0.0,
        delay_ms: 0,
        idempotency_key_ref: Some(format!("key{seq}")),
        trace_id: None,
        source: "mock".into(),
        error: None,
        timestamp: "2026-01-01T10:05:00.000Z".into(),
        fault: fault.map(|(after_effect, origin)| crate::records::FaultRecord {
            kind: "timeout".into(),
            after_effect,
            origin: Some(origin.into()),
            wire_status: None,
        }),
    };
    let events = [
        ev(1, "ok", Some((true, "chaos"))),
        ev(2, "blocked", Some((false, "chaos"))),
        ev(3, "ok", None),
        ev(4, "blocked", None),
        ev(5, "ok", Some((true, "mock"))),
        ev(6, "input_error", None),
    ];
    let st = AttemptState::with_evidence(BTreeMap::new(), &events);
    let c = st.chaos["crm/book"];
    assert_eq!((c.calls, c.fired), (4, 2));
    // After the effect: remembered; before it: not.
    assert!(st
        .idempotency
        .contains_key(&("crm/book".into(), "key1".into())));
    assert!(!st
        .idempotency
        .contains_key(&("crm/book".into(), "key2".into())));
}

#[test]
fn the_parsed_lease_follows_the_record() {
    let t0 = parse_time("2026-01-01T00:00:00Z").unwrap();
    let new = NewAttempt {
        ttl_s: Some(60),
        ..NewAttempt::default()
    };
    let rec = new_record(t0, new);
    let a = Attempt::new(rec.clone(), AttemptState::default());
    assert_eq!(a.lease(t0), Lease::Active);
    assert_eq!(a.lease(t0 + chrono::Duration::seconds(60)), Lease::Expired);
    assert_eq!(a.lease(t0), lease_of(&rec, t0));
    let mut longer = rec.clone();
    longer.expires_at = Some(rfc3339(t0 + chrono::Duration::seconds(600)));
    a.set_record(longer);
    assert_eq!(a.lease(t0 + chrono::Duration::seconds(60)), Lease::Active);
    let mut ended = rec;
    ended.ended_at = Some(rfc3339(t0));
    a.set_record(ended);
    assert_eq!(a.lease(t0), Lease::Ended);
}

#[test]
fn tokens_are_long_random_and_url_safe() {
    let a = new_token();
    let b = new_token();
    assert_ne!(a, b);
    assert_eq!(a.len(), 4 + 64);
    assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
    assert_eq!(token_hash(&a).len(), 64);
    assert_ne!(token_hash(&a), a);
}

#[test]
fn constant_time_eq() {
    assert!(ct_eq(b"abc", b"abc"));
    assert!(!ct_eq(b"abc", b"abd"));
    assert!(!ct_eq(b"abc", b"ab"));
}

#[test]
fn key_ref_is_hmac_prefix() {
    // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    let secret = hex(b"Jefe");
    assert_eq!(
        idempotency_key_ref(&secret, "what do ya want for nothing?"),
        "5bdcc146bf60754e"
    );
    let s1 = new_secret();
    let s2 = new_secret();
    assert_ne!(idempotency_key_ref(&s1, "k"), idempotency_key_ref(&s2, "k"));
    assert_eq!(idempotency_key_ref(&s1, "k"), idempotency_key_ref(&s1, "k"));
}

#[test]
fn traceparent() {
    let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(
        trace_id(ok).as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    for bad in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "garbage",
        "",
    ] {
        assert_eq!(trace_id(bad), None, "{bad}");
    }
    // A future version may carry more fields.
    assert!(trace_id("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz").is_some());
}

#[test]
fn leases() {
    let now = SystemClock.now();
    let new = NewAttempt {
        token: Some("t"),
        ttl_s: Some(10),
        ..NewAttempt::default()
    };
    let r = new_record(now, new);
    assert_eq!(lease_of(&r, now), Lease::Active);
    assert_eq!(
        lease_of(&r, now + chrono::Duration::seconds(10)),
        Lease::Expired
    );
    let mut ended = r.clone();
    ended.ended_at = Some(rfc3339(now));
    assert_eq!(lease_of(&ended, now), Lease::Ended);
    let new = NewAttempt {
        is_default: true,
        ..NewAttempt::default()
    };
    let d = new_record(now, new);
    assert_eq!(d.token_hash, "");
    assert_eq!(
        lease_of(&d, now + chrono::Duration::days(9999)),
        Lease::Active
    );
}

#[test]
fn manual_clock_moves_only_when_told() {
    let start = SystemClock.now();
    let c = ManualClock::new(start);
    assert_eq!(c.now(), start);
    c.advance(chrono::Duration::seconds(5));
    assert_eq!(c.now(), start + chrono::Duration::seconds(5));
}
