//! `understudy import --from openapi` on real documents nobody here wrote
//! (tests/fixtures/openapi-real/README.md: Twilio's API v2010 and Messaging v1, OpenAPI
//! 3.0.1; Mistral's API, OpenAPI 3.1.0). For every operation of each document: the import
//! writes a draft that passes `check`, and a real server in replay answers a call built from
//! the example input the generator made from its input schema (path captures — also inside
//! a segment, `{Sid}.json` —, query, and the body, form-encoded when the document says so)
//! with a 2xx whose data satisfies the operation's output schema; or the operation is listed
//! with its precise reason. The table (document, operations, working, %) is printed; the
//! test fails below each document's floor.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{Project, Server};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openapi-real")
        .join(name)
}

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// One document's result: (operations in the document, working, the failures with reasons).
struct Coverage {
    total: usize,
    working: usize,
    failures: Vec<String>,
}

fn read_doc(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).unwrap();
    if file.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).unwrap()
    } else {
        yaml_serde::from_str(&text).unwrap()
    }
}

/// The request-body media types the document gives the operation at `pointer`.
fn body_types(doc: &Value, pointer: &str) -> Vec<String> {
    let mut op = doc.pointer(pointer).cloned().unwrap_or(Value::Null);
    let mut body = op
        .get_mut("requestBody")
        .map(Value::take)
        .unwrap_or(Value::Null);
    for _ in 0..8 {
        match body.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                body = doc
                    .pointer(r.trim_start_matches('#'))
                    .cloned()
                    .unwrap_or(Value::Null)
            }
            None => break,
        }
    }
    body.get("content")
        .and_then(Value::as_object)
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default()
}

fn form_encode(v: &Value) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    let text = |x: &Value| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut parts = Vec::new();
    for (k, x) in v.as_object().into_iter().flatten() {
        match x {
            Value::Null => {}
            Value::Array(a) => {
                for i in a {
                    parts.push(format!("{}={}", enc(k), enc(&text(i))));
                }
            }
            other => parts.push(format!("{}={}", enc(k), enc(&text(other)))),
        }
    }
    parts.join("&")
}

async fn coverage(file: &Path) -> Coverage {
    let doc = read_doc(file);
    let total: usize = doc["paths"]
        .as_object()
        .map(|p| {
            p.values()
                .map(|item| METHODS.iter().filter(|m| item.get(**m).is_some()).count())
                .sum()
        })
        .unwrap_or(0);
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({"integrations": {"api": {
        "profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/api"}}}));
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "import",
            "--from",
            "openapi",
            "--integration",
            "api",
            "--format",
            "json",
            "--config",
        ])
        .arg(p.config_path())
        .arg("--out")
        .arg(p.ops_dir("api"))
        .arg(file)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: report is not JSON ({e}): {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // Every warning names the file, a JSON path inside it and why.
    for n in report["not_mapped"].as_array().into_iter().flatten() {
        assert!(
            n["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("paths/") || p.starts_with("components/")),
            "a warning without its JSON path: {n}"
        );
        assert!(
            n["file"]
                .as_str()
                .is_some_and(|f| f.ends_with(file.file_name().unwrap().to_str().unwrap())),
            "{n}"
        );
        assert!(n["message"].as_str().is_some_and(|m| !m.is_empty()), "{n}");
    }
    let s = Server::start(&p).await;
    let mut failures = Vec::new();
    let mut working = 0;
    let ops = report["operations"].as_array().cloned().unwrap_or_default();
    for o in &ops {
        let id = o["operation_id"].as_str().unwrap_or("?").to_string();
        if o["status"] != "written" {
            let why: Vec<String> = o["reasons"]
                .as_array()
                .into_iter()
                .chain(o["problems"].as_array())
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect();
            failures.push(format!(
                "{id}: {}: {}",
                o["status"].as_str().unwrap_or(""),
                why.join("; ")
            ));
            continue;
        }
        let path = PathBuf::from(o["file"].as_str().unwrap());
        let opf: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let spec: understudy::contract::MatchSpec =
            serde_json::from_value(opf["match"].clone()).unwrap();
        let input = opf["mock"]["examples"][0]["input"].clone();
        let planned = match understudy::upstream::request::build(&spec, &input, None) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!(
                    "{id}: no request can be built from its example input: {e}"
                ));
                continue;
            }
        };
        let pointer = o["sources"][0]
            .as_str()
            .and_then(|s| s.split_once('#'))
            .map(|(_, p)| format!("/{p}"))
            .unwrap_or_default();
        let types = body_types(&doc, &pointer);
        let json_body = types.iter().any(|t| t.contains("json"));
        let form = !json_body
            && types
                .iter()
                .any(|t| t.starts_with("application/x-www-form-urlencoded"));
        let multipart =
            !json_body && !form && types.iter().any(|t| t.starts_with("multipart/form-data"));
        // `match.body` tells `drift` how to send the body (absent: JSON).
        let want_body = if form {
            json!("form")
        } else if multipart {
            json!("multipart")
        } else {
            Value::Null
        };
        assert_eq!(opf["match"]["body"], want_body, "{id}: {types:?}");
        let url = s.url(&format!("/api{}", planned.rest()));
        let mut rb = s.http.request(planned.method.parse().unwrap(), &url);
        if let Some(b) = &planned.body {
            rb = if form {
                rb.header("content-type", "application/x-www-form-urlencoded")
                    .body(form_encode(b))
            } else if multipart {
                let mut t = String::new();
                for (k, x) in b.as_object().into_iter().flatten() {
                    let vals: Vec<&Value> = match x {
                        Value::Null => Vec::new(),
                        Value::Array(a) => a.iter().collect(),
                        one => vec![one],
                    };
                    for v in vals {
                        let v = match v {
                            Value::String(s) => s.clone(),
                            o => o.to_string(),
                        };
                        t.push_str(&format!(
                            "--bNd\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                        ));
                    }
                }
                t.push_str("--bNd--\r\n");
                rb.header("content-type", "multipart/form-data; boundary=bNd")
                    .body(t)
            } else {
                rb.header("content-type", "application/json")
                    .body(b.to_string())
            };
        }
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            failures.push(format!(
                "{id}: {} {} answered {status}: {}",
                planned.method,
                planned.rest(),
                text.chars().take(300).collect::<String>()
            ));
            continue;
        }
        // The data the agent got satisfies the output schema's `data`.
        // (The whole output schema, whose root holds the `$defs` of recursive members.)
        if !opf["output_schema"]["properties"]["data"].is_null() {
            let data: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let envelope = json!({"status": status, "data": data});
            let v = understudy::contract::compile_schema(&opf["output_schema"]).unwrap();
            let first = v
                .iter_errors(&envelope)
                .next()
                .map(|e| format!("at {}: {e}", e.instance_path()));
            if let Some(e) = first {
                failures.push(format!("{id}: the answer fails its schema {e}"));
                continue;
            }
        }
        working += 1;
    }
    // Operations the import did not write at all (no 2xx response, …): in the notes.
    let unwritten = total.saturating_sub(ops.len());
    if unwritten > 0 {
        for n in report["not_mapped"].as_array().into_iter().flatten() {
            if n["message"]
                .as_str()
                .is_some_and(|m| m.contains("not imported"))
            {
                failures.push(format!(
                    "{}: {}",
                    n["path"].as_str().unwrap_or(""),
                    n["message"].as_str().unwrap_or("")
                ));
            }
        }
    }
    s.stop().await.unwrap();
    Coverage {
        total,
        working,
        failures,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_documents_get_working_mocks() {
    // (document, the floor this test holds it to, in % of its operations).
    let docs = [
        ("twilio_api_v2010.json", 95.0),
        ("twilio_messaging_v1.json", 95.0),
        ("mistral_openapi.yaml", 95.0),
    ];
    let mut table =
        String::from("| document | operations | working mocks | % |\n|---|---|---|---|\n");
    let mut below = Vec::new();
    for (name, floor) in docs {
        let c = coverage(&fixture(name)).await;
        let pct = if c.total == 0 {
            0.0
        } else {
            100.0 * c.working as f64 / c.total as f64
        };
        table.push_str(&format!(
            "| {name} | {} | {} | {pct:.1} |\n",
            c.total, c.working
        ));
        eprintln!("{name}: {} not working:", c.failures.len());
        for f in &c.failures {
            eprintln!("  {f}");
        }
        if pct < floor {
            below.push(format!("{name}: {pct:.1} % < {floor} %"));
        }
    }
    eprintln!("{table}");
    assert!(below.is_empty(), "below the floor: {below:?}\n{table}");
}
