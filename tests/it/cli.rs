//! The `understudy` binary end to end: `check` (clean example, each docs/src/reference/mock-definition.md#checks-and-limits rejection with its
//! file and JSON path, `--format json`), `exec` exit codes, `generate`.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use understudy::contract::hash::contract_hash;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn understudy(args: &[&str], cwd: Option<&Path>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_understudy"));
    cmd.args(args).env_remove("UNDERSTUDY_ADMIN_TOKEN");
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("run understudy");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn example_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/healthplus/understudy.json")
}

fn example_op(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/healthplus/mocks/crm")
        .join(format!("{name}.json"))
        .display()
        .to_string()
}

/// A clean `rest` operation; `finish` fills in the contract hash.
fn base_op() -> Value {
    json!({
        "operation_id": "get_thing",
        "description": "Get one thing",
        "match": {"method": "GET", "path": "/things/{id}"},
        "input_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
        "output_schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}},
        "mock": {
            "schema_version": 1,
            "default_variant": "found",
            "variants": {"found": {"result": {"status": 200, "data": {"id": {"$input": "id"}}}}},
            "examples": [{"variant": "found", "input": {"id": "7"}, "expected": {"status": 200, "data": {"id": "7"}}}]
        }
    })
}

fn finish(mut op: Value) -> Value {
    let h = contract_hash(
        understudy::contract::ProfileKind::Rest,
        op["operation_id"].as_str().unwrap_or(""),
        op.get("description").and_then(Value::as_str),
        op.get("input_schema").unwrap_or(&json!({})),
        op.get("output_schema").unwrap_or(&json!({})),
    );
    if op.get("mock").is_some() {
        op["mock"]["contract_hash"] = json!(h);
    }
    op
}

fn write(dir: &Path, file: &str, op: &Value) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, serde_json::to_string_pretty(op).unwrap()).unwrap();
    p
}

#[test]
fn check_accepts_the_example_project() {
    let r = understudy(
        &["check", "--config", example_config().to_str().unwrap()],
        None,
    );
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("ok (6 operations)"), "{}", r.stderr);
}

#[test]
fn check_json_format() {
    let r = understudy(
        &[
            "check",
            "--format",
            "json",
            "--config",
            example_config().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["operations"], 6);
    assert_eq!(v["problems"], json!([]));

    let dir = tempfile::tempdir().unwrap();
    let mut op = base_op();
    op["mock"]["variants"]["found"]["delay_ms"] = json!(40000);
    let file = write(dir.path(), "get_thing.json", &finish(op));
    let r = understudy(
        &["check", "--format", "json", dir.path().to_str().unwrap()],
        None,
    );
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["file"], json!(file.display().to_string()));
    assert_eq!(v["problems"][0]["path"], "mock/variants/found/delay_ms");
    assert!(v["problems"][0]["message"]
        .as_str()
        .unwrap()
        .contains("at most 30000"));
}

#[test]
fn check_without_project_file_or_paths_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = understudy(&["check"], Some(dir.path()));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = understudy(
        &["check", dir.path().join("missing.json").to_str().unwrap()],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = understudy(&["check", "--format", "yaml", "x"], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn check_reports_a_broken_project_file_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("understudy.json");
    std::fs::write(
        &cfg,
        r#"{"integrations": {"crm": {"profile": "salesforce", "operatoins": "mocks"}}}"#,
    )
    .unwrap();
    let r = understudy(&["check"], Some(dir.path()));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("understudy.json: integrations/crm/operatoins: unknown field `operatoins`"),
        "{}",
        r.stdout
    );
}

/// Each rejection of docs/src/reference/mock-definition.md#checks-and-limits, one fixture directory per case: exit 1 and a message naming the
/// file and the JSON path.
#[test]
fn check_rejects_each_broken_fixture() {
    type Case = (&'static str, fn(&Path), &'static str, &'static str);
    let cases: Vec<Case> = vec![
        (
            "unknown key",
            |d| {
                let mut op = base_op();
                op["mock"]["variants"]["found"]["resutl"] = json!(1);
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants/found/resutl:",
            "unknown field `resutl`",
        ),
        (
            "unknown top-level key",
            |d| {
                let mut op = base_op();
                op["descripton"] = json!("typo");
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: descripton:",
            "unknown field `descripton`",
        ),
        (
            "bad operation_id",
            |d| {
                let mut op = base_op();
                op["operation_id"] = json!("Get Thing!");
                write(d, "Get Thing!.json", &finish(op));
            },
            "Get Thing!.json: operation_id:",
            "is not a valid operation id",
        ),
        (
            "stem mismatch",
            |d| {
                write(d, "get_other.json", &finish(base_op()));
            },
            "get_other.json: operation_id:",
            "differs from the file name `get_other.json`",
        ),
        (
            "too many variants",
            |d| {
                let mut op = base_op();
                for i in 0..30 {
                    op["mock"]["variants"][format!("v{i}")] = json!({"result": {"status": 200}});
                    op["mock"]["examples"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"variant": format!("v{i}"), "input": {"id": "1"}, "expected": {"status": 200}}));
                }
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants:",
            "31 variants: at most 30",
        ),
        (
            "delay too big",
            |d| {
                let mut op = base_op();
                op["mock"]["variants"]["found"]["rules"] = json!([{"when": [{"source": "input", "path": "id", "op": "eq", "value": "9"}], "delay_ms": 30001}]);
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants/found/rules/0/delay_ms:",
            "30001: at most 30000",
        ),
        (
            "missing example",
            |d| {
                let mut op = base_op();
                op["mock"]["variants"]["gone"] = json!({"result": {"status": 404}});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants/gone:",
            "no example",
        ),
        (
            "example mismatch",
            |d| {
                let mut op = base_op();
                op["mock"]["examples"][0]["expected"]["data"]["id"] = json!("8");
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/examples/0/expected/data/id:",
            "the rendered result is \"7\" but expected says \"8\"",
        ),
        (
            "output schema violation",
            |d| {
                let mut op = base_op();
                op["output_schema"]["properties"]["data"] =
                    json!({"type": "object", "properties": {"id": {"type": "integer"}}});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/examples/0:",
            "does not match output_schema: at /data/id",
        ),
        (
            "example input invalid",
            |d| {
                let mut op = base_op();
                op["mock"]["examples"][0]["input"] = json!({"id": 7});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/examples/0/input:",
            "does not match input_schema: at /id",
        ),
        (
            "bad literal",
            |d| {
                let mut op = base_op();
                op["mock"]["variants"]["found"]["result"]["data"]["n"] = json!({"$number": "0x1A"});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants/found/result/data/n",
            "0x1A",
        ),
        (
            "malformed reference",
            |d| {
                let mut op = base_op();
                op["mock"]["variants"]["found"]["result"]["data"]["id"] = json!({"$input": "a..b"});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/variants/found/result/data/id",
            "",
        ),
        (
            "stale hash",
            |d| {
                let mut op = finish(base_op());
                op["description"] = json!("Get one thing, changed");
                write(d, "get_thing.json", &op);
            },
            "get_thing.json: mock/contract_hash:",
            "stale: the mock was checked against sha256:",
        ),
        (
            "non-envelope result",
            |d| {
                let mut op = base_op();
                op["output_schema"] = json!({});
                op["mock"]["variants"]["found"]["result"] =
                    json!({"Id": {"$input": "id"}, "Name": "Thing"});
                op["mock"]["examples"][0]["expected"] = json!({"Id": "7", "Name": "Thing"});
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: mock/examples/0:",
            "the rendered result has the member `Id`",
        ),
        (
            "initial_state conflict",
            |d| {
                let mut a = base_op();
                a["operation_id"] = json!("a_op");
                a["match"]["path"] = json!("/a/{id}");
                a["mock"]["initial_state"] = json!({"ref": "TEST-1"});
                write(d, "a_op.json", &finish(a));
                let mut b = base_op();
                b["operation_id"] = json!("b_op");
                b["match"]["path"] = json!("/b/{id}");
                b["mock"]["initial_state"] = json!({"ref": "TEST-2"});
                write(d, "b_op.json", &finish(b));
            },
            "b_op.json: mock/initial_state/ref:",
            "`ref` is \"TEST-2\" here but \"TEST-1\" in",
        ),
        (
            "template tie",
            |d| {
                write(d, "get_thing.json", &finish(base_op()));
                let mut b = base_op();
                b["operation_id"] = json!("get_thing_any");
                b["match"]["path"] = json!("/things/*");
                write(d, "get_thing_any.json", &finish(b));
            },
            "get_thing_any.json: match:",
            "ties with `get_thing`",
        ),
        (
            "match missing",
            |d| {
                let mut op = base_op();
                op.as_object_mut().unwrap().remove("match");
                write(d, "get_thing.json", &finish(op));
            },
            "get_thing.json: match:",
            "missing",
        ),
    ];
    for (name, setup, want_at, want_msg) in cases {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        let r = understudy(
            &["check", "--profile", "rest", dir.path().to_str().unwrap()],
            None,
        );
        assert_eq!(
            r.code, 1,
            "{name}: expected exit 1\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        );
        let line = r.stdout.lines().find(|l| l.contains(want_at));
        let line =
            line.unwrap_or_else(|| panic!("{name}: no line with `{want_at}` in\n{}", r.stdout));
        assert!(
            line.contains(want_msg),
            "{name}: `{want_msg}` not in `{line}`"
        );
        assert!(
            line.starts_with(&dir.path().display().to_string()),
            "{name}: {line}"
        );
    }
}

#[test]
fn exec_exit_codes() {
    let lookup = example_op("lookup_contact_by_phone");
    let ok = understudy(
        &[
            "exec",
            "--operation",
            &lookup,
            "--input",
            r#"{"phone": "+1 555 0100"}"#,
        ],
        None,
    );
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    let v: Value = serde_json::from_str(&ok.stdout).unwrap();
    assert_eq!(v["result"]["data"]["records"][0]["Phone"], "+1 555 0100");
    assert_eq!(v["variant"], "found");
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["error_kind"], Value::Null);
    for key in ["rule", "state_after", "delay_ms", "duration_ms"] {
        assert!(v.get(key).is_some(), "{key} missing in {v}");
    }
    assert_eq!(
        v["validation_results"],
        json!({"input_valid": true, "output_valid": true, "validation_errors": []})
    );

    // State sequence through --state and --variant.
    let r = understudy(
        &[
            "exec",
            "--operation",
            &lookup,
            "--variant",
            "not_found_then_found",
            "--input",
            r#"{"phone": "+1 555 0100"}"#,
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"]["data"]["totalSize"], 0);
    assert_eq!(v["state_after"]["lookup_missed"], true);
    let r = understudy(
        &[
            "exec",
            "--operation",
            &lookup,
            "--variant",
            "not_found_then_found",
            "--state",
            r#"{"lookup_missed": true}"#,
            "--input",
            r#"{"phone": "+1 555 0100"}"#,
        ],
        None,
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"]["data"]["totalSize"], 1);
    assert_eq!(v["rule"], 1);

    let input_error = understudy(
        &["exec", "--operation", &lookup, "--input", r#"{"phone": 5}"#],
        None,
    );
    assert_eq!(input_error.code, 3, "{}", input_error.stdout);
    let v: Value = serde_json::from_str(&input_error.stdout).unwrap();
    assert_eq!(v["error_kind"], "input_error");
    assert_eq!(v["validation_results"]["input_valid"], false);
    assert_eq!(v["error"]["path"], "phone");

    let harness = understudy(
        &[
            "exec",
            "--operation",
            &lookup,
            "--variant",
            "nope",
            "--input",
            r#"{"phone": "1234"}"#,
        ],
        None,
    );
    assert_eq!(harness.code, 4, "{}", harness.stdout);
    let v: Value = serde_json::from_str(&harness.stdout).unwrap();
    assert_eq!(v["error_kind"], "harness_error");
    assert_eq!(v["error"]["code"], "unknown_variant");

    let usage = understudy(
        &["exec", "--operation", &lookup, "--input", "{not json"],
        None,
    );
    assert_eq!(usage.code, 2);
    assert!(
        usage.stderr.contains("--input: not valid JSON"),
        "{}",
        usage.stderr
    );
    let usage = understudy(&["exec", "--operation", &lookup], None);
    assert_eq!(usage.code, 2);
    let usage = understudy(
        &[
            "exec",
            "--operation",
            "/nonexistent/op.json",
            "--input",
            "{}",
        ],
        None,
    );
    assert_eq!(usage.code, 2);
}

#[test]
fn exec_reports_stale_and_output_violations_as_harness_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = finish(base_op());
    op["description"] = json!("changed");
    let f = write(dir.path(), "get_thing.json", &op);
    let r = understudy(
        &[
            "exec",
            "--operation",
            f.to_str().unwrap(),
            "--input",
            r#"{"id": "1"}"#,
        ],
        None,
    );
    assert_eq!(r.code, 4, "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["error"]["code"], "stale_contract");

    let mut op = base_op();
    op["output_schema"]["properties"]["data"] =
        json!({"type": "object", "properties": {"id": {"type": "integer"}}});
    let f = write(dir.path(), "get_thing.json", &finish(op));
    let r = understudy(
        &[
            "exec",
            "--operation",
            f.to_str().unwrap(),
            "--input",
            r#"{"id": "1"}"#,
        ],
        None,
    );
    assert_eq!(r.code, 4, "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["error"]["code"], "output_schema_violation");
    assert_eq!(v["validation_results"]["output_valid"], false);
    assert!(v["validation_results"]["validation_errors"][0]
        .as_str()
        .unwrap()
        .contains("/data/id"));
}

#[test]
fn generate_supported_and_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = base_op();
    op.as_object_mut().unwrap().remove("mock");
    op["output_schema"] = json!({"type": "object", "required": ["status", "data"], "properties": {
        "status": {"type": "integer"},
        "data": {"type": "object", "required": ["id", "created"], "properties": {
            "id": {"type": "string", "format": "uuid"}, "created": {"type": "string", "format": "date-time"}}}}});
    let f = write(dir.path(), "get_thing.json", &op);
    let r = understudy(&["generate", "--operation", f.to_str().unwrap()], None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["supported"], true);
    let def = &v["definition"];
    assert_eq!(def["default_variant"], "default");
    assert_eq!(def["examples"][0]["expected"]["status"], 200);
    // The draft, pasted into the file, passes check.
    op["mock"] = def.clone();
    write(dir.path(), "get_thing.json", &op);
    let r = understudy(&["check", f.to_str().unwrap()], None);
    assert_eq!(r.code, 0, "{}", r.stdout);

    // A `pattern` is satisfied: the generated input matches it.
    op.as_object_mut().unwrap().remove("mock");
    op["input_schema"]["properties"]["id"]["pattern"] = json!("^[0-9]+$");
    write(dir.path(), "get_thing.json", &op);
    let r = understudy(&["generate", "--operation", f.to_str().unwrap()], None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let id = v["definition"]["examples"][0]["input"]["id"]
        .as_str()
        .unwrap();
    assert!(
        !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()),
        "{id}"
    );

    // A `pattern` no string within the length bounds matches: unsupported, with the reason.
    op["input_schema"]["properties"]["id"]["maxLength"] = json!(0);
    write(dir.path(), "get_thing.json", &op);
    let r = understudy(&["generate", "--operation", f.to_str().unwrap()], None);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["supported"], false);
    assert_eq!(v["definition"], Value::Null);
    assert!(
        v["reasons"][0]
            .as_str()
            .unwrap()
            .contains("input_schema/properties/id/pattern: `pattern` `^[0-9]+$` together with minLength 0 / maxLength 0: no string found"),
        "{v}"
    );
}

#[test]
fn help_and_unknown_subcommands() {
    let r = understudy(&["--help"], None);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("check"));
    let r = understudy(&["frobnicate"], None);
    assert_eq!(r.code, 2);
}

/// The worked example of the mock definition reference (docs/src/reference/mock-definition.md)
/// is a real operation file: it passes `check` and `exec` gives the answer the page
/// describes. Guards the book against drifting from the engine.
#[test]
fn readme_worked_example_passes_check_and_answers_as_described() {
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/mock-definition.md"),
    )
    .expect("read docs/src/reference/mock-definition.md");
    let start = readme
        .find("```json\n{\n  \"operation_id\": \"book_appointment\"")
        .expect("the worked example in docs/src/reference/mock-definition.md")
        + "```json\n".len();
    let len = readme[start..]
        .find("\n```")
        .expect("end of the worked example");
    let op: Value = serde_json::from_str(&readme[start..start + len]).expect("example is JSON");

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("mocks/crm")).unwrap();
    let file = dir.path().join("mocks/crm/book_appointment.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&op).unwrap()).unwrap();
    std::fs::write(
        dir.path().join("understudy.json"),
        r#"{"integrations":{"crm":{"profile":"salesforce","operations":"mocks/crm"}}}"#,
    )
    .unwrap();
    let config = dir.path().join("understudy.json");
    let run = understudy(&["check", "--config", config.to_str().unwrap()], None);
    assert_eq!(
        run.code, 0,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );

    let input = r#"{"Requested_Date__c":"2026-12-01"}"#;
    let run = understudy(
        &[
            "exec",
            "--operation",
            file.to_str().unwrap(),
            "--input",
            input,
        ],
        None,
    );
    assert_eq!(
        run.code, 0,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(out["result"]["status"], 201);
    assert_eq!(
        out["result"]["data"]["Slot_Start__c"],
        "2026-12-03T09:00:00Z"
    );
    assert_eq!(out["state_after"]["booked"], true);

    let state = r#"{"reference":"HP-APT-0742","booked":true}"#;
    let run = understudy(
        &[
            "exec",
            "--operation",
            file.to_str().unwrap(),
            "--input",
            input,
            "--state",
            state,
        ],
        None,
    );
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(out["result"]["status"], 400, "{out}");
    assert_eq!(out["rule"], 0);
}
