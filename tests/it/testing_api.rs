//! The tool-testing API end to end (issue "The tool-testing API: contracts, revisions, save
//! with 409, inline checks, execute with streaming, hot reload, metrics"): a real server on
//! port 0 with a real sled store in a temp dir. Hot reload is awaited through
//! `Integrations::subscribe` (no sleeps); the only timeouts bound a hang.

use std::time::Duration;

use serde_json::{json, Value};
use understudy::app::AppOptions;

use crate::support::{self, mock, rest_op, standard_project, Project, Resp, Server};

const API: &str = "/_understudy/api";

/// The lookup query of `support::sf_lookup_op`, for phone +15550001.
const LOOKUP: &str =
    "/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'";

/// An operation without a mock whose schemas the generator supports.
fn order_op() -> Value {
    json!({
        "operation_id": "get_order",
        "description": "Fetch an order by id",
        "match": { "method": "GET", "path": "/orders/{id}" },
        "input_schema": { "type": "object", "required": ["id"],
                          "properties": { "id": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["status", "data"], "properties": {
            "status": { "type": "integer" },
            "data": { "type": "object", "required": ["id", "total"], "properties": {
                "id": { "type": "string" }, "total": { "type": "number" } } } } }
    })
}

/// A slow operation: its variant sleeps `delay_ms`.
fn slow_op(delay_ms: u64) -> Value {
    let result = json!({ "status": 200, "data": { "done": true } });
    let mut m = mock(result, json!({}));
    m["variants"]["ok"]["delay_ms"] = json!(delay_ms);
    rest_op("slow", "GET", "/slow", Some(m))
}

/// Write an operation file atomically (a hidden temp file renamed), so the watcher never
/// reads half a file.
fn write_op(p: &Project, integration: &str, op: &Value) {
    let id = op["operation_id"].as_str().unwrap();
    let dir = p.ops_dir(integration);
    let tmp = dir.join(format!(".{id}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(op).unwrap()).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{id}.json"))).unwrap();
}

fn write_raw(p: &Project, integration: &str, name: &str, text: &str) {
    let dir = p.ops_dir(integration);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

async fn get(s: &Server, path: &str) -> Resp {
    s.call("GET", &format!("{API}{path}"), None, &[]).await
}

async fn post(s: &Server, path: &str, body: Value) -> Resp {
    s.call("POST", &format!("{API}{path}"), Some(&body), &[])
        .await
}

async fn testing(s: &Server, integration: &str) -> Value {
    let r = get(s, &format!("/tools/{integration}/testing")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn op_entry<'a>(t: &'a Value, id: &str) -> &'a Value {
    t["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation_id"] == id)
        .unwrap_or_else(|| panic!("operation {id} in {t}"))
}

/// Wait (on reload notifications, never on a clock) until GET /tools/{integration}/testing
/// satisfies `pred`.
async fn until(s: &Server, integration: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut rx = s.app.integrations.subscribe();
    let wait = async {
        loop {
            let t = testing(s, integration).await;
            if pred(&t) {
                return t;
            }
            rx.changed().await.expect("the server is running");
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the hot reload happened (bounded wait)")
}

/// `(event, data)` of every dispatched SSE event, checking the framing on the way.
fn sse_events(text: &str) -> Vec<(String, String)> {
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "every event is terminated: {text:?}"
    );
    text.split("\n\n")
        .filter(|b| !b.is_empty())
        .map(|block| {
            let mut event = "message".to_string();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v.to_string());
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

/// The execute answer without the one field that differs between two runs.
fn without_duration(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("duration_ms");
    v
}

// ---------------------------------------------------------------------------------------------
// 1. GET /tools

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_lists_every_integration_with_its_operations() {
    let p = standard_project();
    p.op("api", order_op());
    let s = Server::start(&p).await;
    let r = get(&s, "/tools").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let integs = v["integrations"].as_array().unwrap();
    let names: Vec<&str> = integs
        .iter()
        .map(|i| i["integration"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "crm"]);
    let crm = &integs[1];
    assert_eq!(crm["profile"], "salesforce");
    assert!(crm["builtin_operations"]
        .as_array()
        .unwrap()
        .contains(&json!("sobject_get")));
    let lookup = op_entry(crm, "lookup_contact_by_phone");
    assert_eq!(lookup["description"], "Find a contact by phone number");
    assert_eq!(lookup["input_schema"]["required"], json!(["phone"]));
    assert_eq!(
        lookup["output_schema"]["required"],
        json!(["status", "data"])
    );
    assert_eq!(lookup["is_write"], false);
    assert_eq!(lookup["has_mock"], true);
    assert_eq!(lookup["latest_revision"], 1);
    assert_eq!(lookup["stale"], false);
    assert_eq!(op_entry(crm, "update_contact")["is_write"], true);
    let order = op_entry(&integs[0], "get_order");
    assert_eq!(order["has_mock"], false);
    assert_eq!(order["latest_revision"], Value::Null);
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 2. GET /tools/{integration}/testing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testing_shows_contracts_hashes_latest_revisions_and_stale_flags() {
    let p = standard_project();
    p.op("api", rest_op("stale_op", "GET", "/s", None));
    {
        // A revision saved earlier against another contract.
        let store = understudy::store::Store::open(&p.data_dir()).unwrap();
        let def = mock(json!({ "status": 200, "data": {} }), json!({}));
        store
            .sync_revision("api/stale_op", "sha256:0000", &def, "api")
            .unwrap();
    }
    let s = Server::start(&p).await;
    let t = testing(&s, "crm").await;
    assert_eq!(t["integration"], "crm");
    assert_eq!(t["profile"], "salesforce");
    assert_eq!(t["problems"], json!([]));
    let o = op_entry(&t, "lookup_contact_by_phone");
    let contract = &o["contract"];
    assert_eq!(contract["operation"], "salesforce:lookup_contact_by_phone");
    assert_eq!(contract["description"], "Find a contact by phone number");
    // The hash is the docs/src/concepts/operations.md hash of exactly that object.
    let h = understudy::contract::hash::contract_hash(
        understudy::contract::ProfileKind::Salesforce,
        "lookup_contact_by_phone",
        contract["description"].as_str(),
        &contract["input_schema"],
        &contract["output_schema"],
    );
    assert_eq!(o["contract_hash"], json!(h));
    let latest = &o["latest_revision"];
    assert_eq!(latest["revision"], 1);
    assert_eq!(latest["contract_hash"], json!(h));
    assert_eq!(latest["source"], "file");
    assert!(latest["definition_hash"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(latest["saved_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(o["stale"], false);
    assert_eq!(o["file_definition_hash"], latest["definition_hash"]);
    assert_eq!(o["revisions"], 1);

    let t = testing(&s, "api").await;
    let st = op_entry(&t, "stale_op");
    assert_eq!(st["stale"], true);
    assert_eq!(st["latest_revision"]["contract_hash"], "sha256:0000");
    let reason = st["stale_reason"].as_str().unwrap();
    assert!(
        reason.contains("sha256:0000") && reason.contains(st["contract_hash"].as_str().unwrap()),
        "{reason}"
    );

    let r = get(&s, "/tools/nope/testing").await;
    assert_eq!(r.status, 404);
    let e = &r.json()["error"];
    assert_eq!(e["details"][0]["unknown_integration"], "nope");
    assert_eq!(e["details"][0]["known_integrations"], json!(["api", "crm"]));
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 3 + 5. read testing → generate → edit → save → create attempt → execute, through the API

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_generate_edit_save_attempt_execute_end_to_end() {
    let p = Project::new(&[("shop", "rest")]);
    p.op("shop", order_op());
    let file = p.ops_dir("shop").join("get_order.json");
    let file_before = std::fs::read(&file).unwrap();
    let s = Server::start(&p).await;

    // Read.
    let t = testing(&s, "shop").await;
    let o = op_entry(&t, "get_order");
    assert_eq!(o["latest_revision"], Value::Null);
    let hash = o["contract_hash"].as_str().unwrap().to_string();

    // Generate.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "generate", "operation_id": "get_order" }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let g = r.json();
    assert_eq!(g["supported"], true, "{g}");
    assert_eq!(g["contract_hash"], json!(hash));
    let mut def = g["definition"].clone();

    // Edit: echo the id, a fixed total; the example follows.
    def["variants"]["default"]["result"]["data"]["id"] = json!({ "$input": "id" });
    def["variants"]["default"]["result"]["data"]["total"] = json!(42);
    let example_id = def["examples"][0]["input"]["id"].clone();
    def["examples"][0]["expected"]["data"]["id"] = example_id;
    def["examples"][0]["expected"]["data"]["total"] = json!(42);

    // Save.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": hash, "definition": def }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let saved = r.json();
    assert_eq!(saved["revision"], 1);
    assert_eq!(saved["source"], "api");
    assert_eq!(saved["created"], true);
    assert_eq!(saved["contract_hash"], json!(hash));
    // The same definition again: nothing new, nothing relabelled.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": hash, "definition": def }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["created"], false);
    assert_eq!(r.json()["revision"], 1);
    let t = testing(&s, "shop").await;
    assert_eq!(
        op_entry(&t, "get_order")["latest_revision"]["source"],
        "api"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        file_before,
        "save never rewrites the operation file"
    );

    // Create an attempt: it pins the saved revision.
    let a = s.attempt(json!({})).await;
    assert_eq!(a.body["pins"]["shop/get_order"]["revision"], 1);

    // Execute in that attempt, and call it as an agent would.
    let r = post(
        &s,
        "/tools/execute",
        json!({ "integration": "shop", "operation_id": "get_order", "input": { "id": "A-7" }, "attempt": a.id }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let x = r.json();
    assert_eq!(
        x["result"],
        json!({ "status": 200, "data": { "id": "A-7", "total": 42 } })
    );
    assert_eq!(x["revision"], 1);
    assert_eq!(x["error"], Value::Null);
    assert_eq!(x["validation_results"]["output_valid"], true);
    let r = s
        .call("GET", &format!("{}/orders/B-1", a.base("shop")), None, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({ "id": "B-1", "total": 42 }));
    // The default attempt was re-pinned by the save.
    let r = s.call("GET", "/shop/orders/C-2", None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["total"], 42);

    // The history.
    let r = get(&s, "/revisions/shop/get_order").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let h = r.json();
    assert_eq!(h["revisions"].as_array().unwrap().len(), 1);
    assert_eq!(h["revisions"][0]["source"], "api");
    assert_eq!(
        h["revisions"][0]["definition"]["variants"]["default"]["result"]["data"]["total"],
        42
    );
    assert!(
        h["revisions"][0]["definition"]
            .get("contract_hash")
            .is_none(),
        "revisions store the definition without contract_hash"
    );
    assert_eq!(h["current_contract_hash"], json!(hash));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_refusals_carry_what_is_needed_to_fix_them() {
    let p = Project::new(&[("shop", "rest")]);
    p.op("shop", order_op());
    let s = Server::start(&p).await;
    let hash = op_entry(&testing(&s, "shop").await, "get_order")["contract_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let good = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "generate", "operation_id": "get_order" }),
    )
    .await
    .json()["definition"]
        .clone();

    // 422: every problem, with its path in the request body.
    let mut bad = good.clone();
    bad["variants"]["default"]["result"]["data"]["total"] = json!("not a number");
    bad["examples"][0]["expected"]["data"]["total"] = json!("not a number");
    bad["variants"]["extra"] =
        json!({ "result": { "status": 200, "data": { "id": "x", "total": 1 } } });
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": hash, "definition": bad }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "check_failed");
    let details = e["details"].as_array().unwrap();
    assert!(details.len() >= 2, "every problem is listed: {details:?}");
    for d in details {
        assert_eq!(d["file"], Value::Null, "{d}");
        assert!(d["path"].as_str().unwrap().starts_with("definition"), "{d}");
        assert!(!d["message"].as_str().unwrap().is_empty());
    }
    let paths: Vec<&str> = details
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.iter().any(|p| p.contains("extra")),
        "the variant without an example: {paths:?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| p.contains("default") || p.contains("examples")),
        "the output schema violation: {paths:?}"
    );
    // A `check` action reports the same without saving.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "check", "operation_id": "get_order", "definition": bad }),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["error"]["details"].as_array().unwrap().len(),
        details.len()
    );
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "check", "operation_id": "get_order", "definition": good }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["ok"], true);

    // 409: a hash that is not the current one; the answer carries both.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": "sha256:0123", "definition": good }),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.text);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "contract_changed");
    assert_eq!(e["details"][0]["sent_contract_hash"], "sha256:0123");
    assert_eq!(e["details"][0]["current_contract_hash"], json!(hash));
    assert_eq!(e["details"][0]["contract"]["operation"], "rest:get_order");

    // A definition whose own contract_hash is another one is stale: 422 at its path.
    let mut stale = good.clone();
    stale["contract_hash"] = json!("sha256:0123");
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": hash, "definition": stale }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.json()["error"]["details"][0]["path"],
        "definition/contract_hash"
    );

    // 404: the unknown operation and the known ones.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "nope", "contract_hash": hash, "definition": good }),
    )
    .await;
    assert_eq!(r.status, 404);
    let d = &r.json()["error"]["details"][0];
    assert_eq!(d["unknown_operation"], "nope");
    assert_eq!(d["known_operations"], json!(["get_order"]));

    // 400s say what is missing or unknown.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "definition": good }),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("contract_hash"));
    let r = post(&s, "/tools/shop/testing", json!({ "action": "publish" })).await;
    assert_eq!(r.status, 400);
    let m = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(m.contains("publish") && m.contains("\"save\""), "{m}");
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "generate", "operation_id": "get_order", "instructions": "x" }),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("instructions"));

    // Nothing was stored by any refusal.
    assert!(s.app.store.revisions("shop/get_order").unwrap().is_empty());
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 3 + 7. The 409 race: a save with the hash read before a reload changed the contract

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_with_a_hash_read_before_a_reload_changed_the_contract_is_409() {
    let p = Project::new(&[("shop", "rest")]);
    p.op("shop", order_op());
    let s = Server::start(&p).await;
    let old_hash = op_entry(&testing(&s, "shop").await, "get_order")["contract_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let def = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "generate", "operation_id": "get_order" }),
    )
    .await
    .json()["definition"]
        .clone();
    // Meanwhile someone edits the description: the contract changes.
    let mut op = order_op();
    op["description"] = json!("Fetch one order by its id");
    write_op(&p, "shop", &op);
    let t = until(&s, "shop", |t| {
        op_entry(t, "get_order")["contract_hash"] != json!(old_hash)
    })
    .await;
    let new_hash = op_entry(&t, "get_order")["contract_hash"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        op_entry(&t, "get_order")["contract"]["description"],
        "Fetch one order by its id"
    );
    let mut without_hash = def.clone();
    without_hash
        .as_object_mut()
        .unwrap()
        .remove("contract_hash");
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": old_hash, "definition": without_hash }),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.text);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "contract_changed");
    assert_eq!(e["details"][0]["sent_contract_hash"], json!(old_hash));
    assert_eq!(e["details"][0]["current_contract_hash"], json!(new_hash));
    assert!(e["message"].as_str().unwrap().contains(&new_hash));
    assert!(s.app.store.revisions("shop/get_order").unwrap().is_empty());
    // Re-checked against the current contract, it saves.
    let r = post(
        &s,
        "/tools/shop/testing",
        json!({ "action": "save", "operation_id": "get_order", "contract_hash": new_hash, "definition": without_hash }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["contract_hash"], json!(new_hash));
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 4. POST /tools/testing: inline operations, nothing stored

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_check_and_generate_store_nothing() {
    let p = Project::new(&[("shop", "rest")]);
    p.op("shop", order_op());
    let s = Server::start(&p).await;
    let mut op = order_op();
    op["operation_id"] = json!("get_invoice");
    op["match"]["path"] = json!("/invoices/{id}");

    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "generate", "profile": "rest", "operation": op }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let g = r.json();
    assert_eq!(g["supported"], true, "{g}");
    let def = g["definition"].clone();

    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "check", "integration": "shop", "operation": op, "definition": def }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let c = r.json();
    assert_eq!(c["ok"], true);
    assert_eq!(c["contract_hash"], g["contract_hash"]);

    // Problems in the definition and in the operation, each at its body path.
    let mut bad_def = def.clone();
    bad_def["default_variant"] = json!("missing");
    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "check", "profile": "rest", "operation": op, "definition": bad_def }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let d = &r.json()["error"]["details"];
    assert_eq!(d[0]["file"], Value::Null);
    assert_eq!(d[0]["path"], "definition/default_variant", "{d}");
    let mut bad_op = op.clone();
    bad_op["input_schema"]["properties"]["id"]["type"] = json!("strin");
    bad_op["mock"] = def.clone();
    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "check", "profile": "rest", "operation": bad_op }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let d = &r.json()["error"]["details"];
    assert!(
        d.as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"] == "operation/input_schema"),
        "{d}"
    );
    // A clash with the integration's own operations is found when `integration` is given.
    let mut clash = order_op();
    clash["operation_id"] = json!("get_order_copy");
    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "check", "integration": "shop", "operation": clash }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.json()["error"]["details"][0]["message"]
        .as_str()
        .unwrap()
        .contains("ties with `get_order`"));

    // 400s: how to serve it, and unknown members.
    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "check", "operation": op }),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("profile"));
    let r = post(
        &s,
        "/tools/testing",
        json!({ "action": "save", "profile": "rest", "operation": op }),
    )
    .await;
    assert_eq!(r.status, 400);

    // Nothing stored, nothing served.
    assert!(s
        .app
        .store
        .revisions("shop/get_invoice")
        .unwrap()
        .is_empty());
    let t = testing(&s, "shop").await;
    assert_eq!(t["operations"].as_array().unwrap().len(), 1);
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 5. POST /tools/execute

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_answers_like_exec_and_commits_nothing() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let ex = |body: Value| post(&s, "/tools/execute", body);

    // Latest revision, initial state.
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 3 } })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    for k in [
        "result",
        "variant",
        "rule",
        "state_after",
        "delay_ms",
        "duration_ms",
        "validation_results",
        "error",
        "error_kind",
    ] {
        assert!(v.get(k).is_some(), "{k} in {v}");
    }
    assert_eq!(
        v["result"],
        json!({ "status": 200, "data": { "previous": -1 } })
    );
    assert_eq!(v["state_after"], json!({ "counter": 3 }));
    assert_eq!(v["variant"], "ok");
    assert_eq!(v["rule"], Value::Null);
    assert_eq!(v["revision"], 1);
    assert_eq!(v["is_write"], true);
    assert_eq!(v["source"], "tool_test");
    assert_eq!(
        v["validation_results"],
        json!({ "input_valid": true, "output_valid": true, "validation_errors": [] })
    );

    // Given state.
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 3 }, "state": { "counter": 77 } })).await;
    assert_eq!(r.json()["result"]["data"]["previous"], 77);

    // An attempt's state is read, never written.
    let a = s.attempt(json!({})).await;
    let call = s
        .call(
            "POST",
            &format!("{}/counter", a.base("api")),
            Some(&json!({ "n": 5 })),
            &[],
        )
        .await;
    assert_eq!(call.status, 200, "{}", call.text);
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 9 }, "attempt": a.id })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["result"]["data"]["previous"], 5);
    assert_eq!(r.json()["state_after"]["counter"], 9);
    let st = get(&s, &format!("/attempts/{}/state", a.id)).await;
    assert_eq!(st.status, 200, "{}", st.text);
    assert_eq!(
        st.json()["state"]["api"]["counter"],
        5,
        "execute commits nothing"
    );
    assert_eq!(st.json()["pins"]["api/bump"]["revision"], 1);
    let ev = s.evidence(&a.id).await;
    assert_eq!(
        ev["tool_events"].as_array().unwrap().len(),
        1,
        "execute records no evidence"
    );

    // Input errors and harness errors are answers, not refusals.
    let r =
        ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": "x" } })).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error_kind"], "input_error");
    assert_eq!(r.json()["validation_results"]["input_valid"], false);
    let r = ex(json!({ "integration": "crm", "operation_id": "lookup_contact_by_phone", "input": { "phone": "+1" }, "variant": "nope" })).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error_kind"], "harness_error");
    assert_eq!(r.json()["error"]["code"], "unknown_variant");
    let r = ex(json!({ "integration": "crm", "operation_id": "lookup_contact_by_phone", "input": { "phone": "+1" }, "variant": "missing" })).await;
    assert_eq!(r.json()["result"]["data"]["totalSize"], 0);

    // Refusals.
    let r = ex(json!({ "integration": "nope", "operation_id": "bump", "input": {} })).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json()["error"]["details"][0]["known_integrations"],
        json!(["api", "crm"])
    );
    let r = ex(json!({ "integration": "api", "operation_id": "nope", "input": {} })).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json()["error"]["details"][0]["known_operations"],
        json!(["bump"])
    );
    let r = ex(json!({ "integration": "api", "operation_id": "bump" })).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("input"));
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": {}, "state": [1] }))
        .await;
    assert_eq!(r.status, 400);
    let r = ex(
        json!({ "integration": "api", "operation_id": "bump", "input": {}, "timeout_seconds": 301 }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "stream_required");
    let r =
        ex(json!({ "integration": "api", "operation_id": "bump", "input": {}, "attempt": "nope" }))
            .await;
    assert_eq!(r.status, 404);
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 1 }, "target": "upstream" })).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error"]["code"], "no_upstream");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("integrations.api.upstream"));

    // An ended attempt: attempt_ended.
    s.call("DELETE", &format!("{API}/attempts/{}", a.id), None, &[])
        .await;
    let r = ex(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 1 }, "attempt": a.id })).await;
    assert_eq!(r.json()["error"]["code"], "attempt_ended");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_without_a_usable_revision_says_how_to_get_one() {
    let p = Project::new(&[("shop", "rest")]);
    p.op("shop", order_op());
    let s = Server::start(&p).await;
    let r = post(
        &s,
        "/tools/execute",
        json!({ "integration": "shop", "operation_id": "get_order", "input": { "id": "1" } }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["error"]["code"], "no_mock");
    assert!(v["error"]["message"].as_str().unwrap().contains("generate"));
    assert_eq!(v["revision"], Value::Null);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_streams_heartbeats_then_exactly_one_result() {
    let p = Project::new(&[("api", "rest")]);
    p.op("api", slow_op(300));
    let mut o: AppOptions = p.options();
    o.limits.sse_heartbeat = Duration::from_millis(50);
    let s = Server::start_with(o).await;
    let body = json!({ "integration": "api", "operation_id": "slow", "input": {} });
    let plain = post(&s, "/tools/execute", body.clone()).await;
    assert_eq!(plain.status, 200, "{}", plain.text);
    assert_eq!(plain.json()["delay_ms"], 300);

    let mut streamed = body.clone();
    streamed["stream_response"] = json!(true);
    let r = post(&s, "/tools/execute", streamed).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert!(r.header("content-length").is_none());
    let events = sse_events(&r.text);
    let (last, heartbeats) = events.split_last().expect("events");
    assert!(
        !heartbeats.is_empty(),
        "heartbeats while the call runs: {events:?}"
    );
    for (name, data) in heartbeats {
        assert_eq!(name, "heartbeat");
        let d: Value = serde_json::from_str(data).unwrap();
        assert!(d["elapsed_ms"].is_u64(), "{d}");
    }
    assert_eq!(last.0, "result");
    assert_eq!(
        events.iter().filter(|(n, _)| n == "result").count(),
        1,
        "exactly one result event"
    );
    let result: Value = serde_json::from_str(&last.1).unwrap();
    assert_eq!(without_duration(result), without_duration(plain.json()));

    // No delay: zero heartbeats, one result.
    let p2 = Project::new(&[("api", "rest")]);
    p2.op("api", slow_op(0));
    let s2 = Server::start(&p2).await;
    let mut b = body.clone();
    b["stream_response"] = json!(true);
    let r = post(&s2, "/tools/execute", b).await;
    let events = sse_events(&r.text);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "result");
    s2.stop().await.unwrap();
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_honours_timeout_seconds() {
    let p = Project::new(&[("api", "rest")]);
    p.op("api", slow_op(2000));
    let mut o: AppOptions = p.options();
    o.limits.sse_heartbeat = Duration::from_millis(50);
    let s = Server::start_with(o).await;
    let body = json!({ "integration": "api", "operation_id": "slow", "input": {}, "timeout_seconds": 0.2 });
    let r = post(&s, "/tools/execute", body.clone()).await;
    assert_eq!(r.status, 504, "{}", r.text);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "timeout");
    assert_eq!(e["details"][0]["delay_ms"], 2000);
    // Streamed: heartbeats, then the stream closes without a result event.
    let mut b = body.clone();
    b["stream_response"] = json!(true);
    let r = post(&s, "/tools/execute", b).await;
    assert_eq!(r.status, 200);
    let events = sse_events(&r.text);
    assert!(
        events.iter().all(|(n, _)| n == "heartbeat"),
        "no result event after a timeout: {events:?}"
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 6. GET /attempts/{id}/state, GET /revisions/{integration}/{operation}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_state_and_revision_history_routes() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s
        .attempt(json!({ "variants": { "crm/lookup_contact_by_phone": "missing" } }))
        .await;
    let r = get(&s, &format!("/attempts/{}/state", a.id)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["attempt_id"], json!(a.id));
    assert_eq!(v["status"], "active");
    assert_eq!(v["state"]["api"]["counter"], -1);
    assert_eq!(v["variants"]["crm/lookup_contact_by_phone"], "missing");
    let r = get(&s, "/attempts/nope/state").await;
    assert_eq!(r.status, 404);
    let r = s
        .call("POST", &format!("{API}/attempts/{}/state", a.id), None, &[])
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET"));

    let r = get(&s, "/revisions/crm/lookup_contact_by_phone").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let h = r.json();
    assert_eq!(h["revisions"][0]["revision"], 1);
    assert_eq!(h["revisions"][0]["source"], "file");
    assert_eq!(h["revisions"][0]["definition"]["default_variant"], "found");
    let r = get(&s, "/revisions/crm/nope").await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["details"][0]["known_operations"]
        .as_array()
        .unwrap()
        .contains(&json!("update_contact")));
    let r = get(&s, "/revisions/nope/x").await;
    assert_eq!(r.status, 404);
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 7. Hot reload

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_appends_a_revision_and_running_attempts_keep_their_pins() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let old = s.attempt(json!({})).await;
    let t = testing(&s, "crm").await;
    let old_hash = op_entry(&t, "lookup_contact_by_phone")["contract_hash"].clone();

    // Both the definition (default variant) and the contract (description) change.
    let mut op = support::sf_lookup_op();
    op["mock"]["default_variant"] = json!("missing");
    op["description"] = json!("Find contacts by phone number");
    write_op(&p, "crm", &op);
    let t = until(&s, "crm", |t| {
        op_entry(t, "lookup_contact_by_phone")["latest_revision"]["revision"] == 2
    })
    .await;
    let o = op_entry(&t, "lookup_contact_by_phone");
    assert_eq!(o["latest_revision"]["source"], "file");
    assert_ne!(o["contract_hash"], old_hash);
    assert_eq!(o["latest_revision"]["contract_hash"], o["contract_hash"]);
    assert_eq!(o["stale"], false);
    assert_eq!(t["problems"], json!([]));
    // The unchanged file of the same integration got no new revision.
    assert_eq!(
        op_entry(&t, "update_contact")["latest_revision"]["revision"],
        1
    );

    let new = s.attempt(json!({})).await;
    assert_eq!(
        new.body["pins"]["crm/lookup_contact_by_phone"]["revision"],
        2
    );
    assert_ne!(
        new.body["revision_set"], old.body["revision_set"],
        "a reload that appended a revision makes a new revision set"
    );
    assert_eq!(
        old.body["pins"]["crm/lookup_contact_by_phone"]["revision"],
        1
    );
    // The old attempt keeps revision 1 and the contract it was pinned with.
    let r = s
        .call("GET", &format!("{}{LOOKUP}", old.base("crm")), None, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["totalSize"], 1);
    let r = s
        .call("GET", &format!("{}{LOOKUP}", new.base("crm")), None, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["totalSize"], 0);
    // The default attempt follows the reload.
    let r = s.call("GET", &format!("/crm{LOOKUP}"), None, &[]).await;
    assert_eq!(r.json()["totalSize"], 0);
    let ev = s.evidence(&old.id).await;
    assert_eq!(ev["tool_events"][0]["revision"], 1);

    // A reload without a change of the files appends nothing (the file rule), however often.
    for integration in ["crm", "api"] {
        let o = tokio::task::block_in_place(|| {
            understudy::app::generations::reload_integration(&s.app, integration)
        });
        assert!(o.problems.is_empty(), "{:?}", o.problems);
        assert!(o.revisions.is_empty(), "{:?}", o.revisions);
    }
    assert_eq!(
        s.app
            .store
            .revisions("crm/lookup_contact_by_phone")
            .unwrap()
            .len(),
        2
    );
    assert_eq!(s.app.store.revisions("api/bump").unwrap().len(), 1);
    s.stop().await.unwrap();
}

/// Issue 20: a reload reads only the changed file; the other operations keep their compiled
/// form (the same `Arc`), and a reload without a change reads nothing.
#[test]
fn a_reload_reads_only_the_changed_file_and_keeps_the_other_operations() {
    let p = standard_project();
    p.op("crm", order_op());
    let app = understudy::app::App::build(p.options()).expect("starts");
    let before: Vec<_> = app.integrations["crm"].operations.clone();
    assert_eq!(before.len(), 3);
    let mut op = support::sf_lookup_op();
    op["mock"]["default_variant"] = json!("missing");
    write_op(&p, "crm", &op);
    let o = understudy::app::generations::reload_integration(&app, "crm");
    assert!(o.problems.is_empty(), "{:?}", o.problems);
    let changed = p.ops_dir("crm").join("lookup_contact_by_phone.json");
    assert_eq!(
        o.read,
        vec![changed.clone()],
        "only the edited file is read"
    );
    assert_eq!(o.revisions.len(), 1, "{:?}", o.revisions);
    let after = &app.integrations["crm"].operations;
    assert_eq!(after.len(), 3);
    for (b, a) in before.iter().zip(after) {
        assert_eq!(b.file, a.file);
        assert_eq!(
            std::sync::Arc::ptr_eq(b, a),
            a.file != changed,
            "{}: only the edited operation is compiled again",
            a.file.display()
        );
    }
    let o = understudy::app::generations::reload_integration(&app, "crm");
    assert!(o.read.is_empty() && o.revisions.is_empty(), "{o:?}");
    // The cross-file checks still see every operation: a duplicate id refuses the reload.
    let mut dup = order_op();
    dup["operation_id"] = json!("lookup_contact_by_phone");
    write_raw(
        &p,
        "crm",
        "lookup_contact_by_phone.json",
        &serde_json::to_string(&dup).unwrap(),
    );
    let o = understudy::app::generations::reload_integration(&app, "crm");
    assert!(
        o.problems
            .iter()
            .any(|p| p.file == changed && p.message.contains("ties with `get_order`")),
        "{:?}",
        o.problems
    );
}

/// Issue 20: a warm start does not check again a file that passed `check` (the check cache in
/// the data dir) and gives the same hashes; a cold start (empty data dir) checks every file.
#[test]
fn a_warm_start_skips_the_checks_of_files_that_passed_them() {
    use understudy::operation::cache::CheckCache;
    use understudy::operation::{load_parts, Part};
    let p = standard_project();
    let opts = p.options();
    let integ = opts.config.integrations["crm"].clone();
    let parts = || {
        let mut v: Vec<_> = std::fs::read_dir(p.ops_dir("crm"))
            .unwrap()
            .map(|e| Part::Read(e.unwrap().path()))
            .collect();
        v.sort_by_key(|x| match x {
            Part::Read(f) => f.clone(),
            Part::Keep(o) => o.file.clone(),
        });
        v
    };
    let cold = load_parts(&integ, parts(), &CheckCache::read(&p.data_dir())).unwrap();
    assert_eq!(cold.checked.len(), 2, "no cache: every file is checked");
    let app = understudy::app::App::build(opts).expect("starts");
    drop(app);
    assert!(CheckCache::path(&p.data_dir()).exists());
    let cache = CheckCache::read(&p.data_dir());
    let warm = load_parts(&integ, parts(), &cache).unwrap();
    assert!(warm.checked.is_empty(), "{:?}", warm.checked);
    assert_eq!(warm.read.len(), 2);
    for (c, w) in cold.ops.iter().zip(&warm.ops) {
        assert_eq!(c.contract_hash, w.contract_hash);
        assert_eq!(c.definition_hash, w.definition_hash);
    }
    // An edited file is checked again; the other one is not.
    let mut op = support::sf_lookup_op();
    op["mock"]["default_variant"] = json!("missing");
    write_op(&p, "crm", &op);
    let edited = load_parts(&integ, parts(), &cache).unwrap();
    assert_eq!(
        edited.checked,
        vec![p.ops_dir("crm").join("lookup_contact_by_phone.json")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_with_problems_changes_nothing_and_exposes_them() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let mut op = support::sf_lookup_op();
    op["mock"]["examples"][0]["expected"]["data"]["totalSize"] = json!(7);
    write_op(&p, "crm", &op);
    let t = until(&s, "crm", |t| !t["problems"].as_array().unwrap().is_empty()).await;
    let problem = &t["problems"][0];
    assert!(problem["file"]
        .as_str()
        .unwrap()
        .ends_with("lookup_contact_by_phone.json"));
    assert!(
        problem["path"]
            .as_str()
            .unwrap()
            .starts_with("mock/examples/0"),
        "{problem}"
    );
    assert!(!problem["message"].as_str().unwrap().is_empty());
    let o = op_entry(&t, "lookup_contact_by_phone");
    assert_eq!(o["latest_revision"]["revision"], 1, "nothing changed");
    let r = s.call("GET", &format!("/crm{LOOKUP}"), None, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["totalSize"],
        1,
        "the previous revision keeps serving"
    );
    let m = get(&s, "/metrics").await.text;
    assert!(
        m.lines().any(
            |l| l.starts_with("understudy_reload_problems{integration=\"crm\"}")
                && !l.ends_with(" 0")
        ),
        "{m}"
    );
    // A file that is not JSON at all is a problem too.
    write_raw(&p, "crm", "broken.json", "{ nope");
    let t = until(&s, "crm", |t| {
        t["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["file"].as_str().unwrap().ends_with("broken.json"))
    })
    .await;
    assert!(t["problems"].as_array().unwrap().len() >= 2);
    // Fixed: the problems are gone and the reload applies.
    std::fs::remove_file(p.ops_dir("crm").join("broken.json")).unwrap();
    let mut fixed = support::sf_lookup_op();
    fixed["mock"]["default_variant"] = json!("missing");
    write_op(&p, "crm", &fixed);
    let t = until(&s, "crm", |t| t["problems"] == json!([])).await;
    assert_eq!(
        op_entry(&t, "lookup_contact_by_phone")["latest_revision"]["revision"],
        2
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_revision_is_not_undone_by_an_unchanged_file_but_by_an_edit() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let t = testing(&s, "api").await;
    let hash = op_entry(&t, "bump")["contract_hash"].clone();
    let mut def = support::counter_op()["mock"].clone();
    def["initial_state"]["counter"] = json!(100);
    def["examples"][0]["expected"]["data"]["previous"] = json!(100);
    let r = post(
        &s,
        "/tools/api/testing",
        json!({ "action": "save", "operation_id": "bump", "contract_hash": hash, "definition": def }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["revision"], 2);
    s.stop().await.unwrap();

    // A restart with the unchanged file keeps the saved revision latest.
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    assert_eq!(a.body["pins"]["api/bump"]["revision"], 2);
    let r = s
        .call(
            "POST",
            &format!("{}/counter", a.base("api")),
            Some(&json!({ "n": 1 })),
            &[],
        )
        .await;
    assert_eq!(r.json()["previous"], 100);
    // Editing the file supersedes it.
    let mut op = support::counter_op();
    op["mock"]["initial_state"]["counter"] = json!(-5);
    op["mock"]["examples"][0]["expected"]["data"]["previous"] = json!(-5);
    write_op(&p, "api", &op);
    let t = until(&s, "api", |t| {
        op_entry(t, "bump")["latest_revision"]["revision"] == 3
    })
    .await;
    assert_eq!(op_entry(&t, "bump")["latest_revision"]["source"], "file");
    let b = s.attempt(json!({})).await;
    let r = s
        .call(
            "POST",
            &format!("{}/counter", b.base("api")),
            Some(&json!({ "n": 1 })),
            &[],
        )
        .await;
    assert_eq!(r.json()["previous"], -5);
    let revs = s.app.store.revisions("api/bump").unwrap();
    let sources: Vec<&str> = revs.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(
        sources,
        ["file", "api", "file"],
        "append-only, never relabelled"
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 8. GET /metrics

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    for n in 0..3 {
        s.call(
            "POST",
            &format!("{}/counter", a.base("api")),
            Some(&json!({ "n": n })),
            &[],
        )
        .await;
    }
    s.call(
        "POST",
        &format!("{}/counter", a.base("api")),
        Some(&json!({ "n": "x" })),
        &[],
    )
    .await;
    let r = get(&s, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let m = r.text;
    let value = |prefix: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {m}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        value(
            "understudy_calls_total{integration=\"api\",operation=\"bump\",result_status=\"ok\"}"
        ),
        3.0
    );
    assert_eq!(
        value("understudy_calls_total{integration=\"api\",operation=\"bump\",result_status=\"input_error\"}"),
        1.0
    );
    assert!(m.contains("# TYPE understudy_call_latency_ms histogram"));
    assert_eq!(value("understudy_call_latency_ms_count"), 4.0);
    assert_eq!(value("understudy_call_latency_ms_bucket{le=\"+Inf\"}"), 4.0);
    let buckets: Vec<f64> = m
        .lines()
        .filter(|l| l.starts_with("understudy_call_latency_ms_bucket"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        buckets.windows(2).all(|w| w[0] <= w[1]),
        "cumulative: {buckets:?}"
    );
    assert_eq!(value("understudy_open_attempts"), 1.0);
    assert_eq!(value("understudy_revisions_saved_total"), 0.0);
    // Every sample line is `name{labels} value` or `name value`; comments are HELP/TYPE.
    for l in m.lines() {
        if l.starts_with('#') {
            assert!(l.starts_with("# HELP ") || l.starts_with("# TYPE "), "{l}");
        } else {
            assert!(l.rsplit(' ').next().unwrap().parse::<f64>().is_ok(), "{l}");
        }
    }

    let hash = op_entry(&testing(&s, "api").await, "bump")["contract_hash"].clone();
    let mut def = support::counter_op()["mock"].clone();
    def["initial_state"]["counter"] = json!(7);
    def["examples"][0]["expected"]["data"]["previous"] = json!(7);
    let r = post(
        &s,
        "/tools/api/testing",
        json!({ "action": "save", "operation_id": "bump", "contract_hash": hash, "definition": def }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    s.call("DELETE", &format!("{API}/attempts/{}", a.id), None, &[])
        .await;
    let m = get(&s, "/metrics").await.text;
    assert!(m.contains("\nunderstudy_revisions_saved_total 1\n"), "{m}");
    assert!(m.contains("\nunderstudy_open_attempts 0\n"), "{m}");
    s.stop().await.unwrap();
}
