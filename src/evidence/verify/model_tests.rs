use super::tests_support::SPEC_YAML;
use super::*;

fn one(r: Result<ToolCallContract, Vec<Problem>>) -> Problem {
    let mut v = r.expect_err("should be rejected");
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

#[test]
fn the_spec_example_parses_in_yaml_and_json_with_one_hash() {
    let c = parse("contracts/book_appointment_contract.yaml", SPEC_YAML).unwrap();
    assert_eq!(c.tool, "crm/book_appointment");
    assert_eq!(c.order.as_ref().unwrap().mode, OrderMode::InOrder);
    assert_eq!(
        c.arguments.as_ref().unwrap().sources["Contact__c"].path,
        "data.records.*.Id"
    );
    let json = serde_json::to_string_pretty(&c).unwrap();
    let d = parse("book_appointment_contract.json", &json).unwrap();
    assert_eq!(c, d);
    let h = contract_hash(&c);
    assert_eq!(h, contract_hash(&d));
    assert!(h.starts_with("sha256:") && h.len() == 71, "{h}");
    assert!(h[7..]
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
}

#[test]
fn the_hash_is_rfc8785_sha256() {
    // sha256("{}") — the canonical JSON of an empty object.
    assert_eq!(
        json_hash(&serde_json::json!({})),
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    let a = serde_json::json!({"b": 1, "a": [1.0, "x"]});
    let b: Value = serde_json::from_str(r#"{ "a": [1, "x"], "b": 1 }"#).unwrap();
    assert_eq!(json_hash(&a), json_hash(&b));
}

#[test]
fn risk_defaults_to_blocking_and_changes_hash_only_when_it_changes() {
    let min = "version: 1\nid: c\ntool: crm/x\n";
    let c = parse("c.yaml", min).unwrap();
    assert_eq!(c.risk, Risk::Blocking);
    let explicit = parse("c.yaml", &format!("{min}risk: blocking\n")).unwrap();
    assert_eq!(contract_hash(&c), contract_hash(&explicit));
    let adv = parse("c.yml", &format!("{min}risk: advisory\n")).unwrap();
    assert_ne!(contract_hash(&c), contract_hash(&adv));
}

#[test]
fn unknown_keys_are_rejected_with_file_and_path_yaml() {
    let text = SPEC_YAML.replace("path: \"date\"", "path: \"date\", from: x");
    let p = one(parse("book_appointment_contract.yaml", &text));
    assert_eq!(p.file, Path::new("book_appointment_contract.yaml"));
    assert_eq!(p.path, "arguments.sources.Requested_Date__c.from");
    assert!(p.message.contains("unknown field `from`"), "{p}");
    assert!(p.message.contains("line "), "YAML errors carry a line: {p}");
    let top = one(parse(
        "c.yaml",
        "version: 1\nid: c\ntool: crm/x\nowner: me\n",
    ));
    assert_eq!(top.path, "owner");
    assert!(
        top.to_string()
            .starts_with("c.yaml: owner: unknown field `owner`"),
        "{top}"
    );
}

#[test]
fn unknown_keys_are_rejected_with_file_and_path_json() {
    let p = one(parse(
        "c.json",
        r#"{"version": 1, "id": "c", "tool": "crm/x", "calls": {"exactly_twice": true}}"#,
    ));
    assert_eq!(p.path, "calls.exactly_twice");
    assert!(p.message.contains("unknown field `exactly_twice`"), "{p}");
    assert!(p.message.contains("line 1"), "{p}");
}

#[test]
fn type_errors_name_the_path() {
    let text = SPEC_YAML.replace(
        "result_of: crm/lookup_contact_by_phone",
        "result_of: [crm/lookup_contact_by_phone]",
    );
    let p = one(parse("book_appointment_contract.yaml", &text));
    assert_eq!(p.path, "arguments.sources.Contact__c.result_of");
    assert!(p.message.contains("expected a string"), "{p}");
    assert!(
        p.message.starts_with("invalid type"),
        "the path is said once: {p}"
    );
    let p = one(parse(
        "c.json",
        r#"{"version": 1, "id": "c", "tool": "crm/x", "order": {"mode": "sideways", "tools": []}}"#,
    ));
    assert_eq!(p.path, "order.mode");
    assert!(
        p.message.contains("in_order"),
        "names the expected variants: {p}"
    );
    let p = one(parse(
        "c.json",
        r#"{"version": 1, "id": "c", "tool": "crm/x", "preconditions": {"required_before": ["a/b", 3]}}"#,
    ));
    assert_eq!(p.path, "preconditions.required_before[1]");
    let p = one(parse("c.json", r#"{"version": 1, "id": "c"}"#));
    assert_eq!(p.path, "");
    assert!(p.message.contains("missing field `tool`"), "{p}");
    let p = one(parse(
        "c.json",
        r#"{"version": 1, "id": "c", "tool": "a/b"} x"#,
    ));
    assert!(p.message.contains("trailing"), "{p}");
}

#[test]
fn validation_rules() {
    let base = "version: 1\nid: c\ntool: crm/x\n";
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "c.yaml",
            "version: 2\nid: c\ntool: crm/x\n",
            "version",
            "expected 1",
        ),
        (
            "C.yaml",
            "version: 1\nid: C\ntool: crm/x\n",
            "id",
            "does not match",
        ),
        ("d.yaml", base, "id", "file stem `d`"),
        (
            "c.yaml",
            "version: 1\nid: c\ntool: x\n",
            "tool",
            "<integration>/<operation_id>",
        ),
        (
            "c.yaml",
            "calls: {exactly_once: true, max: 2}\n",
            "calls",
            "excludes",
        ),
        ("c.yaml", "calls: {}\n", "calls", "expected `exactly_once`"),
        (
            "c.yaml",
            "calls: {min: 3, max: 2}\n",
            "calls",
            "greater than",
        ),
        (
            "c.yaml",
            "calls: {exactly_once: false}\n",
            "calls.exactly_once",
            "says nothing",
        ),
        (
            "c.yaml",
            "order: {mode: exact, tools: []}\n",
            "order.tools",
            "at least one",
        ),
        (
            "c.yaml",
            "order: {mode: exact, tools: [crm]}\n",
            "order.tools[0]",
            "<integration>",
        ),
        (
            "c.yaml",
            "arguments: {values: {d: {pattern: \"([a-z\"}}}\n",
            "arguments.values.d.pattern",
            "does not compile",
        ),
        (
            "c.yaml",
            "arguments: {values: {d: {}}}\n",
            "arguments.values.d",
            "at least one of",
        ),
        (
            "c.yaml",
            "arguments: {sources: {d: {path: x}}}\n",
            "arguments.sources.d",
            "exactly one of",
        ),
        (
            "c.yaml",
            "arguments: {sources: {d: {path: x, event: e, result_of: a/b}}}\n",
            "arguments.sources.d",
            "exactly one of",
        ),
        (
            "c.yaml",
            "arguments: {sources: {d: {path: \"a..b\", event: e}}}\n",
            "arguments.sources.d.path",
            "empty segment",
        ),
        (
            "c.yaml",
            "arguments: {required: [\"a.*\"]}\n",
            "arguments.required[0]",
            "only in `sources`",
        ),
        (
            "c.yaml",
            "expected: {result_status: great}\n",
            "expected.result_status",
            "one of ok",
        ),
        (
            "c.yaml",
            "expected: {http_status: [999]}\n",
            "expected.http_status[0]",
            "100-599",
        ),
        (
            "c.yaml",
            "expected: {final_state: {\"crm..x\": 1}}\n",
            "expected.final_state.crm..x",
            "empty segment",
        ),
        (
            "c.yaml",
            "side_effects: {max_writes: {crm/x: 1}}\n",
            "side_effects.max_writes.crm/x",
            "integration name",
        ),
    ];
    for (file, text, path, msg) in cases {
        let text = if text.starts_with("version") {
            text.to_string()
        } else {
            format!("{base}{text}")
        };
        let probs = parse(file, &text).expect_err(&text);
        assert!(
            probs
                .iter()
                .any(|p| p.path == *path && p.message.contains(msg)),
            "{text}: wanted {path}: {msg}, got {probs:?}"
        );
    }
    assert!(parse("a-b.c_1.yaml", "version: 1\nid: a-b.c_1\ntool: i/o/p\n").is_ok());
    assert!(!valid_id(&"a".repeat(129)));
    assert!(valid_id(&"a".repeat(128)));
}

#[test]
fn display_is_file_path_message() {
    assert_eq!(
        Problem::new("f.yaml", "a.b", "bad").to_string(),
        "f.yaml: a.b: bad"
    );
    assert_eq!(Problem::new("f.yaml", "", "bad").to_string(), "f.yaml: bad");
}

#[test]
fn risk_as_str_is_its_serialized_name() {
    for r in [Risk::Blocking, Risk::Advisory] {
        assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
    }
    assert_eq!(Risk::Advisory.as_str(), "advisory");
}

/// Moved from the integration suite (a pure function), with the bound's edge and the
/// format that the alias check does not apply to.
#[test]
fn contract_files_are_bounded_and_refuse_yaml_aliases() {
    let ok = "version: 1\nid: c\nrisk: blocking\ntool: crm/book\n";
    assert!(parse("c.yaml", ok).is_ok());
    let p = one(parse(
        "c.yaml",
        "version: 1\nid: &x c\nrisk: blocking\ntool: *x\n",
    ));
    assert_eq!(p.message.split(':').next(), Some("line 2"), "{p}");
    assert!(p.message.contains("YAML anchors are refused"), "{p}");
    let p = one(parse("c.yaml", "version: 1\nid: c\ntool: [*x]\n"));
    assert!(
        p.message.starts_with("line 3: YAML aliases are refused"),
        "{p}"
    );
    let quoted = format!("{ok}policy_version: \"a *b and &c\"\n");
    assert!(parse("c.yaml", &quoted).is_ok());
    let commented = format!("{ok}# see &anchor and *alias\n");
    assert!(parse("c.yaml", &commented).is_ok());
    // JSON has no aliases: a `&` or `*` there is text.
    let json = r#"{"version": 1, "id": "c", "tool": "crm/book", "policy_version": "x: &a *a"}"#;
    assert!(parse("c.json", json).is_ok());
    // At most 1 MiB: exactly the bound is read, one byte more is refused.
    let pad = |n: usize| format!("{ok}#{}\n", "x".repeat(n - ok.len() - 2));
    let at = pad(MAX_CONTRACT_BYTES);
    assert_eq!(at.len(), MAX_CONTRACT_BYTES);
    assert!(parse("c.yaml", &at).is_ok());
    let p = one(parse("c.yaml", &pad(MAX_CONTRACT_BYTES + 1)));
    assert!(p.message.contains("at most 1048576 bytes"), "{p}");
    assert!(p.message.contains("1048577 bytes"), "{p}");
}

/// What counts as an anchor or alias: a `&`/`*` and a name at the start of a node, outside
/// quotes and comments (each case a way the scan could be wrong).
#[test]
fn yaml_alias_finds_anchors_and_aliases_only_at_a_nodes_start() {
    let anchors = Some((1, "anchors"));
    let aliases = Some((1, "aliases"));
    for (text, want) in [
        ("a: &x 1", anchors),
        ("a: &_x 1", anchors),
        ("a: *x", aliases),
        ("*x: 1", aliases),
        ("- *x", aliases),
        ("a: [*x]", aliases),
        ("a: {b: *x}", aliases),
        ("a: [1,*x]", aliases),
        ("a:\t*x", aliases),
        ("a: [x#y, *z]", aliases),
        ("a: [it's, *x]", aliases),
        ("a: b&c", None),
        ("a: x *y", None),
        ("a: & x", None),
        ("a: *", None),
        ("a: \"- *y\"", None),
        ("a: '- *y'", None),
        ("a: '- *y' *z", None),
        ("a: \"x\" - *y", aliases),
        ("a: 1 # - *x", None),
        ("#- *x", None),
    ] {
        assert_eq!(yaml_alias(text), want, "{text:?}");
    }
    assert_eq!(yaml_alias("a: 1\nb: 2\nc: [*x]"), Some((3, "aliases")));
}

/// The edges of two rules: `min` equal to `max` is a count, and a pattern's compile error is
/// told on one line (the regex crate's message spans several).
#[test]
fn min_equal_to_max_is_valid_and_a_bad_pattern_is_told_on_one_line() {
    let base = "version: 1\nid: c\ntool: crm/x\n";
    assert!(parse("c.yaml", &format!("{base}calls: {{min: 2, max: 2}}\n")).is_ok());
    let p = one(parse(
        "c.yaml",
        &format!("{base}arguments: {{values: {{d: {{pattern: \"([a-z\"}}}}}}\n"),
    ));
    assert!(
        p.message
            .starts_with("does not compile: regex parse error: ([a-z "),
        "{p}"
    );
    assert!(p.message.contains("unclosed"), "{p}");
    assert!(!p.message.contains('\n'), "{p}");
}

#[test]
fn a_tool_needs_both_parts_and_a_source_event_a_name() {
    assert_eq!(split_tool("crm/a/b"), Some(("crm", "a/b")));
    for bad in ["crm/", "/book", "/", "crm"] {
        assert_eq!(split_tool(bad), None, "{bad}");
    }
    let p = one(parse(
        "c.yaml",
        "version: 1\nid: c\ntool: crm/x\narguments: {sources: {d: {event: \"\", path: x}}}\n",
    ));
    assert_eq!(p.path, "arguments.sources.d.event");
    assert!(p.message.contains("cannot be empty"), "{p}");
}
