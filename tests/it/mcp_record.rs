//! Recording an MCP server beyond its tools (docs/src/reference/mcp.md, issue 16): understudy in `record` mode
//! in front of a real MCP server on loopback (understudy itself serving the conformance
//! fixture `tests/mcp-conformance/` in replay), driven by a plain JSON-RPC client that answers
//! the server's questions; the drafts hold the resources, prompts, completions, notifications
//! and the asked client, pass `check`, and replaying them answers what the real server did.

use std::path::Path;

use serde_json::{json, Value};
use understudy::app::AppOptions;
use understudy::config::Config;

use crate::support::{Project, Server};

/// A session-era MCP client over plain HTTP: it answers every server-to-client request with
/// `answer(method)` and keeps the notifications each answer stream carried.
struct Session {
    http: reqwest::Client,
    url: String,
    sid: String,
    next: u64,
}

fn answer(method: &str) -> Value {
    match method {
        "elicitation/create" => {
            json!({"action": "accept", "content": {"username": "ann", "email": "ann@example.com"}})
        }
        _ => json!({"role": "assistant", "content": {"type": "text", "text": "sampled"},
                    "model": "m", "stopReason": "endTurn"}),
    }
}

impl Session {
    async fn open(url: &str) -> Session {
        let mut s = Session {
            http: reqwest::Client::new(),
            url: url.to_string(),
            sid: String::new(),
            next: 0,
        };
        let caps = json!({"protocolVersion": "2025-06-18", "clientInfo": {"name": "t", "version": "1"},
                          "capabilities": {"elicitation": {}, "sampling": {}}});
        let r = s
            .post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": caps}))
            .await;
        s.sid = r
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        let _ = r.text().await;
        let n = s
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(n.status(), 202);
        s
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut b = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18");
        if !self.sid.is_empty() {
            b = b.header("mcp-session-id", &self.sid);
        }
        b.body(body.to_string()).send().await.expect("POST")
    }

    /// One request: `(result or error, [notifications], [server requests' params])`.
    async fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>, Vec<Value>) {
        self.next += 1;
        let id = self.next;
        let mut r = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let sse = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        if !sse {
            let m: Value = r.json().await.expect("JSON");
            return (outcome(&m), Vec::new(), Vec::new());
        }
        let (mut notes, mut asked, mut buf) = (Vec::new(), Vec::new(), String::new());
        while let Some(chunk) = r.chunk().await.expect("stream") {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                let Ok(m) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                match (m.get("method").and_then(Value::as_str), m.get("id")) {
                    (Some(asked_method), Some(ask_id)) => {
                        asked.push(json!({"method": asked_method, "params": m["params"]}));
                        let reply =
                            json!({"jsonrpc": "2.0", "id": ask_id, "result": answer(asked_method)});
                        assert_eq!(self.post(&reply).await.status(), 202);
                    }
                    (Some(_), None) => notes.push(m),
                    (None, _) => return (outcome(&m), notes, asked),
                }
            }
        }
        panic!("{method}: the stream ended without an answer");
    }
}

fn outcome(m: &Value) -> Value {
    m.get("result")
        .or_else(|| m.get("error"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn names(v: &Value, list: &str, key: &str) -> Vec<String> {
    let mut n: Vec<String> = v[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list}: {v}"))
        .iter()
        .map(|x| x[key].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

/// What the agent saw of one MCP session touching everything beyond tools.
async fn drive(url: &str) -> Value {
    let mut s = Session::open(url).await;
    let mut seen = serde_json::Map::new();
    let (tools, ..) = s.request("tools/list", json!({})).await;
    seen.insert("tools".into(), json!(names(&tools, "tools", "name")));
    let (r, ..) = s.request("resources/list", json!({})).await;
    seen.insert("resources".into(), json!(names(&r, "resources", "uri")));
    let (r, ..) = s.request("resources/templates/list", json!({})).await;
    seen.insert(
        "templates".into(),
        json!(names(&r, "resourceTemplates", "uriTemplate")),
    );
    let (r, ..) = s.request("prompts/list", json!({})).await;
    seen.insert("prompts".into(), json!(names(&r, "prompts", "name")));
    for uri in ["test://static-text", "test://template/123/data"] {
        let (r, ..) = s.request("resources/read", json!({"uri": uri})).await;
        seen.insert(format!("read {uri}"), r["contents"].clone());
    }
    let (r, ..) = s
        .request(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
        )
        .await;
    seen.insert("prompt".into(), r["messages"].clone());
    let (r, ..) = s
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                   "argument": {"name": "arg1", "value": "par"}}),
        )
        .await;
    seen.insert("completion".into(), r["completion"]["values"].clone());
    let (r, ..) = s
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(r, json!({}));
    let (r, notes, _) = s
        .request(
            "tools/call",
            json!({"name": "test_tool_with_logging", "arguments": {}}),
        )
        .await;
    let params: Vec<&Value> = notes.iter().map(|n| &n["params"]).collect();
    seen.insert(
        "logging".into(),
        json!({"result": r, "notifications": params}),
    );
    let (r, notes, _) = s
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": format!("tok-{url}")}}),
        )
        .await;
    // The token is the live request's: the same placeholder either way.
    let params: Vec<Value> = notes
        .iter()
        .map(|n| {
            let mut p = n["params"].clone();
            assert_eq!(p["progressToken"], json!(format!("tok-{url}")), "{p}");
            p["progressToken"] = json!("<live token>");
            p
        })
        .collect();
    seen.insert(
        "progress".into(),
        json!({"result": r, "notifications": params}),
    );
    let (r, _, asked) = s
        .request(
            "tools/call",
            json!({"name": "test_elicitation", "arguments": {"message": "Who are you?"}}),
        )
        .await;
    seen.insert("elicitation".into(), json!({"result": r, "asked": asked}));
    let (r, _, asked) = s
        .request(
            "tools/call",
            json!({"name": "test_sampling", "arguments": {"prompt": "Say hi"}}),
        )
        .await;
    seen.insert("sampling".into(), json!({"result": r, "asked": asked}));
    Value::Object(seen)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p:?}: {e}")))
        .unwrap()
}

/// The real server: understudy serving the conformance fixture (in a directory of its own).
async fn real_server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-conformance"),
        dir.path(),
    );
    let config = Config::load(&dir.path().join("understudy.json")).unwrap();
    let s = Server::start_with(AppOptions::new(config)).await;
    (dir, s)
}

/// The binary with `args`: (exit code, stdout + stderr).
async fn cli(args: Vec<String>) -> (i32, String) {
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_mcp_session_replays_its_resources_prompts_notifications_and_questions() {
    let (_real_dir, real) = real_server().await;

    // understudy recording in front of it.
    let p = Project::new(&[("everything", "mcp")]);
    p.write_config(json!({"mode": "record", "integrations": {"everything": {
        "profile": "mcp", "upstream": real.url("/everything"), "operations": "mocks/everything"}}}));
    let out = p.path().join("drafts");
    let mut o = p.options();
    o.forward.out_dir = Some(out.clone());
    o.forward.allow_writes = true;
    let rec = Server::start_with(o).await;
    let recorded = drive(&rec.url("/everything")).await;
    let direct = drive(&real.url("/everything")).await;
    assert_eq!(
        recorded, direct,
        "the recording proxy answered what the real server answers"
    );
    let r = rec
        .call(
            "POST",
            "/_understudy/api/drafts/flush",
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    rec.stop().await.unwrap();
    real.stop().await.unwrap();

    // The drafts: resources and prompts beside the tools, in the hand-written format.
    let d = out.join("everything");
    let template = read(&d.join("resources/template.json"));
    assert_eq!(template["uri_template"], "test://template/{id}/data");
    assert_eq!(
        template["mock"]["examples"][0]["input"],
        json!({"id": "123"})
    );
    let text = read(&d.join("resources/static-text.json"));
    assert_eq!(text["uri"], "test://static-text");
    assert_eq!(
        text["mock"]["variants"]["ok"]["result"],
        recorded["read test://static-text"]
    );
    assert!(
        d.join("resources/static-binary.json").is_file(),
        "listed, never read: its description only"
    );
    assert!(read(&d.join("resources/static-binary.json"))
        .get("mock")
        .is_none());
    let prompt = read(&d.join("prompts/test_prompt_with_arguments.json"));
    assert_eq!(prompt["arguments"][0]["name"], "arg1");
    assert_eq!(
        prompt["completions"]["arg1"],
        json!(["paris", "park", "party"])
    );
    let logging = read(&d.join("test_tool_with_logging.json"));
    let logs = &logging["mock"]["variants"]["ok"]["notifications"];
    assert_eq!(logs.as_array().map(Vec::len), Some(3), "{logs}");
    assert_eq!(logs[0]["log"]["data"], "Tool execution started");
    let progress = read(&d.join("test_tool_with_progress.json"));
    let steps = &progress["mock"]["variants"]["ok"]["notifications"];
    assert_eq!(
        steps[1],
        json!({"progress": {"progress": 50, "total": 100}})
    );
    let asked = read(&d.join("test_elicitation.json"));
    let v = &asked["mock"]["variants"]["ok"];
    assert_eq!(v["ask_client"]["method"], "elicitation/create");
    assert_eq!(
        v["ask_client"]["params"]["message"],
        json!({"$input": "message"})
    );
    assert_eq!(
        asked["mock"]["examples"][0]["input"]["$response"],
        answer("elicitation/create")
    );
    assert!(
        std::fs::read_dir(&d).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".draft")),
        "nothing existed: every draft is in place"
    );

    // The drafts are the project: `check` passes, and replay answers what was recorded.
    std::fs::write(
        out.join("understudy.json"),
        json!({"integrations": {"everything": {"profile": "mcp", "operations": "everything"}}})
            .to_string(),
    )
    .unwrap();
    let config = out.join("understudy.json").display().to_string();
    let (code, text) = cli(vec!["check".into(), "--config".into(), config]).await;
    assert_eq!(code, 0, "{text}");
    let replay_config = Config::load(&out.join("understudy.json")).unwrap();
    let replay = Server::start_with(AppOptions::new(replay_config)).await;
    let replayed = drive(&replay.url("/everything")).await;
    assert_eq!(replayed, recorded);
    replay.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_writes_resources_and_prompts_beside_the_tools() {
    let (_real_dir, real) = real_server().await;
    let p = Project::new(&[("everything", "mcp")]);
    p.write_config(json!({"integrations": {"everything": {
        "profile": "mcp", "upstream": real.url("/everything"), "operations": "mocks/everything"}}}));
    let config = p.config_path().display().to_string();
    let discover = || {
        let args = [
            "discover",
            "--integration",
            "everything",
            "--config",
            &config,
        ];
        cli(args.iter().map(|a| a.to_string()).collect())
    };
    let (code, text) = discover().await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("new        resources/template"), "{text}");
    let d = p.ops_dir("everything");
    let template = read(&d.join("resources/template.json"));
    assert_eq!(template["uri_template"], "test://template/{id}/data");
    assert!(template.get("mock").is_none());
    let static_text = read(&d.join("resources/static-text.json"));
    assert_eq!(static_text["mime_type"], "text/plain");
    let prompt = read(&d.join("prompts/test_prompt_with_arguments.json"));
    assert_eq!(prompt["arguments"][1]["name"], "arg2");
    assert_eq!(prompt["arguments"][1]["required"], true);
    assert!(d.join("test_simple_text.json").is_file(), "the tools too");
    let (code, text) = cli(vec!["check".into(), "--config".into(), config.clone()]).await;
    assert_eq!(code, 0, "{text}");

    // A mock written since is kept; the unchanged server rewrites nothing.
    let mut with_mock = prompt.clone();
    with_mock["completions"] = json!({"arg1": ["x"]});
    std::fs::write(
        d.join("prompts/test_prompt_with_arguments.json"),
        with_mock.to_string(),
    )
    .unwrap();
    let (code, text) = discover().await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("summary: 0 new,"), "{text}");
    assert_eq!(
        read(&d.join("prompts/test_prompt_with_arguments.json"))["completions"],
        json!({"arg1": ["x"]})
    );
    real.stop().await.unwrap();
}

/// An upstream that answers every request `{}` and counts them.
async fn counting_upstream() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
            let _ = conn.write_all(reply.as_bytes()).await;
        }
    });
    (format!("http://{addr}/mcp"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_refuses_a_foreign_origin_before_forwarding() {
    use std::sync::atomic::Ordering;
    let (upstream, seen) = counting_upstream().await;
    let p = Project::new(&[("everything", "mcp")]);
    p.write_config(json!({"mode": "record", "integrations": {"everything": {
        "profile": "mcp", "upstream": upstream, "operations": "mocks/everything"}}}));
    let rec = Server::start(&p).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "ping"});
    let send = |origin: &'static str| {
        reqwest::Client::new()
            .post(rec.url("/everything"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("origin", origin)
            .body(init.to_string())
            .send()
    };
    let r = send("http://evil.example.com").await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "nothing reached the real server"
    );
    let r = send("http://localhost:1234").await.unwrap();
    assert_eq!(r.status(), 200, "a loopback origin is forwarded");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    rec.stop().await.unwrap();
}
