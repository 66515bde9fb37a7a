//! Record mode (docs/src/guides/record.md, docs/src/reference/https.md): drafts from hand-built exchanges — each draft passes `check` and
//! replays the recorded answers in the recorded order —, secret scrubbing down to the files on
//! disk, the draft writer's safety rules, and the upstream client against real loopback
//! servers (plain HTTP, HTTPS with a test CA made here with rcgen, a wrong CA, a refused
//! connection, an SSE stream that must arrive event by event).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::http::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use understudy::author::record::{
    self, drafts, exchange_input, write_drafts, Call, DraftSet, Exchange, HttpCall, ToolCall,
    ToolOutcome,
};
use understudy::config::Scrub;
use understudy::contract::template::parse_query;
use understudy::contract::ProfileKind;
use understudy::error::HarnessCode;
use understudy::operation::call::execute;
use understudy::operation::check::check_operation;
use understudy::operation::{LoadedOperation, Operation};
use understudy::upstream::{self, prepare_forward, Upstream, UpstreamErrorKind};

// ---- exchanges -------------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn http(
    integration: &str,
    profile: ProfileKind,
    at: u64,
    method: &str,
    path_and_query: &str,
    body: Option<Value>,
    status: u16,
    response: Option<Value>,
    response_headers: &[(&str, &str)],
) -> Exchange {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, parse_query(q)),
        None => (path_and_query, Vec::new()),
    };
    Exchange {
        integration: integration.into(),
        profile,
        matched_operation: None,
        at_ms: at,
        call: Call::Http(HttpCall {
            method: method.into(),
            path: path.into(),
            query,
            request_headers: vec![("Accept".into(), "application/json".into())],
            request_body: body,
            status,
            response_headers: response_headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            response_body: response,
        }),
    }
}

fn sf(
    at: u64,
    method: &str,
    pq: &str,
    body: Option<Value>,
    status: u16,
    resp: Option<Value>,
) -> Exchange {
    let usage = format!("api-usage={at}/15000");
    http(
        "crm",
        ProfileKind::Salesforce,
        at,
        method,
        pq,
        body,
        status,
        resp,
        &[
            ("Sforce-Limit-Info", &usage),
            ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"),
        ],
    )
}

fn rest(at: u64, method: &str, pq: &str, status: u16, resp: Option<Value>) -> Exchange {
    http(
        "api",
        ProfileKind::Rest,
        at,
        method,
        pq,
        None,
        status,
        resp,
        &[],
    )
}

fn tool(at: u64, name: &str, args: Value, outcome: ToolOutcome) -> Exchange {
    Exchange {
        integration: "tools".into(),
        profile: ProfileKind::Mcp,
        matched_operation: None,
        at_ms: at,
        call: Call::Tool(ToolCall {
            name: name.into(),
            arguments: args,
            outcome,
            notifications: Vec::new(),
            asks: Vec::new(),
        }),
    }
}

/// What the agent saw for an HTTP exchange: status and data.
fn recorded(ex: &Exchange) -> (u16, Option<Value>) {
    match &ex.call {
        Call::Http(h) => {
            let data = if h.status == 204 {
                None
            } else {
                h.response_body.clone()
            };
            (h.status, data)
        }
        Call::Tool(_) | Call::Mcp(_) => unreachable!(),
    }
}

fn file(set: &DraftSet, id: &str) -> understudy::author::record::DraftFile {
    set.files
        .iter()
        .find(|f| f.operation_id == id)
        .cloned()
        .unwrap_or_else(|| {
            let ids: Vec<&str> = set.files.iter().map(|f| f.operation_id.as_str()).collect();
            panic!("no draft `{id}`; drafts: {ids:?}; notes: {:#?}", set.notes)
        })
}

/// Every draft passes `check`, and replaying the exchanges in order against the drafts
/// (routing like `serve`: the most specific operation whose match holds; state carried)
/// returns each recorded answer. Returns the rendered results.
fn assert_replays(set: &DraftSet, exchanges: &[Exchange]) -> Vec<Value> {
    let profile = set.profile;
    for f in &set.files {
        assert!(
            f.problems.is_empty(),
            "{}: {:#?}\nnotes: {:#?}",
            f.operation_id,
            f.problems,
            set.notes
        );
        let p = check_operation(
            &f.op,
            profile,
            Path::new(&format!("{}.json", f.operation_id)),
        );
        assert!(p.is_empty(), "{}: {p:#?}", f.operation_id);
    }
    let ops: Vec<Operation> = set
        .files
        .iter()
        .map(|f| {
            let loaded = LoadedOperation {
                file: format!("{}.json", f.operation_id).into(),
                contract_hash: f.op.contract_hash(profile),
                op: f.op.clone(),
            };
            Operation::compile(&set.integration, profile, loaded).expect("compiles")
        })
        .collect();
    let mut state = Map::new();
    for op in &ops {
        state.extend(op.engine().unwrap().expect("a mock").initial_state());
    }
    let mut results = Vec::new();
    for (i, ex) in exchanges.iter().enumerate() {
        let op = ops
            .iter()
            .filter(|o| match &ex.call {
                Call::Tool(t) => o.id() == t.name,
                Call::Http(_) => exchange_input(&o.op, profile, ex).is_ok(),
                Call::Mcp(_) => false,
            })
            .max_by_key(|o| o.matcher.as_ref().map(|m| m.specificity()))
            .unwrap_or_else(|| panic!("exchange {i} matches no draft"));
        let input = exchange_input(&op.op, profile, ex).unwrap();
        let r = execute(op, &input, None, Some(&state));
        assert!(
            r.error.is_none(),
            "exchange {i} ({}): {:?}",
            op.id(),
            r.error
        );
        let result = r.result.clone().unwrap();
        match &ex.call {
            Call::Http(_) => {
                let (status, data) = recorded(ex);
                assert_eq!(
                    result["status"],
                    json!(status),
                    "exchange {i} ({}) status",
                    op.id()
                );
                assert_eq!(
                    result.get("data").cloned(),
                    data,
                    "exchange {i} ({}) data",
                    op.id()
                );
            }
            Call::Tool(t) => {
                let ToolOutcome::Result(expected) = &t.outcome else {
                    unreachable!()
                };
                assert_eq!(result["content"], expected["content"], "exchange {i}");
                assert_eq!(
                    result.get("isError"),
                    expected.get("isError"),
                    "exchange {i}"
                );
            }
            Call::Mcp(_) => unreachable!("no operation matches an MCP listing"),
        }
        state.extend(r.state_patch);
        results.push(result);
    }
    results
}

fn sf_id(id15: &str) -> String {
    understudy::profile::salesforce::to_18(id15)
}

// ---- drafts ----------------------------------------------------------------------------

#[test]
fn salesforce_lookup_create_lookup_becomes_a_state_sequence() {
    let ada = sf_id("0035g00000AbCdE");
    let grace = sf_id("0035g00000XyZwV");
    let q = "SELECT Id, FirstName FROM Contact WHERE Phone = '555-0100'";
    let query = format!("/services/data/v60.0/query?q={}", q.replace(' ', "+"));
    let empty = json!({"totalSize": 0, "done": true, "records": []});
    let found = json!({"totalSize": 1, "done": true, "records": [
        {"attributes": {"type": "Contact", "url": format!("/services/data/v60.0/sobjects/Contact/{ada}")}, "Id": ada, "FirstName": "Ada"}]});
    let record = json!({"attributes": {"type": "Contact"}, "Id": ada, "FirstName": "Ada", "Phone": "555-0100"});
    let not_found =
        json!([{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}]);
    let exchanges = vec![
        sf(1, "GET", &query, None, 200, Some(empty.clone())),
        sf(
            2,
            "POST",
            "/services/data/v60.0/sobjects/Contact/",
            Some(json!({"FirstName": "Ada", "Phone": "555-0100"})),
            201,
            Some(json!({"id": ada, "success": true, "errors": []})),
        ),
        sf(3, "GET", &query, None, 200, Some(found.clone())),
        sf(
            4,
            "GET",
            &format!("/services/data/v60.0/sobjects/Contact/{ada}"),
            None,
            200,
            Some(record.clone()),
        ),
        sf(
            5,
            "GET",
            &format!("/services/data/v60.0/sobjects/Contact/{grace}"),
            None,
            404,
            Some(not_found.clone()),
        ),
        sf(6, "GET", &query, None, 200, Some(found.clone())),
        sf(
            7,
            "PATCH",
            &format!("/services/data/v60.0/sobjects/Contact/{ada}"),
            Some(json!({"Phone": "555-0199"})),
            204,
            None,
        ),
    ];
    let set = drafts(&exchanges, &[], ProfileKind::Salesforce, &Scrub::default());
    assert_eq!(
        set,
        drafts(&exchanges, &[], ProfileKind::Salesforce, &Scrub::default()),
        "deterministic"
    );
    let mut ids: Vec<&str> = set.files.iter().map(|f| f.operation_id.as_str()).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "get_query",
            "get_sobjects_contact_id",
            "patch_sobjects_contact_id",
            "post_sobjects_contact"
        ],
        "{:#?}",
        set.notes
    );

    // The query: literal SOQL (it never varied), a step counter, three variants.
    let q_op = file(&set, "get_query").op;
    let m = q_op.match_spec.as_ref().unwrap();
    assert_eq!(m.path, "/services/data/*/query");
    assert_eq!(m.query["q"], q);
    let mock = q_op.mock.as_ref().unwrap();
    assert_eq!(mock["default_variant"], "recorded");
    assert_eq!(mock["initial_state"], json!({"get_query_step": 0}));
    let variants: Vec<&String> = mock["variants"].as_object().unwrap().keys().collect();
    assert_eq!(variants, ["ok", "ok_empty", "recorded"]);
    assert_eq!(
        mock["contract_hash"],
        json!(q_op.contract_hash(understudy::contract::ProfileKind::Salesforce))
    );
    assert!(mock["examples"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["state"] == json!({"get_query_step": 1})));
    // Headers: the meaningful one kept, per step; `Date` dropped.
    assert_eq!(
        mock["variants"]["recorded"]["rules"][0]["result"]["headers"],
        json!({"Sforce-Limit-Info": "api-usage=1/15000"})
    );

    // Get by 18-character id: a `{id}` template, one variant per outcome.
    let get = file(&set, "get_sobjects_contact_id").op;
    assert_eq!(
        get.match_spec.as_ref().unwrap().path,
        "/services/data/*/sobjects/Contact/{id}"
    );
    assert_eq!(
        get.input_schema["properties"]["id"],
        json!({"type": "string"})
    );
    assert_eq!(get.input_schema["required"], json!(["id"]));
    let gv: Vec<&String> = get.mock.as_ref().unwrap()["variants"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(gv, ["not_found", "ok", "recorded"]);

    // Create: the body is the input; 201 answered as recorded.
    let create = file(&set, "post_sobjects_contact").op;
    assert_eq!(
        create.input_schema["properties"]["FirstName"],
        json!({"type": "string"})
    );
    assert_eq!(create.mock.as_ref().unwrap()["default_variant"], "created");
    assert_eq!(
        create.mock.as_ref().unwrap()["variants"]["created"]["result"]["data"],
        json!({"id": ada, "success": true, "errors": []})
    );
    // Update: 204 without data.
    let patch = file(&set, "patch_sobjects_contact_id").op;
    assert_eq!(
        patch.mock.as_ref().unwrap()["variants"]["no_content"]["result"],
        json!({"status": 204, "headers": {"Sforce-Limit-Info": "api-usage=7/15000"}})
    );

    let results = assert_replays(&set, &exchanges);
    assert_eq!(results[0]["data"], empty);
    assert_eq!(results[2]["data"], found);
    assert_eq!(
        results[5]["data"], found,
        "the last answer repeats after the sequence"
    );
    assert_eq!(
        results[0]["headers"]["Sforce-Limit-Info"],
        "api-usage=1/15000"
    );
    assert_eq!(
        results[2]["headers"]["Sforce-Limit-Info"],
        "api-usage=3/15000"
    );
}

#[test]
fn varying_soql_becomes_a_template_with_a_named_capture() {
    let q = |phone: &str| {
        format!("/services/data/v61.0/query?q=SELECT+Id+FROM+Contact+WHERE+Phone+%3D+%27{phone}%27")
    };
    let rec = |id: &str| json!({"totalSize": 1, "done": true, "records": [{"Id": id}]});
    let exchanges = vec![
        sf(1, "GET", &q("555-0100"), None, 200, Some(rec("a"))),
        sf(2, "GET", &q("555-0177"), None, 200, Some(rec("b"))),
        sf(3, "GET", &q("555-0100"), None, 200, Some(rec("a"))),
    ];
    let set = drafts(&exchanges, &[], ProfileKind::Salesforce, &Scrub::default());
    let op = file(&set, "get_query").op;
    assert_eq!(
        op.match_spec.as_ref().unwrap().query["q"],
        "SELECT Id FROM Contact WHERE Phone = '{phone}'"
    );
    assert_eq!(op.input_schema["required"], json!(["phone"]));
    let mock = op.mock.as_ref().unwrap();
    assert!(
        mock.get("initial_state").is_none(),
        "no sequence: each phone always got one answer"
    );
    assert_eq!(
        mock["variants"]["ok"]["rules"][0]["when"],
        json!([{"source": "input", "path": "phone", "op": "eq", "value": "555-0177"}])
    );
    assert_replays(&set, &exchanges);
}

#[test]
fn uuid_and_numeric_ids_become_captures() {
    let o1 = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
    let o2 = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
    let exchanges = vec![
        rest(
            1,
            "GET",
            &format!("/api/orders/{o1}/items/42"),
            200,
            Some(json!({"sku": "A", "qty": 1})),
        ),
        rest(
            2,
            "GET",
            &format!("/api/orders/{o2}/items/7"),
            200,
            Some(json!({"sku": "B", "qty": 2.5})),
        ),
        rest(
            3,
            "GET",
            &format!("/api/orders/{o1}/items/42"),
            200,
            Some(json!({"sku": "A", "qty": 1})),
        ),
        rest(4, "GET", "/api/orders/me", 200, Some(json!({"orders": []}))),
    ];
    let set = drafts(&exchanges, &[], ProfileKind::Rest, &Scrub::default());
    let op = file(&set, "get_api_orders_id_items_id2").op;
    assert_eq!(
        op.match_spec.as_ref().unwrap().path,
        "/api/orders/{id}/items/{id2}"
    );
    assert_eq!(
        op.output_schema["properties"]["data"]["properties"]["qty"],
        json!({"type": "number"})
    );
    assert_eq!(op.output_schema["required"], json!(["data", "status"]));
    let me = file(&set, "get_api_orders_me").op;
    assert_eq!(me.match_spec.as_ref().unwrap().path, "/api/orders/me");
    assert_eq!(me.mock.as_ref().unwrap()["default_variant"], "ok_empty");
    assert_replays(&set, &exchanges);
}

#[test]
fn limits_are_respected_and_said() {
    let mut exchanges: Vec<Exchange> = (0..130)
        .map(|n| {
            rest(
                n,
                "GET",
                &format!("/items/{n}"),
                200,
                Some(json!({"id": n, "name": format!("item {n}")})),
            )
        })
        .collect();
    exchanges.push(rest(
        200,
        "GET",
        "/big",
        200,
        Some(json!((0..120).collect::<Vec<_>>())),
    ));
    // A job polled 120 times with a new answer each time: a sequence longer than the rules allow.
    for n in 0..120 {
        exchanges.push(rest(
            300 + n,
            "GET",
            "/jobs/status",
            200,
            Some(json!({"progress": n})),
        ));
    }
    let blob = "x".repeat(5_000);
    exchanges.push(rest(
        201,
        "GET",
        "/huge",
        200,
        Some(
            json!({"records": (0..30).map(|i| json!({"i": i, "blob": blob})).collect::<Vec<_>>()}),
        ),
    ));
    let set = drafts(&exchanges, &[], ProfileKind::Rest, &Scrub::default());
    for f in &set.files {
        assert!(
            f.problems.is_empty(),
            "{}: {:?}",
            f.operation_id,
            f.problems
        );
        let size = serde_json::to_string(f.op.mock.as_ref().unwrap())
            .unwrap()
            .len();
        assert!(size <= 100_000, "{}: {size} bytes", f.operation_id);
    }
    let items = file(&set, "get_items_id").op;
    let mock = items.mock.as_ref().unwrap();
    assert!(mock["examples"].as_array().unwrap().len() <= 100);
    assert!(mock["variants"]["ok"]["rules"].as_array().unwrap().len() <= 100);
    let notes = set.notes.join("\n");
    assert!(
        notes.contains("api/get_items_id: 29 recorded input(s) left out of variant `ok`"),
        "{notes}"
    );
    assert!(
        notes.contains("api/get_items_id: 100 of 101 examples kept"),
        "{notes}"
    );
    assert!(
        notes.contains("api/get_big: 1 array(s) in recorded answers were longer than 50 items"),
        "{notes}"
    );
    assert!(
        notes.contains("api/get_huge: over 100 KB: arrays in answers cut to 10"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "api/get_jobs_status: a sequence of 120 answers to one input was cut to its first 101"
        ),
        "{notes}"
    );
    assert_eq!(
        file(&set, "get_big").op.mock.as_ref().unwrap()["variants"]["ok"]["result"]["data"]
            .as_array()
            .unwrap()
            .len(),
        50
    );
    // The first 101 items still replay as recorded (the rest get the fallback answer).
    assert_replays(&set, &exchanges[..100]);
}

#[test]
fn mcp_tool_calls_become_call_tool_result_drafts() {
    let shipped = json!({"content": [{"type": "text", "text": "{\"status\":\"shipped\"}"}], "structuredContent": {"status": "shipped"}, "_meta": {"x": 1}});
    let delivered = json!({"content": [{"type": "text", "text": "{\"status\":\"delivered\"}"}], "structuredContent": {"status": "delivered"}});
    let missing = json!({"content": [{"type": "text", "text": "no such order"}], "isError": true});
    let exchanges = vec![
        tool(
            1,
            "order_status",
            json!({"order_id": "A1"}),
            ToolOutcome::Result(shipped),
        ),
        tool(
            2,
            "order_status",
            json!({"order_id": "Z9"}),
            ToolOutcome::Result(missing),
        ),
        tool(
            3,
            "order_status",
            json!({"order_id": "A1"}),
            ToolOutcome::Result(delivered),
        ),
        tool(
            4,
            "order_status",
            json!({"order_id": "A1"}),
            ToolOutcome::Error(json!({"code": -32603, "message": "boom"})),
        ),
        tool(
            5,
            "Bad Name",
            json!({}),
            ToolOutcome::Result(json!({"content": []})),
        ),
    ];
    let set = drafts(&exchanges, &[], ProfileKind::Mcp, &Scrub::default());
    assert_eq!(set.files.len(), 1);
    let op = file(&set, "order_status").op;
    assert_eq!(
        op.result_form,
        Some(understudy::contract::ResultForm::CallToolResult)
    );
    assert_eq!(
        op.input_schema["properties"]["order_id"],
        json!({"type": "string"})
    );
    let mock = op.mock.as_ref().unwrap();
    let variants: Vec<&String> = mock["variants"].as_object().unwrap().keys().collect();
    assert_eq!(variants, ["ok", "recorded", "tool_error"]);
    assert!(mock["variants"]["ok"]["result"].get("_meta").is_none());
    let notes = set.notes.join("\n");
    assert!(notes.contains("JSON-RPC error -32603"), "{notes}");
    assert!(notes.contains("tool `Bad Name` skipped"), "{notes}");
    assert_replays(&set, &exchanges[..3]);
}

#[test]
fn matched_operations_keep_their_contract_and_are_never_overwritten() {
    let contract = json!({
        "operation_id": "get_account",
        "description": "Read one account",
        "match": {"method": "GET", "path": "/services/data/*/sobjects/Account/{account_id}"},
        "input_schema": {"type": "object", "properties": {"account_id": {"type": "string"}}, "required": ["account_id"]},
        "output_schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("get_account.json");
    std::fs::write(&path, serde_json::to_string_pretty(&contract).unwrap()).unwrap();
    let loaded = understudy::operation::load::load_file(
        &path,
        understudy::contract::ProfileKind::Salesforce,
    )
    .unwrap();
    let acc = sf_id("0015000000Gv7qJ");
    let mut ex = sf(
        1,
        "GET",
        &format!("/services/data/v60.0/sobjects/Account/{acc}"),
        None,
        200,
        Some(json!({"Id": acc, "Name": "Acme"})),
    );
    ex.matched_operation = Some("get_account".into());
    let exchanges = vec![ex];
    let set = drafts(
        &exchanges,
        std::slice::from_ref(&loaded),
        ProfileKind::Salesforce,
        &Scrub::default(),
    );
    let f = file(&set, "get_account");
    assert!(f.existing);
    assert_eq!(f.op.description.as_deref(), Some("Read one account"));
    assert_eq!(*f.op.input_schema, contract["input_schema"]);
    assert_eq!(*f.op.output_schema, contract["output_schema"]);
    assert_eq!(
        f.op.mock.as_ref().unwrap()["contract_hash"],
        json!(loaded.contract_hash)
    );
    assert_replays(&set, &exchanges);

    // Same contract, no mock yet: the mock is added in place.
    let written = write_drafts(dir.path(), &set).unwrap();
    assert_eq!(written[0], path);
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(back["description"], "Read one account");
    assert!(back.get("mock").is_some());
    // Now it has a mock: a second draft goes beside it, the file stays as it is.
    let before = std::fs::read_to_string(&path).unwrap();
    let written = write_drafts(dir.path(), &set).unwrap();
    assert_eq!(written[0], dir.path().join("get_account.json.draft"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
}

// ---- scrubbing and the writer ----------------------------------------------------------

#[test]
fn secrets_never_reach_the_written_files() {
    let mut login = http(
        "crm",
        ProfileKind::Salesforce,
        1,
        "POST",
        "/services/data/v60.0/sobjects/Contact?access_token=QUERYSECRET777",
        Some(
            json!({"FirstName": "Ada", "access_token": "BODYSECRET888", "ssn": "078-05-1120", "nested": {"Password": "hunter2hunter2"}}),
        ),
        201,
        Some(
            json!({"id": sf_id("0035g00000AbCdE"), "success": true, "errors": [], "sessionId": "RESPSESSION999"}),
        ),
        &[
            ("Set-Cookie", "sid=SETCOOKIE12345; Path=/"),
            ("Location", "/x?token=BEARERSECRET123"),
        ],
    );
    if let Call::Http(h) = &mut login.call {
        h.request_headers
            .push(("Authorization".into(), "Bearer BEARERSECRET123".into()));
        h.request_headers
            .push(("Cookie".into(), "sid=COOKIESECRET456".into()));
        h.request_headers
            .push(("X-Api-Key".into(), "APIKEYSECRET789".into()));
    }
    let exchanges = vec![login];
    let scrub = Scrub {
        headers: vec![],
        fields: vec!["ssn".into()],
    };
    let set = drafts(&exchanges, &[], ProfileKind::Salesforce, &scrub);
    let dir = tempfile::tempdir().unwrap();
    let written = write_drafts(dir.path(), &set).unwrap();
    assert!(
        written
            .iter()
            .any(|p| p.ends_with("post_sobjects_contact.json")),
        "{written:?}"
    );
    assert!(written.iter().any(|p| p.ends_with(record::NOTES_FILE)));
    let secrets = [
        "QUERYSECRET777",
        "BODYSECRET888",
        "078-05-1120",
        "hunter2hunter2",
        "RESPSESSION999",
        "SETCOOKIE12345",
        "BEARERSECRET123",
        "COOKIESECRET456",
        "APIKEYSECRET789",
    ];
    let mut all = String::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        for s in secrets {
            assert!(
                !text.contains(s),
                "{s} leaked into {}:\n{text}",
                p.display()
            );
        }
        all.push_str(&text);
    }
    // The places are said, never the values.
    for place in [
        "request.query.access_token",
        "request.body.access_token",
        "request.body.ssn",
        "request.body.nested.Password",
        "response.body.sessionId",
    ] {
        assert!(all.contains(place), "{place} not reported:\n{all}");
    }
    // A scrubbed query parameter is no match constraint (replay would never send "[scrubbed]").
    let op = file(&set, "post_sobjects_contact").op;
    assert!(op.match_spec.as_ref().unwrap().query.is_empty());
    let rules = &op.mock.as_ref().unwrap()["variants"]["created"];
    assert!(!rules.to_string().contains("QUERYSECRET777"));
}

#[test]
fn the_writer_refuses_traversal_and_symlinks() {
    let exchanges = vec![rest(1, "GET", "/ping", 200, Some(json!({"ok": true})))];
    let mut set = drafts(&exchanges, &[], ProfileKind::Rest, &Scrub::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut evil = set.clone();
    evil.files[0].operation_id = "../evil".into();
    evil.files[0].op.operation_id = "../evil".into();
    let e = write_drafts(&out, &evil).unwrap_err();
    assert!(e.contains("not a valid operation id"), "{e}");
    assert!(!dir.path().join("evil.json").exists());

    let target = dir.path().join("elsewhere.json");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, out.join("get_ping.json")).unwrap();
    let e = write_drafts(&out, &set).unwrap_err();
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

    std::fs::remove_file(out.join("get_ping.json")).unwrap();
    set.notes.clear();
    let written = write_drafts(&out, &set).unwrap();
    assert_eq!(written, vec![out.join("get_ping.json")]);
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
    assert_eq!(back["operation_id"], "get_ping");
    // Only the drafts are in the directory: no temporary file left behind.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

// ---- upstream: loopback servers --------------------------------------------------------

type TestBody = UnsyncBoxBody<Bytes, Infallible>;

/// A body fed by a channel: each message is one frame; the stream ends when the sender drops.
struct ChannelBody(mpsc::UnboundedReceiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

fn full(body: impl Into<Bytes>) -> TestBody {
    Full::new(body.into()).boxed_unsync()
}

/// A server on 127.0.0.1:0 (HTTP/1.1 and HTTP/2; TLS when `tls` is given).
async fn serve<F, Fut>(tls: Option<Arc<rustls::ServerConfig>>, handler: F) -> SocketAddr
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<TestBody>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let handler = handler.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let h = handler.clone();
                    async move { Ok::<_, Infallible>(h(req).await) }
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                match acceptor {
                    Some(a) => {
                        if let Ok(stream) = a.accept(tcp).await {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            });
        }
    });
    addr
}

/// Answers with what it received: method, path and query, HTTP version, headers.
async fn echo(req: Request<Incoming>) -> Response<TestBody> {
    let mut headers: Map<String, Value> = Map::new();
    for (k, v) in req.headers() {
        let e = headers
            .entry(k.as_str().to_string())
            .or_insert_with(|| json!([]));
        e.as_array_mut()
            .unwrap()
            .push(json!(v.to_str().unwrap_or("?")));
    }
    let seen = json!({
        "method": req.method().as_str(),
        "uri": req.uri().path_and_query().map(|p| p.as_str()).unwrap_or(""),
        "version": format!("{:?}", req.version()),
        "headers": headers,
    });
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let mut out = seen;
    out["body"] = json!(String::from_utf8_lossy(&body));
    Response::builder()
        .header("content-type", "application/json")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "1")
        .body(full(out.to_string()))
        .unwrap()
}

fn header_map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

async fn json_body(resp: Response<Incoming>) -> Value {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// A test CA (rcgen) and a leaf for 127.0.0.1 and localhost signed by it: (CA PEM, server config).
fn test_ca() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "understudy record test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        leaf_key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (ca.pem(), Arc::new(config))
}

#[tokio::test]
async fn plain_http_forward_strips_understudy_and_hop_by_hop_headers() {
    let addr = serve(None, echo).await;
    let up = Upstream::new(None, upstream::DEFAULT_TIMEOUT).unwrap();
    let incoming = header_map(&[
        ("host", "127.0.0.1:7777"),
        ("understudy-attempt", "secret-token"),
        ("connection", "keep-alive, x-private"),
        ("x-private", "hop"),
        ("keep-alive", "timeout=5"),
        ("proxy-authorization", "Basic dG9rZW46"),
        ("te", "trailers"),
        ("authorization", "Bearer real-credential"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("tracestate", "vendor=1"),
        ("content-type", "application/json"),
        ("content-length", "999"),
    ]);
    let base = format!("http://{addr}/base/");
    let p = prepare_forward(
        &Method::POST,
        &base,
        "/services/data/v60.0/query?q=SELECT+Id",
        &incoming,
    )
    .unwrap();
    let resp = up
        .forward(p.into_request(Bytes::from_static(b"{\"a\":1}")))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut relayed = resp.headers().clone();
    upstream::strip_response_headers(&mut relayed);
    assert!(relayed.get("x-hop").is_none() && relayed.get("connection").is_none());
    let seen = json_body(resp).await;
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["uri"], "/base/services/data/v60.0/query?q=SELECT+Id");
    assert_eq!(seen["version"], "HTTP/1.1");
    assert_eq!(seen["body"], "{\"a\":1}");
    let h = &seen["headers"];
    for gone in [
        "understudy-attempt",
        "x-private",
        "keep-alive",
        "proxy-authorization",
        "te",
    ] {
        assert!(h.get(gone).is_none(), "{gone} reached the upstream: {h}");
    }
    assert_eq!(h["host"], json!([addr.to_string()]));
    assert_eq!(h["authorization"], json!(["Bearer real-credential"]));
    assert_eq!(
        h["traceparent"],
        json!(["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"])
    );
    assert_eq!(h["tracestate"], json!(["vendor=1"]));
    assert_eq!(h["content-length"], json!(["7"]));
    assert_eq!(h["accept-encoding"], json!(["identity"]));
}

#[tokio::test]
async fn https_upstream_trusted_through_the_upstream_ca_file_speaks_h2() {
    let (ca_pem, config) = test_ca();
    let addr = serve(Some(config), echo).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("upstream-ca.pem");
    // Several certificates in one file: another CA first, ours second.
    let (other_pem, _) = test_ca();
    std::fs::write(&ca_file, format!("{other_pem}{ca_pem}")).unwrap();
    let up = Upstream::new(Some(&ca_file), upstream::DEFAULT_TIMEOUT).unwrap();
    for _ in 0..2 {
        let resp = up
            .forward_parts(
                &Method::GET,
                &format!("https://127.0.0.1:{}", addr.port()),
                "/v1/ping",
                &HeaderMap::new(),
                Bytes::new(),
            )
            .await
            .unwrap();
        assert_eq!(resp.version(), Version::HTTP_2, "ALPN picks h2");
        let seen = json_body(resp).await;
        assert_eq!(seen["uri"], "/v1/ping");
        assert_eq!(seen["version"], "HTTP/2.0");
    }
}

#[tokio::test]
async fn a_wrong_ca_is_upstream_unavailable_naming_tls() {
    let (_, config) = test_ca();
    let addr = serve(Some(config), echo).await;
    let (wrong_pem, _) = test_ca();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("wrong.pem");
    std::fs::write(&ca_file, wrong_pem).unwrap();
    let up = Upstream::new(Some(&ca_file), upstream::DEFAULT_TIMEOUT).unwrap();
    let e = up
        .forward_parts(
            &Method::GET,
            &format!("https://127.0.0.1:{}", addr.port()),
            "/",
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::Tls, "{e}");
    let h = e.to_harness();
    assert_eq!(h.code, HarnessCode::UpstreamUnavailable);
    assert!(h.message.contains("TLS"), "{}", h.message);
    assert!(
        h.message.contains(&format!("127.0.0.1:{}", addr.port())),
        "{}",
        h.message
    );
}

#[tokio::test]
async fn connect_refused_is_upstream_unavailable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let up = Upstream::new(None, Duration::from_secs(30)).unwrap();
    let e = up
        .forward_parts(
            &Method::GET,
            &format!("http://127.0.0.1:{port}"),
            "/x",
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::Connect, "{e}");
    assert!(e.to_string().contains("refused"), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    assert_eq!(e.to_harness().code, HarnessCode::UpstreamUnavailable);
}

#[tokio::test]
async fn sse_streams_event_by_event() {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let release = Arc::new(Mutex::new(Some(release_rx)));
    let addr = serve(None, move |_req: Request<Incoming>| {
        let release = release.clone();
        async move {
            let (tx, rx) = mpsc::unbounded_channel();
            let wait = release.lock().unwrap().take();
            tokio::spawn(async move {
                let _ = tx.send(Bytes::from_static(b"id: 1\ndata: {\"n\":1}\n\n"));
                if let Some(w) = wait {
                    let _ = w.await;
                }
                let _ = tx.send(Bytes::from_static(b"id: 2\ndata: {\"n\":2}\n\n"));
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(ChannelBody(rx).boxed_unsync())
                .unwrap()
        }
    })
    .await;
    let up = Upstream::new(None, upstream::DEFAULT_TIMEOUT).unwrap();
    let resp = up
        .forward_parts(
            &Method::POST,
            &format!("http://{addr}/mcp"),
            "",
            &header_map(&[("accept", "text/event-stream")]),
            Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    // Record mode tees the stream: the agent's copy flows, the recorder gets it at the end.
    let (mut body, captured) = upstream::tee(resp.into_body(), 1 << 20);
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(
        &first[..],
        b"id: 1\ndata: {\"n\":1}\n\n",
        "event 1 arrives while the upstream still holds event 2"
    );
    release_tx.send(()).unwrap();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"id: 2\ndata: {\"n\":2}\n\n");
    let c = captured.await.unwrap();
    assert!(c.complete && !c.truncated);
    assert_eq!(
        &c.bytes[..],
        b"id: 1\ndata: {\"n\":1}\n\nid: 2\ndata: {\"n\":2}\n\n"
    );
}
