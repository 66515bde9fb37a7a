//! MCP over stdio (docs/src/guides/mcp-stdio.md): `understudy mcp stdio` driven by the
//! official SDKs' stdio clients — the MCP Python SDK's `stdio_client` (both eras, standalone
//! and inside `understudy test`, where the SDK's cleaned environment leaves the stdio server
//! only the data dir to find the test's attempt), the TypeScript SDK's `StdioClientTransport`
//! and rmcp's child-process transport — and raw lines for what no SDK sends (malformed and
//! oversize lines, `RUST_LOG=trace` with stdout parsed line by line).
//!
//! The clients must be installed (`.ci/run` installs them: `pip install mcp==2.3.0`, and
//! `npm ci` of tests/mcp-stdio/ into target/mcp-stdio/); outside CI a missing client skips its
//! test with a note, in CI (`CI=true`) it fails.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{self, Project};

const BIN: &str = env!("CARGO_BIN_EXE_understudy");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// tests/mcp-stdio/ installed with `npm ci` into target/mcp-stdio/ (once).
pub fn node_modules() -> Option<PathBuf> {
    let dir = root().join("target/mcp-stdio");
    let marker = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    if !marker.exists() {
        let _ = std::fs::create_dir_all(&dir);
        for f in ["package.json", "package-lock.json"] {
            let _ = std::fs::copy(root().join("tests/mcp-stdio").join(f), dir.join(f));
        }
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok || !marker.exists() {
            assert!(!support::in_ci(), "npm ci of tests/mcp-stdio/ failed");
            eprintln!("note: npm ci of tests/mcp-stdio/ failed; skipping");
            return None;
        }
    }
    Some(dir.join("node_modules"))
}

fn create_ticket() -> Value {
    json!({
        "operation_id": "create_ticket",
        "description": "Open a support ticket",
        "input_schema": { "type": "object", "required": ["subject"],
                          "properties": { "subject": { "type": "string", "minLength": 3 } } },
        "output_schema": { "type": "object", "required": ["ticket_id"],
                           "properties": { "ticket_id": { "type": "string" }, "subject": { "type": "string" } } },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "variants": { "ok": {
                "result": { "ticket_id": "T-100", "subject": { "$input": "subject" } },
                "set_state": { "last_subject": { "$input": "subject" } }
            } },
            "examples": [ { "variant": "ok", "input": { "subject": "Printer on fire" },
                            "expected": { "ticket_id": "T-100", "subject": "Printer on fire" } } ]
        }
    })
}

fn last_ticket() -> Value {
    json!({
        "operation_id": "last_ticket",
        "description": "The subject of the last ticket opened",
        "annotations": { "readOnlyHint": true },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["last"] },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "initial_state": { "last_subject": "none" },
            "variants": { "ok": { "result": { "last": { "$state": "last_subject" } } } },
            "examples": [ { "variant": "ok", "input": {}, "expected": { "last": "none" } } ]
        }
    })
}

/// `tools` (mcp): a state-changing tool and a read of that state.
pub fn project() -> Project {
    let p = Project::new(&[("tools", "mcp")]);
    p.op("tools", create_ticket()).op("tools", last_ticket());
    p
}

fn stdio_args(p: &Project) -> Vec<String> {
    vec![
        "mcp".into(),
        "stdio".into(),
        "--integration".into(),
        "tools".into(),
        "--config".into(),
        p.config_path().display().to_string(),
    ]
}

fn ticket_calls(subject: &str) -> Value {
    json!([
        { "name": "create_ticket", "arguments": { "subject": subject } },
        { "name": "last_ticket", "arguments": {} }
    ])
}

/// Run the Python SDK client with `plan`; (its JSON output, its stderr).
fn python_client(plan: &Value) -> (Value, String) {
    let out = Command::new("python3")
        .arg(root().join("tests/mcp-stdio/python_client.py"))
        .arg(plan.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "python client failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {:?}", out.stdout));
    (v, stderr)
}

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// The tool calls (operation id, arguments) of an attempt's evidence.
fn calls_of(evidence: &Value) -> Vec<(String, Value)> {
    evidence["tool_events"]
        .as_array()
        .unwrap_or_else(|| panic!("evidence without tool events: {evidence}"))
        .iter()
        .map(|c| {
            (
                c["operation_id"].as_str().unwrap_or("").to_string(),
                c["arguments"].clone(),
            )
        })
        .collect()
}

#[test]
fn python_sdk_stdio_client_in_both_eras_standalone_with_state_and_evidence() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = project();
    for (era, version, subject) in [
        ("legacy", "2025-11-25", "Printer on fire"),
        ("modern", "2026-07-28", "Coffee machine down"),
    ] {
        let plan = json!({ "command": BIN, "args": stdio_args(&p), "era": era,
                           "calls": ticket_calls(subject) });
        let (out, stderr) = python_client(&plan);
        assert_eq!(out["version"], version, "{out}");
        assert_eq!(out["tools"], json!(["create_ticket", "last_ticket"]));
        let results = out["results"].as_array().unwrap();
        assert_eq!(
            structured(&results[0]),
            &json!({"ticket_id": "T-100", "subject": subject})
        );
        // The state the first call set is what the second reads: one attempt, one session.
        assert_eq!(
            structured(&results[1]),
            &json!({ "last": subject }),
            "{out}"
        );
        // The attempt chosen is named on stderr (never the token), and its evidence holds the
        // calls exactly as over HTTP.
        let id = stderr
            .split("the default attempt ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no attempt named on stderr: {stderr}"));
        assert!(stderr.contains("from the project's store"), "{stderr}");
        let ev = Command::new(BIN)
            .args(["evidence", id, "--config"])
            .arg(p.config_path())
            .output()
            .unwrap();
        let evidence: Value = serde_json::from_slice(&ev.stdout)
            .unwrap_or_else(|_| panic!("evidence: {}", String::from_utf8_lossy(&ev.stderr)));
        let calls = calls_of(&evidence);
        assert_eq!(
            calls,
            vec![
                ("create_ticket".to_string(), json!({ "subject": subject })),
                ("last_ticket".to_string(), json!({})),
            ],
            "{evidence}"
        );
        let first = &evidence["tool_events"][0];
        assert_eq!(first["integration"], "tools");
        assert_eq!(first["is_write"], true);
        assert_eq!(evidence["tool_events"][1]["is_write"], false);
        assert_eq!(evidence["final_state"]["tools"]["last_subject"], subject);
    }
}

#[test]
fn understudy_test_catches_the_stdio_server_its_agent_starts_with_a_cleaned_environment() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = project();
    let report = p.path().join("report");
    // The agent: the Python SDK starting `understudy mcp stdio` with its default (cleaned)
    // environment — no UNDERSTUDY_ATTEMPT, no UNDERSTUDY_URL reach the stdio server.
    let plan = json!({ "command": BIN, "args": stdio_args(&p), "era": "legacy",
                       "calls": ticket_calls("Sink leaking") });
    let out = Command::new(BIN)
        .args(["test", "--log-stderr", "--config"])
        .arg(p.config_path())
        .arg("--report-dir")
        .arg(&report)
        .arg("--")
        .arg("python3")
        .arg(root().join("tests/mcp-stdio/python_client.py"))
        .arg(plan.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the running understudy test's attempt"),
        "the stdio server did not find the test's attempt: {stderr}"
    );
    let evidence: Value =
        serde_json::from_slice(&std::fs::read(report.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(
        calls_of(&evidence),
        vec![
            (
                "create_ticket".to_string(),
                json!({ "subject": "Sink leaking" })
            ),
            ("last_ticket".to_string(), json!({})),
        ],
        "{evidence}"
    );
    assert_eq!(evidence["verdict"], "pass", "{evidence}");
    // The published address is gone with the server.
    assert!(!p.data_dir().join("server.json").exists());
}

/// Spawn `understudy mcp stdio` with `RUST_LOG=trace`, write `first`, read stdout until the
/// answer with id `wait_for`, write `then`, close stdin; (stdout lines, stderr, exit code).
fn raw_session(
    p: &Project,
    first: &[u8],
    wait_for: i64,
    then: &[u8],
) -> (Vec<String>, String, Option<i32>) {
    use std::io::BufRead;
    let mut child = Command::new(BIN)
        .args(stdio_args(p))
        .env("RUST_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (first, then) = (first.to_vec(), then.to_vec());
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&first);
        let _ = stdin.flush();
        let _ = go_rx.recv();
        let _ = stdin.write_all(&then);
    });
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    let mut go = Some(go_tx);
    for l in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let l = l.unwrap();
        if serde_json::from_str::<Value>(&l).is_ok_and(|v| v["id"] == wait_for) {
            go.take();
        }
        lines.push(l);
    }
    drop(go);
    writer.join().unwrap();
    let status = child.wait().unwrap();
    (lines, err.join().unwrap(), status.code())
}

fn line(v: Value) -> Vec<u8> {
    let mut l = v.to_string().into_bytes();
    l.push(b'\n');
    l
}

#[test]
fn malformed_and_oversize_lines_are_parse_errors_and_stdout_carries_only_messages() {
    let p = project();
    let mut input = Vec::new();
    input.extend(line(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})));
    input.extend(line(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ));
    input.extend(b"this is not json\n");
    // Over the 10 MiB body limit, in one line.
    let mut big = b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{\"name\":\"create_ticket\",\"arguments\":{\"subject\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'a', 10 * 1024 * 1024 + 10));
    big.extend(b"\"}}}\n");
    input.extend(big);
    input.extend(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \n");
    input.extend(line(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "create_ticket", "arguments": {"subject": "After the garbage"}}}),
    ));
    // Requests run concurrently: the read of the state waits for the write's answer.
    let then = line(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "last_ticket", "arguments": {}}}));
    let (lines, stderr, code) = raw_session(&p, &input, 3, &then);
    assert_eq!(code, Some(0), "{stderr}");
    // Logging was on (trace), and none of it reached stdout: every line is JSON-RPC.
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "no log on stderr"
    );
    let msgs: Vec<Value> = lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"));
            assert_eq!(v["jsonrpc"], "2.0", "not a JSON-RPC message: {l}");
            v
        })
        .collect();
    let parse_errors: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["error"]["code"] == -32700)
        .collect();
    assert_eq!(parse_errors.len(), 3, "{msgs:?}");
    assert!(parse_errors.iter().all(|e| e["id"].is_null()));
    assert!(parse_errors.iter().any(|e| e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("10485760 bytes")));
    // The oversize call never ran; the session went on.
    assert!(!msgs.iter().any(|m| m["id"] == 99));
    let by_id = |id: i64| msgs.iter().find(|m| m["id"] == id).cloned().unwrap();
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        by_id(3)["result"]["structuredContent"]["subject"],
        "After the garbage"
    );
    assert_eq!(
        by_id(4)["result"]["structuredContent"]["last"],
        "After the garbage"
    );
}

/// The stdin fuzz property end to end, on the real command (the fuzz target
/// `fuzz/fuzz_targets/stdio_lines.rs` covers the framing with libFuzzer; this runs a seeded
/// corpus through the whole front): requests (some ended by CRLF), notifications, blank
/// lines, garbage bytes (invalid UTF-8 too), messages cut short and one line over the limit,
/// mixed at random. Every line that is not JSON gets exactly one parse error, every request
/// exactly one answer with its id, a notification or a blank line nothing, and stdout carries
/// nothing else.
#[test]
fn every_line_of_a_generated_stdin_gets_a_parse_error_or_its_answer_and_nothing_else() {
    use std::collections::BTreeMap;
    use std::io::BufRead;
    let p = project();
    let mut seed: u64 = 0x5851_f42d_4c95_7f2d;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut input = line(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gen", "version": "1"}}}),
    );
    input.extend(line(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ));
    // id → what its answer must be: a result, or the JSON-RPC error code.
    let mut expected: BTreeMap<String, Option<i64>> = BTreeMap::new();
    let mut malformed = 0;
    let garbage: &[u8] = b"{}[]\":,\\ a1\r\t\xff\xc3\x80";
    for i in 0..300 {
        match next() % 8 {
            0 | 1 => {
                let id = format!("r{i}");
                let l = line(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "last_ticket", "arguments": {}}}));
                if next() % 3 == 0 {
                    input.extend(&l[..l.len() - 1]);
                    input.extend(b"\r\n");
                } else {
                    input.extend(l);
                }
                expected.insert(id, None);
            }
            2 => {
                let id = format!("m{i}");
                input.extend(line(
                    json!({"jsonrpc": "2.0", "id": id, "method": "no/such/method"}),
                ));
                expected.insert(id, Some(-32601));
            }
            3 => input.extend(line(
                json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
            )),
            4 => input.extend(if next() % 2 == 0 {
                &b"\n"[..]
            } else {
                b" \t \n"
            }),
            5 => {
                // A request cut short: a strict prefix of a JSON object is never JSON.
                let l = line(
                    json!({"jsonrpc": "2.0", "id": format!("cut{i}"), "method": "tools/call",
                    "params": {"name": "last_ticket", "arguments": {}}}),
                );
                let n = 1 + (next() as usize) % (l.len() - 2);
                input.extend(&l[..n]);
                input.push(b'\n');
                malformed += 1;
            }
            _ => {
                // Garbage that starts with a letter no JSON value starts with.
                input.push(b'x');
                for _ in 0..next() % 40 {
                    input.push(garbage[(next() as usize) % garbage.len()]);
                }
                input.push(b'\n');
                malformed += 1;
            }
        }
        if i == 150 {
            input.extend(std::iter::repeat_n(b'{', 10 * 1024 * 1024 + 1));
            input.push(b'\n');
            malformed += 1;
        }
    }
    let requests = expected.len();
    assert!(
        requests > 50 && malformed > 50,
        "{requests} requests, {malformed} malformed"
    );
    let mut child = Command::new(BIN)
        .args(stdio_args(&p))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        let _ = stdin.flush();
        // stdin stays open until every answer came (or a minute passed): requests still
        // running at EOF get only a short grace.
        let _ = done_rx.recv_timeout(std::time::Duration::from_secs(60));
    });
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut answers: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut parse_errors = 0;
    let mut done = Some(done_tx);
    for l in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let l = l.unwrap();
        let v: Value =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("stdout line not JSON ({e}): {l}"));
        assert_eq!(v["jsonrpc"], "2.0", "{l}");
        if v["error"]["code"] == -32700 {
            assert!(v["id"].is_null(), "{l}");
            parse_errors += 1;
        } else if v["id"] == 0 {
            assert_eq!(v["result"]["protocolVersion"], "2025-06-18", "{l}");
        } else {
            let id = v["id"]
                .as_str()
                .unwrap_or_else(|| panic!("an answer to no request: {l}"));
            answers.entry(id.to_string()).or_default().push(v.clone());
        }
        if parse_errors == malformed && answers.len() == requests {
            done.take();
        }
    }
    drop(done);
    writer.join().unwrap();
    let status = child.wait().unwrap();
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        parse_errors, malformed,
        "one parse error per malformed line"
    );
    assert_eq!(
        answers.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "every request answered, nothing else"
    );
    for (id, got) in &answers {
        assert_eq!(got.len(), 1, "{id} answered {} times: {got:?}", got.len());
        match expected[id] {
            None => assert_eq!(
                got[0]["result"]["structuredContent"]["last"], "none",
                "{id}: {:?}",
                got[0]
            ),
            Some(code) => assert_eq!(got[0]["error"]["code"], code, "{id}: {:?}", got[0]),
        }
    }
}

#[test]
fn mcp_config_prints_each_clients_snippet() {
    let p = project();
    for (client, pointer) in [
        ("claude", "/mcpServers/tools"),
        ("cursor", "/mcpServers/tools"),
        ("vscode", "/servers/tools"),
        ("json", ""),
    ] {
        let out = Command::new(BIN)
            .args([
                "mcp",
                "config",
                "--integration",
                "tools",
                "--client",
                client,
                "--config",
            ])
            .arg(p.config_path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let server = v
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{client}: {v}"));
        assert_eq!(server["args"][0], "mcp");
        assert_eq!(server["args"][5], p.config_path().display().to_string());
        assert!(Path::new(server["command"].as_str().unwrap()).is_absolute());
    }
    // Not an mcp integration, or none: a usage error naming it.
    let out = Command::new(BIN)
        .args(["mcp", "config", "--integration", "nope", "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

/// The processes of process group `pgid` still alive (zombies included).
fn group_members(pgid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …: comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            out.push(stat);
        }
    }
    out
}

fn process_group_of(stderr: &str) -> u32 {
    stderr
        .split("(process group ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no process group on stderr: {stderr}"))
}

#[test]
fn wrap_dry_run_never_lets_a_write_reach_server_memory_started_through_npx() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let Some(modules) = node_modules() else {
        return;
    };
    let p = Project::new(&[("memory", "mcp")]);
    let memory_file = p.path().join("memory.jsonl");
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "memory", "--mode", "dry-run",
                 "--config", p.config_path(), "--", "npx", "--no-install", "mcp-server-memory"],
        "cwd": modules.parent().unwrap(),
        "env": { "MEMORY_FILE_PATH": memory_file },
        "era": "legacy",
        "calls": [
            { "name": "read_graph", "arguments": {} },
            { "name": "create_entities", "arguments": { "entities": [
                { "name": "Ada", "entityType": "person", "observations": ["wrote the first program"] } ] } },
            { "name": "add_observations", "arguments": { "observations": [
                { "entityName": "Ada", "contents": ["again"] } ] } },
            { "name": "read_graph", "arguments": {} }
        ]
    });
    let (out, stderr) = python_client(&plan);
    let results = out["results"].as_array().unwrap();
    assert!(out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "create_entities"));
    // The read reached the real server (its empty graph), the writes did not.
    assert_eq!(results[0]["isError"], false, "{out}");
    assert_eq!(
        results[0]["structuredContent"]["entities"],
        json!([]),
        "{out}"
    );
    for w in [&results[1], &results[2]] {
        assert_eq!(w["isError"], true, "{out}");
        assert!(
            w["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("blocked"),
            "{w}"
        );
    }
    assert_eq!(
        results[3]["structuredContent"]["entities"],
        json!([]),
        "{out}"
    );
    assert!(
        !memory_file.exists(),
        "the wrapped server wrote its memory file: {:?}",
        std::fs::read_to_string(&memory_file)
    );
    // npx and the node server it started (a grandchild) are gone with the session.
    let pgid = process_group_of(&stderr);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !group_members(pgid).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(group_members(pgid), Vec::<String>::new());
    // The control: the same write with writes allowed (record) does reach the file, so the
    // dry-run's absent file is the policy, not a path the server ignores.
    let mut plan = plan;
    plan["args"] = json!([
        "mcp",
        "wrap",
        "--integration",
        "memory",
        "--mode",
        "record",
        "--allow-writes",
        "--out",
        p.path().join("drafts"),
        "--config",
        p.config_path(),
        "--",
        "npx",
        "--no-install",
        "mcp-server-memory"
    ]);
    plan["calls"] = json!([plan["calls"][1].clone()]);
    let (out, _) = python_client(&plan);
    assert_eq!(out["results"][0]["isError"], false, "{out}");
    assert!(std::fs::read_to_string(&memory_file)
        .unwrap()
        .contains("Ada"));
}

#[test]
fn wrap_records_server_everything_through_sh_and_the_drafts_replay_through_mcp_stdio() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let Some(modules) = node_modules() else {
        return;
    };
    let p = Project::new(&[("everything", "mcp")]);
    let out_dir = p.path().join("drafts");
    let server = modules.join(".bin/mcp-server-everything");
    let calls = json!([
        { "name": "echo", "arguments": { "message": "hello over stdio" } },
        { "name": "get-sum", "arguments": { "a": 2, "b": 40 } }
    ]);
    // `sh -c` without exec: the server is a grandchild of understudy.
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "everything", "--mode", "record",
                 "--out", out_dir, "--config", p.config_path(), "--",
                 "sh", "-c", format!("{} stdio", server.display())],
        "era": "legacy",
        "calls": calls
    });
    let (recorded, stderr) = python_client(&plan);
    let pgid = process_group_of(&stderr);
    let rec = recorded["results"].as_array().unwrap();
    assert!(
        rec[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello over stdio"),
        "{recorded}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !group_members(pgid).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(group_members(pgid), Vec::<String>::new());
    // The drafts: one per tool called, and they pass `check`.
    let drafts = out_dir.join("everything");
    let mut names: Vec<String> = std::fs::read_dir(&drafts)
        .unwrap_or_else(|e| panic!("no drafts in {}: {e} ({stderr})", drafts.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(
        names.contains(&"echo.json".to_string()) && names.contains(&"get-sum.json".to_string()),
        "{names:?}"
    );
    let replay = p.path().join("replay.json");
    std::fs::write(
        &replay,
        json!({ "data_dir": "replay-data", "integrations": {
            "everything": { "profile": "mcp", "operations": drafts } } })
        .to_string(),
    )
    .unwrap();
    let check = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&replay)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "check: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    // Replayed through `mcp stdio`: the same answers, no child anywhere.
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "stdio", "--integration", "everything", "--config", replay],
        "era": "legacy",
        "calls": calls
    });
    let (replayed, _) = python_client(&plan);
    let rep = replayed["results"].as_array().unwrap();
    for (r, p) in rec.iter().zip(rep) {
        assert_eq!(r["content"], p["content"], "recorded {r} replayed {p}");
        assert_eq!(r.get("isError"), p.get("isError"));
    }
}

#[test]
fn typescript_sdk_stdio_client_transport() {
    let Some(modules) = node_modules() else {
        return;
    };
    let dir = modules.parent().unwrap();
    std::fs::copy(
        root().join("tests/mcp-stdio/ts_client.mjs"),
        dir.join("ts_client.mjs"),
    )
    .unwrap();
    let p = project();
    let plan =
        json!({ "command": BIN, "args": stdio_args(&p), "calls": ticket_calls("Fax jammed") });
    let out = Command::new("node")
        .arg(dir.join("ts_client.mjs"))
        .arg(plan.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"], json!(["create_ticket", "last_ticket"]));
    assert_eq!(v["server"]["name"], "understudy-tools", "{v}");
    assert_eq!(
        v["results"][0]["structuredContent"],
        json!({"ticket_id": "T-100", "subject": "Fax jammed"})
    );
    assert_eq!(
        v["results"][1]["structuredContent"],
        json!({"last": "Fax jammed"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_child_process_transport_in_both_eras() {
    use rmcp::model::{CallToolRequestParams, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;

    let p = project();
    for modern in [false, true] {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(stdio_args(&p));
        let transport = TokioChildProcess::new(cmd).unwrap();
        let client = if modern {
            ().serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("discover over stdio")
        } else {
            ().serve(transport).await.expect("initialize over stdio")
        };
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(names, ["create_ticket", "last_ticket"]);
        let subject = if modern { "Modern era" } else { "Session era" };
        let args = json!({ "subject": subject });
        let r = client
            .call_tool(
                CallToolRequestParams::new("create_ticket")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap()["structuredContent"]["subject"],
            subject
        );
        let r = client
            .call_tool(CallToolRequestParams::new("last_ticket"))
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap()["structuredContent"]["last"],
            subject,
            "modern={modern}"
        );
        client.cancel().await.unwrap();
    }
}

/// `mcp wrap` around tests/mcp-stdio/child_server.py (a real stdio server process): the
/// child's own HTTPS call goes through understudy's forward proxy with the project's CA and
/// lands in the same attempt as the MCP calls (two layers of evidence), and what the child
/// sends outside any request — a log message, a list change, a `roots/list` request of its own
/// — reaches the SDK client, whose answer reaches the child.
#[test]
fn wrap_gives_the_child_the_proxy_and_ca_and_relays_what_it_sends_outside_any_request() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = Project::new(&[("child", "mcp"), ("weather", "rest")]);
    p.write_config(json!({ "integrations": {
        "child": { "profile": "mcp", "operations": "mocks/child" },
        "weather": { "profile": "rest", "operations": "mocks/weather",
                     "upstream": "https://api.weather.test" } } }));
    p.op(
        "weather",
        crate::support::rest_op(
            "get_weather",
            "GET",
            "/weather/{city}",
            Some(json!({
                "schema_version": 1,
                "default_variant": "ok",
                "variants": { "ok": { "result": { "status": 200,
                    "data": { "city": { "$input": "city" }, "sky": "clear" } } } },
                "examples": [ { "variant": "ok", "input": { "city": "Oslo" },
                                "expected": { "status": 200, "data": { "city": "Oslo", "sky": "clear" } } } ]
            })),
        ),
    );
    let ca = Command::new(BIN)
        .args(["ca", "init", "--dir"])
        .arg(p.path().join("certs"))
        .output()
        .unwrap();
    assert!(
        ca.status.success(),
        "{}",
        String::from_utf8_lossy(&ca.stderr)
    );
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "child", "--mode", "dry-run",
                 "--config", p.config_path(), "--",
                 "python3", root().join("tests/mcp-stdio/child_server.py")],
        "era": "legacy",
        "roots": [ { "uri": "file:///work/project", "name": "project" } ],
        "pause": 1.5,
        "calls": [
            { "name": "weather", "arguments": { "city": "Oslo" } },
            { "name": "seen", "arguments": {} }
        ]
    });
    let (out, stderr) = python_client(&plan);
    let results = out["results"].as_array().unwrap();
    // The child's HTTPS call was intercepted with the project's CA and answered by the mock.
    assert_eq!(results[0]["isError"], false, "{out}\n{stderr}");
    assert_eq!(
        results[0]["structuredContent"],
        json!({ "status": 200, "body": { "city": "Oslo", "sky": "clear" } }),
        "{out}"
    );
    let seen = &results[1]["structuredContent"];
    let proxy = seen["env"]["HTTPS_PROXY"].as_str().unwrap_or("");
    assert!(proxy.starts_with("http://127.0.0.1:"), "{seen}");
    assert!(
        stderr.contains(&format!("forward proxy {proxy}")),
        "{stderr}"
    );
    assert_eq!(seen["env"]["NO_PROXY"], "127.0.0.1,localhost,::1");
    let cert = p.path().join("certs").join("understudy-ca.pem");
    assert_eq!(seen["env"]["SSL_CERT_FILE"], cert.display().to_string());
    assert_eq!(
        seen["env"]["NODE_EXTRA_CA_CERTS"],
        cert.display().to_string()
    );
    // Outside any request: the log message and the list change reached the client, and the
    // child's own `roots/list` was answered by the client — the answer reached the child.
    assert!(
        out["logs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["data"] == "outside any request"),
        "{out}"
    );
    assert!(
        out["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "notifications/tools/list_changed"),
        "{out}"
    );
    assert_eq!(out["roots_asked"], 1, "{out}");
    assert_eq!(
        seen["roots_answer"],
        json!({ "roots": [ { "uri": "file:///work/project", "name": "project" } ] }),
        "{seen}"
    );
    // Two layers of evidence in the one attempt: the MCP calls forwarded to the child, and the
    // child's own HTTPS call answered by the `weather` mock.
    let id = stderr
        .split("the default attempt ")
        .nth(1)
        .and_then(|r| r.split(|c: char| c == ';' || c.is_whitespace()).next())
        .unwrap_or_else(|| panic!("no attempt on stderr: {stderr}"));
    let ev = Command::new(BIN)
        .args(["evidence", id, "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    let evidence: Value = serde_json::from_slice(&ev.stdout)
        .unwrap_or_else(|_| panic!("evidence: {}", String::from_utf8_lossy(&ev.stderr)));
    let layers: Vec<(String, String, String)> = evidence["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["integration"].as_str().unwrap_or("").to_string(),
                e["operation_id"].as_str().unwrap_or("").to_string(),
                e["source"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let pos = |i: &str, o: &str| layers.iter().position(|(a, b, _)| a == i && b == o);
    let (Some(mcp), Some(http)) = (pos("child", "weather"), pos("weather", "get_weather")) else {
        panic!("both layers expected in the attempt: {layers:?}");
    };
    // The child's call happened while the agent's call was in flight: it is committed first.
    assert!(http < mcp, "{layers:?}");
    assert_eq!(layers[http].2, "mock", "{layers:?}");
    assert_eq!(evidence["tool_events"][http]["arguments"]["city"], "Oslo");
}

fn child_server() -> PathBuf {
    root().join("tests/mcp-stdio/child_server.py")
}

/// Recording a wrapped server, its own messages are drafted where an operation file can hold
/// them: a log it sends during a call becomes that tool's `log` declaration (and replay sends
/// it again); what it sends outside any request (a log, a list change) reaches the agent but
/// belongs to no call, so the drafts' notes name each such method instead.
#[test]
fn wrap_records_the_childs_log_during_a_call_and_notes_what_it_sent_outside_any_request() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = Project::new(&[("child", "mcp")]);
    let drafts = p.path().join("drafts");
    let calls = json!([ { "name": "noisy", "arguments": { "task": "sorting" } } ]);
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "child", "--mode", "record", "--out", drafts,
                 "--config", p.config_path(), "--", "python3", child_server()],
        "era": "legacy",
        "roots": [],
        "pause": 1.5,
        "calls": calls
    });
    let (out, stderr) = python_client(&plan);
    let logs = out["logs"].to_string();
    assert!(logs.contains("working on sorting"), "{out}\n{stderr}");
    assert!(logs.contains("outside any request"), "{out}");
    assert_eq!(
        structured(&out["results"][0]),
        &json!({ "done": "sorting" }),
        "{out}"
    );
    let dir = drafts.join("child");
    let noisy: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("noisy.json"))
            .unwrap_or_else(|e| panic!("no noisy draft ({e}): {stderr}")),
    )
    .unwrap();
    let declared = &noisy["mock"]["variants"]["ok"]["notifications"];
    assert_eq!(declared.as_array().map(Vec::len), Some(1), "{noisy}");
    assert_eq!(declared[0]["log"]["data"], "working on sorting", "{noisy}");
    assert_eq!(declared[0]["log"]["level"], "info", "{noisy}");
    let notes = std::fs::read_to_string(dir.join("record-notes.txt")).unwrap_or_default();
    for method in ["notifications/message", "notifications/tools/list_changed"] {
        assert!(
            notes.contains(&format!(
                "`{method}` sent by the server outside any tool call"
            )),
            "{method} not noted: {notes}"
        );
    }
    // The draft replays through `mcp stdio`: the same result, and the log again.
    let replay = p.path().join("replay.json");
    std::fs::write(
        &replay,
        json!({ "data_dir": "replay-data", "integrations": {
            "child": { "profile": "mcp", "operations": dir } } })
        .to_string(),
    )
    .unwrap();
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "stdio", "--integration", "child", "--config", replay],
        "era": "legacy",
        "calls": calls
    });
    let (replayed, _) = python_client(&plan);
    assert_eq!(
        structured(&replayed["results"][0]),
        &json!({ "done": "sorting" }),
        "{replayed}"
    );
    assert!(
        replayed["logs"].to_string().contains("working on sorting"),
        "{replayed}"
    );
}

/// `mcp wrap` joined to a running server (`--url`, `--attempt`): no store of its own, the
/// calls land in that server's attempt and that server's mode (dry-run) decides — a read
/// reaches the child, a write never does — while the child is still the wrapped server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrap_joins_a_running_servers_attempt_and_mode() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = Project::new(&[("child", "mcp")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": {
        "child": { "profile": "mcp", "operations": "mocks/child" } } }));
    let s = crate::support::Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let writes = p.path().join("child-writes.txt");
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "child", "--config", p.config_path(),
                 "--url", format!("http://{}", s.addr), "--attempt", a.token,
                 "--", "python3", child_server()],
        "env": { "CHILD_WRITES": writes },
        "era": "legacy",
        "calls": [ { "name": "remember", "arguments": { "text": "hello" } },
                   { "name": "noisy", "arguments": { "task": "joined" } } ]
    });
    let (out, stderr) = tokio::task::spawn_blocking(move || python_client(&plan))
        .await
        .unwrap();
    let r = out["results"].as_array().unwrap();
    assert!(
        stderr.contains("through the server at") && stderr.contains("in that server's mode"),
        "{stderr}"
    );
    assert!(stderr.contains("the attempt of --attempt"), "{stderr}");
    // The write was answered by the running server's dry-run, never by the child.
    assert_eq!(r[0]["isError"], true, "{out}");
    assert!(
        !writes.exists(),
        "the write reached the child: {:?}",
        std::fs::read_to_string(&writes)
    );
    // The read reached the child through the running server.
    assert_eq!(structured(&r[1]), &json!({ "done": "joined" }), "{out}");
    assert!(
        out["logs"].to_string().contains("working on joined"),
        "{out}"
    );
    // Both calls are in the attempt of --attempt, none in the default attempt.
    let ev = s.evidence(&a.id).await;
    let seen: Vec<(Value, Value)> = ev["tool_events"]
        .as_array()
        .unwrap_or_else(|| panic!("{ev}"))
        .iter()
        .map(|e| (e["operation_id"].clone(), e["result_status"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!("remember"), json!("blocked")),
            (json!("noisy"), json!("forwarded"))
        ],
        "{ev}"
    );
    let default = s.evidence(&s.default_attempt()).await;
    assert!(
        default["tool_events"]
            .as_array()
            .is_none_or(|e| e.is_empty()),
        "{default}"
    );
    s.stop().await.unwrap();
}

/// The agent under `understudy test --mode dry-run` starts `understudy mcp wrap` through the
/// Python SDK (cleaned environment, no `--url`, no `--attempt`): wrap finds the test's server
/// through the data dir and joins it, so the wrapped server's calls are in the test's
/// evidence, decided by the test's mode (the write blocked before the child, the read
/// forwarded to it).
#[test]
fn understudy_test_catches_a_wrapped_server_its_agent_starts() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = Project::new(&[("child", "mcp")]);
    let report = p.path().join("report");
    let writes = p.path().join("child-writes.txt");
    let plan = json!({
        "command": BIN,
        "args": ["mcp", "wrap", "--integration", "child", "--config", p.config_path(),
                 "--", "python3", child_server()],
        "env": { "CHILD_WRITES": writes },
        "era": "legacy",
        "calls": [ { "name": "remember", "arguments": { "text": "hello" } },
                   { "name": "noisy", "arguments": { "task": "under test" } } ]
    });
    let out = Command::new(BIN)
        .args(["test", "--mode", "dry-run", "--log-stderr", "--config"])
        .arg(p.config_path())
        .arg("--report-dir")
        .arg(&report)
        .arg("--")
        .arg("python3")
        .arg(root().join("tests/mcp-stdio/python_client.py"))
        .arg(plan.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("through the running understudy test at")
            && stderr.contains("the running understudy test's attempt"),
        "wrap did not join the test: {stderr}"
    );
    let client: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("results").is_some())
        })
        .unwrap_or_else(|| panic!("no client output: {stderr}"));
    assert_eq!(
        structured(&client["results"][1]),
        &json!({ "done": "under test" }),
        "{client}"
    );
    assert!(!writes.exists(), "the write reached the child");
    let evidence: Value =
        serde_json::from_slice(&std::fs::read(report.join("evidence.json")).unwrap()).unwrap();
    let seen: Vec<(Value, Value)> = evidence["tool_events"]
        .as_array()
        .unwrap_or_else(|| panic!("{evidence}"))
        .iter()
        .map(|e| (e["operation_id"].clone(), e["result_status"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!("remember"), json!("blocked")),
            (json!("noisy"), json!("forwarded"))
        ],
        "{evidence}"
    );
}

/// A tool whose rules fault by the `kind` it is given (the mock's own faults, no server).
fn faulty_tool() -> Value {
    let rule = |kind: &str, fault: Value| {
        json!({ "when": [ { "source": "input", "path": "kind", "op": "eq", "value": kind } ],
                "fault": fault })
    };
    // A log before the result: the answer is an SSE stream, cut before the result event.
    let mut cut = rule(
        "stream_cut",
        json!({ "kind": "stream_cut", "after_effect": true }),
    );
    cut["notifications"] = json!([{ "log": { "level": "info", "data": "booking, then cut" } }]);
    json!({
        "operation_id": "book",
        "description": "Book something; `kind` picks how the answer fails",
        "input_schema": { "type": "object", "required": ["kind"],
                          "properties": { "kind": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["booked"],
                           "properties": { "booked": { "type": "string" } } },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "initial_state": { "last": "none" },
            "variants": { "ok": {
                "result": { "booked": { "$input": "kind" } },
                "set_state": { "last": { "$input": "kind" } },
                "rules": [
                    rule("jsonrpc_error", json!({ "kind": "jsonrpc_error", "after_effect": false, "code": -32000 })),
                    rule("timeout", json!({ "kind": "timeout", "after_effect": true, "ms": 20000 })),
                    rule("malformed_body", json!({ "kind": "malformed_body", "after_effect": false })),
                    rule("status", json!({ "kind": "status", "after_effect": false, "status": 503 })),
                    rule("close", json!({ "kind": "close", "after_effect": true })),
                    rule("reset", json!({ "kind": "reset", "after_effect": false })),
                    cut
                ]
            } },
            "examples": [ { "variant": "ok", "input": { "kind": "plain" },
                            "expected": { "booked": "plain" } } ]
        }
    })
}

/// The faults of a mock over stdio, seen by the MCP Python SDK's stdio client and in the
/// evidence: `jsonrpc_error` is the JSON-RPC error; `timeout` never answers (the client's own
/// timeout fires) and the session goes on; `malformed_body` is the truncated answer on one
/// line, which the client cannot parse (it never gets a result), and the session goes on;
/// `status` is a JSON-RPC error naming the HTTP status; `close` and `reset` end the stdio
/// session (the command exits 1, later calls fail) — `close` after its effect, `reset` before;
/// `stream_cut` (an SSE answer with a log before its result) delivers the log, then ends the
/// session the same way.
#[test]
fn faults_over_stdio_as_the_python_sdk_and_the_evidence_see_them() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = Project::new(&[("tools", "mcp")]);
    p.op("tools", faulty_tool());
    let call = |kind: &str| json!({ "name": "book", "arguments": { "kind": kind } });
    for ending in ["close", "reset", "stream_cut"] {
        let plan = json!({ "command": BIN, "args": stdio_args(&p), "era": "legacy",
            "timeout": 2.0,
            "calls": [ call("jsonrpc_error"), call("timeout"), call("malformed_body"),
                       call("status"), call("plain"), call(ending), call("after") ] });
        let (out, stderr) = python_client(&plan);
        let r = out["results"].as_array().unwrap();
        assert_eq!(r.len(), 7, "{out}");
        // jsonrpc_error: the error itself, with the code of the fault.
        assert_eq!(r[0]["raised"], "MCPError", "{out}");
        assert!(
            r[0]["message"].as_str().unwrap().contains("fault injected"),
            "{out}"
        );
        // timeout: no answer; the SDK's read timeout fires.
        assert!(
            r[1]["message"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("timed out"),
            "{out}"
        );
        // malformed_body: half an answer on one line — the client cannot parse it, so the
        // call gets no result either; the SDK reports the line to its message handler.
        assert!(
            r[2]["message"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("timed out"),
            "{out}"
        );
        assert!(
            out["notifications"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.get("exception").is_some()),
            "the unparseable line reached the client: {out}"
        );
        // status: a JSON-RPC error naming the HTTP status.
        assert_eq!(r[3]["raised"], "MCPError", "{out}");
        assert!(r[3]["message"].as_str().unwrap().contains("503"), "{out}");
        // The session went on through all of that.
        assert_eq!(structured(&r[4]), &json!({ "booked": "plain" }), "{out}");
        // close/reset: the stdio session ends; the call and every later one fail.
        assert!(r[5].get("raised").is_some(), "{ending}: {out}");
        assert!(r[6].get("raised").is_some(), "{ending}: {out}");
        if ending == "stream_cut" {
            assert!(
                stderr.contains("ended before its result (a `stream_cut` fault"),
                "{stderr}"
            );
            // What came before the result did reach the client.
            let logs = out["logs"].to_string();
            assert!(logs.contains("booking, then cut"), "{out}");
        } else {
            assert!(
                stderr.contains(&format!("a `{ending}` fault ended the session")),
                "{stderr}"
            );
            assert!(!out["logs"].to_string().contains("booking"), "{out}");
        }
        // The evidence: every call with its fault, the effects exactly as the faults say.
        let id = stderr
            .split("the default attempt ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no attempt on stderr: {stderr}"));
        let ev = Command::new(BIN)
            .args(["evidence", id, "--config"])
            .arg(p.config_path())
            .output()
            .unwrap();
        let evidence: Value = serde_json::from_slice(&ev.stdout)
            .unwrap_or_else(|_| panic!("evidence: {}", String::from_utf8_lossy(&ev.stderr)));
        let events = evidence["tool_events"].as_array().unwrap();
        let seen: Vec<(Value, Value, Value)> = events
            .iter()
            .map(|e| {
                (
                    e["arguments"]["kind"].clone(),
                    e["fault"]["kind"].clone(),
                    e["result_status"].clone(),
                )
            })
            .collect();
        let after = if ending == "reset" { "blocked" } else { "ok" };
        assert_eq!(
            seen,
            vec![
                (
                    json!("jsonrpc_error"),
                    json!("jsonrpc_error"),
                    json!("blocked")
                ),
                (json!("timeout"), json!("timeout"), json!("ok")),
                (
                    json!("malformed_body"),
                    json!("malformed_body"),
                    json!("blocked")
                ),
                (json!("status"), json!("status"), json!("blocked")),
                (json!("plain"), Value::Null, json!("ok")),
                (json!(ending), json!(ending), json!(after)),
            ],
            "nothing after the session ended: {evidence}"
        );
        let last = if ending == "reset" { "plain" } else { ending };
        assert_eq!(evidence["final_state"]["tools"]["last"], last, "{evidence}");
        // The timed-out call took effect before its answer was lost (`after_effect`).
        assert_eq!(events[1]["fault"]["after_effect"], true);
    }
}

/// Bridged to a running server (`--url`, `--attempt`), an attempt's chaos faults reach the
/// stdio client too: a `jsonrpc_error` is the error and the session goes on; a `reset` of the
/// server's connection ends the stdio session. Both calls are in that attempt's evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_faults_of_a_running_servers_attempt_over_stdio() {
    if !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let p = project();
    let s = crate::support::Server::start(&p).await;
    let a = s
        .attempt(json!({ "faults": {
            "tools/last_ticket": { "kind": "jsonrpc_error", "after_effect": false, "code": -32000, "times": 1 },
            "tools/create_ticket": { "kind": "reset", "after_effect": true } } }))
        .await;
    let mut args = stdio_args(&p);
    args.extend([
        "--url".to_string(),
        format!("http://{}", s.addr),
        "--attempt".to_string(),
        a.token.clone(),
    ]);
    let plan = json!({ "command": BIN, "args": args, "era": "legacy", "timeout": 5.0,
        "calls": [ { "name": "last_ticket", "arguments": {} },
                   { "name": "last_ticket", "arguments": {} },
                   { "name": "create_ticket", "arguments": { "subject": "Printer on fire" } },
                   { "name": "last_ticket", "arguments": {} } ] });
    let (out, stderr) = tokio::task::spawn_blocking(move || python_client(&plan))
        .await
        .unwrap();
    let r = out["results"].as_array().unwrap();
    assert_eq!(r[0]["raised"], "MCPError", "{out}");
    assert!(
        r[0]["message"].as_str().unwrap().contains("fault injected"),
        "{out}"
    );
    assert_eq!(structured(&r[1]), &json!({ "last": "none" }), "{out}");
    assert!(r[2].get("raised").is_some(), "{out}");
    assert!(r[3].get("raised").is_some(), "the session ended: {out}");
    assert!(stderr.contains("through the server at"), "{stderr}");
    assert!(stderr.contains("failed without an answer"), "{stderr}");
    let ev = s.evidence(&a.id).await;
    let seen: Vec<(Value, Value)> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["operation_id"].clone(), e["fault"]["kind"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!("last_ticket"), json!("jsonrpc_error")),
            (json!("last_ticket"), Value::Null),
            (json!("create_ticket"), json!("reset")),
        ],
        "{ev}"
    );
    assert_eq!(
        ev["final_state"]["tools"]["last_subject"],
        "Printer on fire"
    );
    s.stop().await.unwrap();
}
