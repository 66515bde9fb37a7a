use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/proj/understudy.json"))
}

#[test]
fn resolves_paths_and_defaults() {
    let c = parse(
        r#"{"integrations":{"crm":{"profile":"salesforce","upstream":"https://acme.my.salesforce.com","operations":"mocks/crm"},
            "tools":{"profile":"mcp","unmatched_writes":"tag","mcp_sse":true,"operations":"/abs/tools"}},
            "mode":"dry-run","redact":["ssn"],"scrub":{"headers":["X-Api-Key"]}}"#,
    )
    .unwrap();
    assert_eq!(c.listen, DEFAULT_LISTEN);
    assert_eq!(c.mode, Mode::DryRun);
    assert_eq!(c.data_dir, PathBuf::from("/proj/.understudy"));
    assert_eq!(c.ca_dir, PathBuf::from("/proj/certs"));
    let crm = &c.integrations["crm"];
    assert_eq!(crm.operations, PathBuf::from("/proj/mocks/crm"));
    assert_eq!(crm.profile, ProfileKind::Salesforce);
    assert_eq!(crm.unmatched_writes, UnmatchedWrites::Block);
    let tools = &c.integrations["tools"];
    assert_eq!(tools.operations, PathBuf::from("/abs/tools"));
    assert_eq!(tools.unmatched_writes, UnmatchedWrites::Tag);
    assert!(tools.mcp_sse);
    assert_eq!(c.redact, vec!["ssn".to_string()]);
}

#[test]
fn errors_name_file_path_and_expectation() {
    let e =
        parse(r#"{"integrations":{"crm":{"profile":"salesforce","upstraem":"x"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations/crm/upstraem");
    assert!(
        e.problem.message.contains("unknown field `upstraem`"),
        "{e}"
    );
    assert!(e
        .to_string()
        .starts_with("/proj/understudy.json: integrations/crm/upstraem: "));
    let e = parse(r#"{"integrations":{"crm":{"profile":"soap"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations/crm/profile");
    assert!(e.problem.message.contains("expected one of"), "{e}");
    let e = parse(r#"{"modes":"replay","integrations":{}}"#).unwrap_err();
    assert!(e.problem.message.contains("unknown field `modes`"));
    let e = parse(r#"{"mode":"replayy","integrations":{"a":{"profile":"rest"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "mode");
    let e = parse(r#"{"integrations":{"_x":{"profile":"rest"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations/_x");
    let e = parse(r#"{"integrations":{"CRM":{"profile":"rest"}}}"#).unwrap_err();
    assert!(e.problem.message.contains("not a valid integration name"));
    let e = parse(r#"{"integrations":{"a":{"profile":"rest","upstream":"ftp://x"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations/a/upstream");
    let e = parse(r#"{"integrations":{"a":{"profile":"rest","mcp_sse":true}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations/a/mcp_sse");
    let e = parse(r#"{"listen":"7777","integrations":{"a":{"profile":"rest"}}}"#).unwrap_err();
    assert_eq!(e.problem.path, "listen");
    let e = parse(r#"{"integrations":{}}"#).unwrap_err();
    assert_eq!(e.problem.path, "integrations");
    let e = parse(r#"{"scrub":{"headers":["a b"]},"integrations":{"a":{"profile":"rest"}}}"#)
        .unwrap_err();
    assert_eq!(e.problem.path, "scrub/headers/0");
    assert!(parse("[]")
        .unwrap_err()
        .problem
        .message
        .contains("expected a JSON object"));
    let e = parse("{").unwrap_err();
    assert!(e.problem.message.contains("not valid JSON"));
    let e = Config::load(Path::new("/nonexistent/understudy.json")).unwrap_err();
    assert!(e.not_found);
}

#[test]
fn durability_defaults_to_call_and_names_its_values_when_wrong() {
    let c = parse(r#"{"integrations":{"a":{"profile":"rest"}}}"#).unwrap();
    assert_eq!(
        c.durability,
        Durability::Call,
        "an acknowledged call is durable"
    );
    let c = parse(r#"{"durability":"attempt","integrations":{"a":{"profile":"rest"}}}"#).unwrap();
    assert_eq!(c.durability, Durability::Attempt);
    let c = parse(r#"{"durability":"call","integrations":{"a":{"profile":"rest"}}}"#).unwrap();
    assert_eq!(c.durability, Durability::Call);
    for bad in [r#""never""#, r#""Attempt""#, "true", "1"] {
        let e = parse(&format!(
            r#"{{"durability":{bad},"integrations":{{"a":{{"profile":"rest"}}}}}}"#
        ))
        .unwrap_err();
        assert_eq!(e.problem.path, "durability", "{bad}: {e}");
        assert!(
            e.problem.message.contains("`call`") && e.problem.message.contains("`attempt`"),
            "{bad}: the allowed values are named: {e}"
        );
    }
}

#[test]
fn the_store_key_takes_a_postgres_url_only() {
    let c = parse(r#"{"integrations":{"a":{"profile":"rest"}}}"#).unwrap();
    assert_eq!(c.store, None, "the embedded store by default");
    let c = parse(
        r#"{"store":"postgres://u@127.0.0.1:5432/db","integrations":{"a":{"profile":"rest"}}}"#,
    )
    .unwrap();
    assert_eq!(c.store.as_deref(), Some("postgres://u@127.0.0.1:5432/db"));
    let e = parse(r#"{"store":"mysql://u:secret@h/db","integrations":{"a":{"profile":"rest"}}}"#)
        .unwrap_err();
    assert_eq!(e.problem.path, "store");
    assert!(
        !e.problem.message.contains("secret"),
        "{}",
        e.problem.message
    );
}

#[test]
fn overrides() {
    let mut c = parse(r#"{"integrations":{"a":{"profile":"rest"}}}"#).unwrap();
    c.apply_overrides(Some("0.0.0.0:80"), Some(Mode::Record), Some(Path::new("d")))
        .unwrap();
    assert_eq!(c.listen, "0.0.0.0:80");
    assert_eq!(c.mode, Mode::Record);
    assert_eq!(c.data_dir, PathBuf::from("d"));
    assert!(c.apply_overrides(Some("nope"), None, None).is_err());
    assert_eq!(
        c.integrations["a"].operations,
        PathBuf::from("/proj/mocks/a")
    );
}

#[test]
fn urls_are_shown_without_their_password() {
    assert_eq!(
        redact_url("postgres://u:secret@h:5432/db"),
        "postgres://u:***@h:5432/db"
    );
    assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
    assert!(is_postgres_url("postgresql://h/db"));
    assert!(!is_postgres_url("sqlite://x"));
}
