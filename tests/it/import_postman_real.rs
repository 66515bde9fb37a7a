//! `understudy import --from postman` on collections from the real world: Postman's own
//! converter (openapi-to-postmanv2, pinned; tests/fixtures/postman-real/README.md) run on the
//! real OpenAPI documents of tests/fixtures/openapi-real. For every request of each
//! collection: the import writes a draft that passes `check`, and a real server in replay
//! answers the call the collection's own request makes (its method, URL with path variables
//! and collection variables filled, enabled query entries and headers, and its body — `raw`,
//! or a `urlencoded` form, or `formdata` multipart) with the status and body of the request's
//! saved 2xx response (else its saved response: a redirect), secrets scrubbed by the import
//! excepted; or the request is listed by the import with its JSON path and precise reason.
//! The table (collection, requests, working, %) is printed; the test fails below the issue's
//! floor (95 % of each collection's requests), and on any request that neither works nor is
//! listed. A form request must also be refused without its form: its fields are the draft's
//! input, not ignored.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};

use crate::support::{Project, Server};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/postman-real")
        .join(name)
}

/// One request of the collection: its JSON path and the item.
struct Request {
    at: String,
    item: Value,
}

fn requests(items: &[Value], at: &str, out: &mut Vec<Request>) {
    for (i, item) in items.iter().enumerate() {
        let iat = format!("{at}/{i}");
        match item.get("item").and_then(Value::as_array) {
            Some(sub) => requests(sub, &format!("{iat}/item"), out),
            None => out.push(Request {
                at: iat,
                item: item.clone(),
            }),
        }
    }
}

/// `{{name}}` replaced by the collection variable's value (left as written when undefined).
fn subst(s: &str, vars: &Map<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            out.push_str(&rest[i..]);
            return out;
        };
        match vars.get(&after[..j]) {
            Some(Value::String(v)) => out.push_str(v),
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&rest[i..i + 4 + j]),
        }
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    out
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn enc(s: &str, keep: &[u8]) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || keep.contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn enabled(list: Option<&Value>) -> impl Iterator<Item = &Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|x| x.get("disabled").and_then(Value::as_bool) != Some(true))
}

/// The call a Postman client makes for `req` (a v2.1 request object), relative to the
/// collection's `{{baseUrl}}`: (method, path?query, headers, body).
#[allow(clippy::type_complexity)]
fn call_of(
    req: &Value,
    vars: &Map<String, Value>,
) -> Result<(String, String, Vec<(String, String)>, Option<Vec<u8>>), String> {
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let url = req.get("url").ok_or("no url")?;
    let path_vars: Map<String, Value> = url
        .get("variable")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("key")?.as_str()?.to_string(), v.get("value")?.clone())))
        .collect();
    let segs = url
        .get("path")
        .and_then(Value::as_array)
        .ok_or("the url has no `path` list")?;
    let mut path = String::new();
    for s in segs {
        let s = s.as_str().ok_or("a path segment that is not text")?;
        let s = match s.strip_prefix(':') {
            Some(name) => text_of(path_vars.get(name)),
            None => subst(s, vars),
        };
        path.push('/');
        path.push_str(&enc(&s, b"-_.~!$&'()*+,;=:@"));
    }
    let query: Vec<String> = enabled(url.get("query"))
        .map(|q| {
            format!(
                "{}={}",
                enc(&subst(&text_of(q.get("key")), vars), b"-_.~"),
                enc(&subst(&text_of(q.get("value")), vars), b"-_.~")
            )
        })
        .collect();
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let mut headers: Vec<(String, String)> = enabled(req.get("header"))
        .map(|h| (text_of(h.get("key")), subst(&text_of(h.get("value")), vars)))
        .collect();
    let has_ct = |h: &[(String, String)]| {
        h.iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    };
    let body = match req.pointer("/body/mode").and_then(Value::as_str) {
        None => None,
        Some("raw") => {
            let raw = subst(&text_of(req.pointer("/body/raw")), vars);
            if !has_ct(&headers)
                && req
                    .pointer("/body/options/raw/language")
                    .and_then(Value::as_str)
                    == Some("json")
            {
                headers.push(("Content-Type".into(), "application/json".into()));
            }
            Some(raw.into_bytes())
        }
        Some("urlencoded") => {
            let fields: Vec<String> = enabled(req.pointer("/body/urlencoded"))
                .map(|f| {
                    format!(
                        "{}={}",
                        enc(&subst(&text_of(f.get("key")), vars), b"-_.~"),
                        enc(&subst(&text_of(f.get("value")), vars), b"-_.~")
                    )
                })
                .collect();
            if !has_ct(&headers) {
                headers.push((
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ));
            }
            Some(fields.join("&").into_bytes())
        }
        Some("formdata") => {
            let mut t = String::new();
            for f in enabled(req.pointer("/body/formdata")) {
                if f.get("type").and_then(Value::as_str) == Some("file") {
                    continue;
                }
                t.push_str(&format!(
                    "--pmBoundary\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n{}\r\n",
                    subst(&text_of(f.get("key")), vars),
                    subst(&text_of(f.get("value")), vars)
                ));
            }
            t.push_str("--pmBoundary--\r\n");
            headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            headers.push((
                "Content-Type".into(),
                "multipart/form-data; boundary=pmBoundary".into(),
            ));
            Some(t.into_bytes())
        }
        Some(other) => return Err(format!("a `{other}` body")),
    };
    Ok((method, path, headers, body))
}

/// One collection's result.
struct Coverage {
    total: usize,
    working: usize,
    /// Requests that do not work, each with the import's notes about it, else why not.
    failures: Vec<String>,
    /// Of those, the ones the import did not list (a note with the request's JSON path).
    unlisted: Vec<String>,
    /// Working requests whose answer differs from the saved one only in scrubbed secrets.
    scrubbed: Vec<String>,
}

async fn coverage(file: &Path) -> Coverage {
    let coll: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let vars: Map<String, Value> = coll
        .get("variable")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("key")?.as_str()?.to_string(), v.get("value")?.clone())))
        .collect();
    let mut reqs = Vec::new();
    requests(
        coll["item"].as_array().map(Vec::as_slice).unwrap_or(&[]),
        "item",
        &mut reqs,
    );
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({"integrations": {"api": {
        "profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/api"}}}));
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "import",
            "--from",
            "postman",
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
    let notes: Vec<(String, String)> = report["not_mapped"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            assert!(
                n["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(file.file_name().unwrap().to_str().unwrap())),
                "a warning without its file: {n}"
            );
            // … and the JSON path of what it is about, and why.
            assert!(
                n["path"].as_str().is_some_and(|p| !p.is_empty())
                    && n["message"].as_str().is_some_and(|m| !m.is_empty()),
                "a warning without its JSON path or reason: {n}"
            );
            (
                n["path"].as_str().unwrap_or("").to_string(),
                n["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // Drafts that did not pass `check` are not served: their problems explain the misses.
    let mut problems = Vec::new();
    for o in report["operations"].as_array().into_iter().flatten() {
        if o["status"] != "written" {
            problems.push(format!(
                "{}: {}: {}",
                o["operation_id"].as_str().unwrap_or("?"),
                o["status"].as_str().unwrap_or(""),
                o["problems"]
            ));
        }
    }
    let s = Server::start(&p).await;
    let mut c = Coverage {
        total: reqs.len(),
        working: 0,
        failures: Vec::new(),
        unlisted: Vec::new(),
        scrubbed: Vec::new(),
    };
    for r in &reqs {
        let name = r.item["name"].as_str().unwrap_or("?");
        let listed: Vec<&(String, String)> = notes
            .iter()
            .filter(|(p, _)| p == &r.at || p.starts_with(&format!("{}/", r.at)))
            .collect();
        let why = match check_request(&s, r, &vars).await {
            Ok(n) => {
                c.working += 1;
                if n > 0 {
                    c.scrubbed.push(format!("{} ({name}): {n}", r.at));
                }
                continue;
            }
            Err(why) => why,
        };
        let line = if listed.is_empty() {
            c.unlisted.push(format!("{} ({name}): {why}", r.at));
            format!("{} ({name}): NOT LISTED by the import: {why}", r.at)
        } else {
            let l: Vec<String> = listed.iter().map(|(p, m)| format!("{p}: {m}")).collect();
            format!("{} ({name}): {why}; listed: {}", r.at, l.join(" | "))
        };
        c.failures.push(line);
    }
    if !problems.is_empty() && !c.failures.is_empty() {
        c.failures
            .push(format!("drafts that failed check: {problems:?}"));
    }
    s.stop().await.unwrap();
    c
}

/// `got` is `want`, but for values the import scrubbed as secrets (`[scrubbed]` in the
/// answer where the saved response had a value): secrets never reach an operation file.
fn same_but_scrubbed(got: &Value, want: &Value, scrubbed: &mut usize) -> bool {
    match (got, want) {
        (Value::String(g), w) if g == "[scrubbed]" && !w.is_null() => {
            *scrubbed += 1;
            true
        }
        (Value::Object(g), Value::Object(w)) => {
            g.len() == w.len()
                && g.iter().all(|(k, gv)| {
                    w.get(k)
                        .is_some_and(|wv| same_but_scrubbed(gv, wv, scrubbed))
                })
        }
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len()
                && g.iter()
                    .zip(w)
                    .all(|(gv, wv)| same_but_scrubbed(gv, wv, scrubbed))
        }
        (g, w) => g == w,
    }
}

/// The request's own call, in replay, answers as its saved response says (the first 2xx
/// one, else the first with a code — a Twilio redirect is saved as a 307): its status, and
/// its body when that is JSON, but for scrubbed secrets. `Ok(n)`: `n` values scrubbed.
async fn check_request(
    s: &Server,
    r: &Request,
    vars: &Map<String, Value>,
) -> Result<usize, String> {
    let saved = r.item["response"].as_array().cloned().unwrap_or_default();
    let saved = saved
        .iter()
        .find(|x| x["code"].as_u64().is_some_and(|c| (200..300).contains(&c)))
        .or_else(|| saved.iter().find(|x| x["code"].as_u64().is_some()))
        .ok_or("no saved response with a code: nothing says what it answers")?;
    let (method, rest, headers, body) = call_of(&r.item["request"], vars)?;
    let send = |with_body: bool| {
        let mut rb = s
            .http
            .request(method.parse().unwrap(), s.url(&format!("/api{rest}")));
        for (k, v) in &headers {
            if with_body || !k.eq_ignore_ascii_case("content-type") {
                rb = rb.header(k.as_str(), v.as_str());
            }
        }
        if let (Some(b), true) = (&body, with_body) {
            rb = rb.body(b.clone());
        }
        rb.send()
    };
    let resp = send(true).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let want = saved["code"].as_u64().unwrap_or(0) as u16;
    if status != want {
        return Err(format!(
            "{method} {rest} answered {status}, its saved response {want}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    // The saved answer's body, when it is JSON, is what replay answers.
    let mut scrubbed = 0;
    if let Ok(want) = serde_json::from_str::<Value>(saved["body"].as_str().unwrap_or("")) {
        let got: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !same_but_scrubbed(&got, &want, &mut scrubbed) {
            return Err(format!(
                "{method} {rest}: the answer is not the saved response's body: {}",
                text.chars().take(300).collect::<String>()
            ));
        }
    }
    // A form's fields are the draft's input: the same call without them is refused.
    let form = r.item["request"]["body"]["mode"]
        .as_str()
        .filter(|m| matches!(*m, "urlencoded" | "formdata"));
    if let Some(mode) = form {
        // (`file` fields are left out of the input, and listed.)
        let fields = enabled(r.item["request"]["body"].get(mode))
            .filter(|f| f.get("type").and_then(Value::as_str) != Some("file"));
        if fields.count() > 0 {
            let bare = send(false).await.map_err(|e| e.to_string())?.status();
            if bare.is_success() {
                return Err(format!(
                    "{method} {rest} answers {bare} without its `{mode}` body: the form's fields are not the draft's input"
                ));
            }
        }
    }
    Ok(scrubbed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_postman_collections_get_working_mocks() {
    // (collection, the floor this test holds it to, in % of its requests: the 95 %).
    let colls = [
        ("twilio_api_v2010.postman_collection.json", 95.0),
        ("twilio_messaging_v1.postman_collection.json", 95.0),
        ("mistral_openapi.postman_collection.json", 95.0),
    ];
    let mut table = String::from(
        "| collection | requests | working mocks | % | not working, not listed |\n|---|---|---|---|---|\n",
    );
    let mut below = Vec::new();
    let mut unlisted = Vec::new();
    for (name, floor) in colls {
        let c = coverage(&fixture(name)).await;
        let pct = if c.total == 0 {
            0.0
        } else {
            100.0 * c.working as f64 / c.total as f64
        };
        table.push_str(&format!(
            "| {name} | {} | {} | {pct:.1} | {} |\n",
            c.total,
            c.working,
            c.unlisted.len()
        ));
        eprintln!("{name}: {} not working:", c.failures.len());
        for f in &c.failures {
            eprintln!("  {f}");
        }
        eprintln!(
            "{name}: {} answers hold scrubbed secrets (values scrubbed): {:?}",
            c.scrubbed.len(),
            c.scrubbed
        );
        if c.total == 0 || pct < floor {
            below.push(format!("{name}: {pct:.1} % < {floor} %"));
        }
        // A request that does not work is listed by the import with its JSON path.
        unlisted.extend(c.unlisted.iter().map(|u| format!("{name}: {u}")));
    }
    eprintln!("{table}");
    assert!(below.is_empty(), "below the floor: {below:?}\n{table}");
    assert!(
        unlisted.is_empty(),
        "requests that do not work and the import does not list: {unlisted:#?}"
    );
}
