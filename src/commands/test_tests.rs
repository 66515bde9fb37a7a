//! Unit tests of `understudy test`: its exit codes, its OTel variables and its env names.

use super::*;

#[test]
fn otel_variables_point_at_the_attempt_unless_the_user_set_them() {
    let get = |env: &[(String, String)], k: &str| {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    };
    let mut env = Vec::new();
    otel_env(&mut env, "http://127.0.0.1:9", "a1", |_| None);
    assert_eq!(
        get(&env, "OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
        Some("http://127.0.0.1:9/_understudy/api/otlp")
    );
    assert_eq!(
        get(&env, "OTEL_RESOURCE_ATTRIBUTES").as_deref(),
        Some("understudy.attempt_id=a1")
    );
    assert_eq!(get(&env, "OTEL_EXPORTER_OTLP_HEADERS"), None);
    let mut env = Vec::new();
    otel_env(&mut env, "http://127.0.0.1:9", "a1", |k| {
        (k == "UNDERSTUDY_ADMIN_TOKEN").then(|| "tok".into())
    });
    assert_eq!(
        get(&env, "OTEL_EXPORTER_OTLP_HEADERS").as_deref(),
        Some("Authorization=Bearer%20tok")
    );
    let mut env = Vec::new();
    otel_env(&mut env, "http://127.0.0.1:9", "a1", |k| match k {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://collector:4318/v1/traces".into()),
        "OTEL_RESOURCE_ATTRIBUTES" => Some("service.version=3".into()),
        _ => None,
    });
    assert_eq!(get(&env, "OTEL_EXPORTER_OTLP_ENDPOINT"), None);
    assert_eq!(get(&env, "OTEL_EXPORTER_OTLP_HEADERS"), None);
    assert_eq!(get(&env, "OTEL_EXPORTER_OTLP_PROTOCOL"), None);
    assert_eq!(
        get(&env, "OTEL_RESOURCE_ATTRIBUTES").as_deref(),
        Some("service.version=3,understudy.attempt_id=a1")
    );
    let mut env = Vec::new();
    otel_env(&mut env, "http://x", "a1", |k| {
        (k == "OTEL_RESOURCE_ATTRIBUTES").then(|| "understudy.attempt_id=mine".into())
    });
    assert_eq!(get(&env, "OTEL_RESOURCE_ATTRIBUTES"), None);
    // A protocol or headers the user set, general or for traces only, are theirs: the
    // endpoint is still the attempt's.
    for (var, ours) in [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
    ] {
        let mut env = Vec::new();
        otel_env(&mut env, "http://x", "a1", |k| match k {
            "UNDERSTUDY_ADMIN_TOKEN" => Some("tok".into()),
            k if k == var => Some("theirs".into()),
            _ => None,
        });
        assert_eq!(get(&env, ours), None, "{var}");
        assert!(get(&env, "OTEL_EXPORTER_OTLP_ENDPOINT").is_some(), "{var}");
    }
}

#[test]
fn env_names() {
    assert_eq!(env_name("crm"), "CRM");
    assert_eq!(env_name("my-tools.v2"), "MY_TOOLS_V2");
}

#[test]
fn exit_codes_of_the_command() {
    let r = |exit_code, signal, stopped: Option<&str>| TestRun {
        exit_code,
        signal,
        stopped: stopped.map(str::to_string),
        ..TestRun::default()
    };
    assert_eq!(r(Some(0), None, None).understudy_code(), None);
    assert_eq!(r(Some(7), None, None).understudy_code(), Some(7));
    assert_eq!(r(None, Some(9), None).understudy_code(), Some(137));
    assert_eq!(
        r(None, Some(15), Some("timeout")).understudy_code(),
        Some(124)
    );
    assert_eq!(
        r(Some(0), None, Some("interrupted")).understudy_code(),
        Some(130)
    );
    assert_eq!(r(None, None, None).understudy_code(), Some(127));
}
