//! The replay proxy end to end: a real server on port 0 with a real sled store in a temp dir.
//! One test (or a small group) per numbered point of the issue "The replay proxy: server,
//! routing, attempts, Salesforce and REST profiles, sled store, evidence".

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{json, Value};
use understudy::app::attempt::{Clock, ManualClock, SystemClock};
use understudy::app::{App, StartError};

use crate::support::{self, mock, rest_op, standard_project, Project, Server};

// ---------------------------------------------------------------------------------------------
// 1. serve: HTTP/1.1 and h2c, project file, readiness, shutdown

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_and_h2c_share_one_listener() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let path = "/crm/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'";
    let r1 = s.call("GET", path, None, &[]).await;
    assert_eq!(r1.status, 200, "{}", r1.text);
    let h2 = support::h2c_client();
    let r2 = support::send(&h2, "GET", &s.url(path), None, &[]).await;
    assert_eq!(r2.status, 200, "{}", r2.text);
    assert_eq!(r1.json(), r2.json());
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let r = s.call("GET", "/_understudy/api/health", None, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(r.json()["mode"], "replay");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_in_flight_calls() {
    let p = Project::new(&[("api", "rest")]);
    let result = json!({ "status": 200, "data": { "slow": true } });
    let mut m = mock(result, json!({}));
    m["variants"]["ok"]["delay_ms"] = json!(400);
    p.op("api", rest_op("slow", "GET", "/slow", Some(m)));
    let mut s = Server::start(&p).await;
    let client = s.http.clone();
    let url = s.url("/api/slow");
    let call = tokio::spawn(async move { support::send(&client, "GET", &url, None, &[]).await });
    // Wait until the call is recorded (it is then sleeping its delay), then shut down.
    let id = s.default_attempt();
    loop {
        if !s.app.store.evidence(&id).unwrap().is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let _ = s.take_stop().send(());
    let r = call.await.unwrap();
    assert_eq!(r.status, 200, "the in-flight call completes: {}", r.text);
    assert_eq!(r.json(), json!({ "slow": true }));
    s.join().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_is_slept_after_the_state_lock_is_released() {
    let p = Project::new(&[("api", "rest")]);
    let mut m = mock(
        json!({ "status": 200, "data": { "slow": true } }),
        json!({}),
    );
    m["variants"]["ok"]["delay_ms"] = json!(3000);
    p.op("api", rest_op("slow", "GET", "/slow", Some(m)));
    p.op("api", support::counter_op());
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let client = s.http.clone();
    let url = s.url(&format!("{}/slow", a.base("api")));
    let slow = tokio::spawn(async move { support::send(&client, "GET", &url, None, &[]).await });
    loop {
        if !s.app.store.evidence(&a.id).unwrap().is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    // The slow call is recorded and sleeping; another call of the same attempt goes through.
    let r = s
        .call(
            "POST",
            &format!("{}/counter", a.base("api")),
            Some(&json!({ "n": 1 })),
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(
        !slow.is_finished(),
        "the fast call did not wait for the slow call's delay"
    );
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["tool_events"][0]["delay_ms"], 3000);
    slow.abort();
}

// ---------------------------------------------------------------------------------------------
// 2. routing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_salesforce_and_jsforce_query_shapes_match_one_operation() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // simple-salesforce: trailing slash, `+` for spaces.
    let a = s
        .call(
            "GET",
            "/crm/services/data/v59.0/query/?q=SELECT+Id%2C+FirstName+FROM+Contact+WHERE+Phone+%3D+%27%2B15550001%27",
            None,
            &[],
        )
        .await;
    // jsforce: no trailing slash, `%20`.
    let b = s
        .call(
            "GET",
            "/crm/services/data/v59.0/query?q=SELECT%20Id%2C%20FirstName%20FROM%20Contact%20WHERE%20Phone%20%3D%20'%2B15550001'",
            None,
            &[],
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(b.status, 200, "{}", b.text);
    assert_eq!(a.json(), b.json());
    assert_eq!(a.json()["records"][0]["FirstName"], "Ada");
    assert_eq!(a.header("content-type"), Some("application/json"));
    let ev = s.evidence(&s.default_attempt()).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    for e in events {
        assert_eq!(e["operation_id"], "lookup_contact_by_phone");
        assert_eq!(e["arguments"], json!({ "phone": "+15550001" }));
        assert_eq!(e["result_status"], "ok");
        assert_eq!(e["is_write"], false);
        assert_eq!(e["variant"], "found");
        assert_eq!(e["revision"], 1);
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_request_names_closest_operations_and_first_difference() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let r = s
        .call(
            "GET",
            "/crm/services/data/v59.0/sobjects/Contact/describe",
            None,
            &[],
        )
        .await;
    // The describe matches the built-in `sobject_describe` template, which has no default
    // answer, so it is a known operation without a mock (`no_mock`), and the message still
    // names the closest operation file.
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("no_mock"));
    let body = r.json();
    assert_eq!(body["understudy_error"]["kind"], "harness_error");
    let msg = body["understudy_error"]["message"].as_str().unwrap();
    assert!(msg.contains("`sobject_describe`"), "{msg}");
    assert!(
        msg.contains("`lookup_contact_by_phone`: path segment 4: expected `query`"),
        "{msg}"
    );
    // A path that matches nothing at all is `unmatched_request`.
    let r = s
        .call("DELETE", "/crm/services/data/v59.0/query", None, &[])
        .await;
    assert_eq!(r.status, 500);
    let msg = r.json()["understudy_error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("closest"), "{msg}");
    // The built-in DELETE templates share the method, so they rank first, each with the
    // first thing that differed.
    assert!(
        msg.contains(
            "`collections_delete` (built-in): path segment 4: expected `composite`, got `query`"
        ),
        "{msg}"
    );
    // Unknown integration.
    let r = s.call("GET", "/nope/x", None, &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("unmatched_request"));
    let msg = r.json()["understudy_error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("/crm") && msg.contains("/api"), "{msg}");
    // Evidence records them as harness errors; the verdict fails.
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["verdict"], "fail");
    assert_eq!(ev["harness_errors"].as_array().unwrap().len(), 3);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_specific_operation_wins() {
    let p = Project::new(&[("api", "rest")]);
    let generic = json!({ "status": 200, "data": { "which": "generic" } });
    let special = json!({ "status": 200, "data": { "which": "me" } });
    p.op(
        "api",
        rest_op(
            "get_user",
            "GET",
            "/users/{id}",
            Some(mock(generic, json!({ "id": "1" }))),
        ),
    );
    p.op(
        "api",
        rest_op("get_me", "GET", "/users/me", Some(mock(special, json!({})))),
    );
    let s = Server::start(&p).await;
    let r = s.call("GET", "/api/users/me", None, &[]).await;
    assert_eq!(r.json()["which"], "me");
    let r = s.call("GET", "/api/users/42", None, &[]).await;
    assert_eq!(r.json()["which"], "generic");
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 3. pipeline: input building, validation, evaluation, output validation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_errors_use_the_native_shape_and_do_not_fail_the_attempt() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // Salesforce: a phone that fails the input schema's pattern.
    let r = s
        .call(
            "GET",
            "/crm/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'abc'",
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let body = r.json();
    let first = &body[0];
    assert_eq!(first["errorCode"], "INVALID_FIELD");
    assert_eq!(first["fields"], json!(["phone"]));
    assert!(first["message"].as_str().unwrap().contains("input schema"));
    // Salesforce: malformed JSON body.
    let r = s
        .call_raw(
            "PATCH",
            "/crm/services/data/v59.0/sobjects/Contact/003A",
            "{not json",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.json()[0]["message"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    // rest: `{"error":{"message","details"}}`.
    let r = s
        .call("POST", "/api/counter", Some(&json!({ "n": "x" })), &[])
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let body = r.json();
    assert!(body["error"]["message"].is_string());
    assert!(!body["error"]["details"].as_array().unwrap().is_empty());
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["tool_input_errors"].as_array().unwrap().len(), 3);
    assert_eq!(ev["verdict"], "pass", "input errors alone never fail: {ev}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_schema_violation_is_a_harness_error_never_a_success() {
    let p = Project::new(&[("api", "rest")]);
    // The example passes check; a rule hit only at run time renders a result the output
    // schema refuses.
    let op = json!({
        "operation_id": "get_item",
        "match": { "method": "GET", "path": "/items/{id}" },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["status", "data"],
                           "properties": { "data": { "type": "object", "required": ["name"] } } },
        "mock": {
            "schema_version": 1, "default_variant": "ok",
            "variants": { "ok": {
                "result": { "status": 200, "data": { "name": "x" } },
                "rules": [ { "when": [ { "source": "input", "path": "id", "op": "eq", "value": "bad" } ],
                             "result": { "status": 200, "data": { "nom": "x" } } } ]
            } },
            "examples": [ { "variant": "ok", "input": { "id": "1" },
                            "expected": { "status": 200, "data": { "name": "x" } } } ]
        }
    });
    p.op("api", op);
    let s = Server::start(&p).await;
    assert_eq!(s.call("GET", "/api/items/1", None, &[]).await.status, 200);
    let r = s.call("GET", "/api/items/bad", None, &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.header("understudy-error"),
        Some("output_schema_violation")
    );
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["verdict"], "fail");
    assert_eq!(ev["tool_events"][1]["rule"], 0);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_calls_on_one_attempt_never_lose_an_update() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in crate::pg::Backend::all() {
        const N: i64 = 200;
        let p = standard_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let a = s.attempt(json!({ "test_run_id": "concurrency" })).await;
        let url = s.url(&format!("{}/counter", a.base("api")));
        let urls = (0..N).map(|_| url.clone()).collect();
        let previous = support::post_counter_concurrently(&s.http, urls).await;
        // Each call saw the value some other call wrote (or the initial -1), and no two calls saw
        // the same one: the read-render-write of each call was atomic.
        let distinct: BTreeSet<i64> = previous.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            N as usize,
            "a value was read twice: an update was lost"
        );
        assert!(distinct.contains(&-1));
        let ev = s.evidence(&a.id).await;
        let events = ev["tool_events"].as_array().unwrap();
        assert_eq!(events.len(), N as usize);
        // Evidence is in execution order: each call saw what the one before it wrote.
        let mut expected_prev = -1;
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence"], i as u64 + 1);
            assert_eq!(e["result"]["data"]["previous"], expected_prev, "event {i}");
            expected_prev = e["arguments"]["n"].as_i64().unwrap();
        }
        // The final state is the last writer's value, and it was never read.
        assert_eq!(ev["final_state"]["api"]["counter"], expected_prev);
        assert!(!distinct.contains(&expected_prev));
        assert_eq!(ev["verdict"], "pass");
        s.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_shared_across_integrations_of_one_attempt_but_not_across_attempts() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let b = s.attempt(json!({})).await;
    let r = s
        .call(
            "POST",
            &format!("{}/counter", a.base("api")),
            Some(&json!({ "n": 7 })),
            &[],
        )
        .await;
    assert_eq!(r.json()["previous"], -1);
    // Attempt b has its own state.
    let r = s
        .call(
            "POST",
            &format!("{}/counter", b.base("api")),
            Some(&json!({ "n": 9 })),
            &[],
        )
        .await;
    assert_eq!(r.json()["previous"], -1);
    // The header token works like the path token.
    let r = s
        .call(
            "POST",
            "/api/counter",
            Some(&json!({ "n": 8 })),
            &[("Understudy-Attempt", &a.token)],
        )
        .await;
    assert_eq!(r.json()["previous"], 7);
    // The default attempt is a third, separate one.
    let r = s
        .call("POST", "/api/counter", Some(&json!({ "n": 1 })), &[])
        .await;
    assert_eq!(r.json()["previous"], -1);
    let ea = s.evidence(&a.id).await;
    let eb = s.evidence(&b.id).await;
    assert_eq!(ea["tool_events"].as_array().unwrap().len(), 2);
    assert_eq!(eb["tool_events"].as_array().unwrap().len(), 1);
    assert_eq!(ea["final_state"]["api"]["counter"], 8);
    assert_eq!(eb["final_state"]["api"]["counter"], 9);
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 4. profiles

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salesforce_update_answers_204_without_body_and_method_override_matches() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let r = s
        .call(
            "PATCH",
            "/crm/services/data/v59.0/sobjects/Contact/003A",
            Some(&json!({ "Phone": "+1555" })),
            &[],
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(r.text, "");
    assert!(r.header("content-type").is_none());
    // Clients that cannot PATCH send POST ?_HttpMethod=PATCH.
    let r = s
        .call(
            "POST",
            "/crm/services/data/v59.0/sobjects/Contact/003B?_HttpMethod=PATCH",
            Some(&json!({ "Phone": "+1666" })),
            &[],
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let ev = s.evidence(&s.default_attempt()).await;
    let e = &ev["tool_events"][1];
    assert_eq!(e["operation_id"], "update_contact");
    assert_eq!(e["is_write"], true);
    assert_eq!(e["arguments"], json!({ "id": "003B", "Phone": "+1666" }));
    assert_eq!(e["result"], json!({ "status": 204, "data": null }));
    assert_eq!(ev["final_state"]["crm"]["last_phone"], "+1666");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_headers_and_status_reach_the_wire() {
    let p = Project::new(&[("api", "rest")]);
    let result = json!({ "status": 201, "data": { "id": "x1" }, "headers": { "Location": "/things/x1", "X-Rate": "5" } });
    p.op(
        "api",
        rest_op(
            "create",
            "POST",
            "/things",
            Some(mock(result, json!({ "name": "a" }))),
        ),
    );
    let s = Server::start(&p).await;
    let r = s
        .call("POST", "/api/things", Some(&json!({ "name": "a" })), &[])
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/things/x1"));
    assert_eq!(r.header("x-rate"), Some("5"));
    assert_eq!(r.json(), json!({ "id": "x1" }));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_salesforce_templates_are_known_operations_answered_by_the_default_org() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let cases = [
        (
            "POST",
            "/crm/services/data/v59.0/sobjects/Account/",
            Some(json!({ "Name": "A" })),
            "sobject_create",
            true,
        ),
        (
            "GET",
            "/crm/services/data/v59.0/sobjects/Account/001A",
            None,
            "sobject_get",
            false,
        ),
        (
            "DELETE",
            "/crm/services/data/v59.0/sobjects/Account/001A",
            None,
            "sobject_delete",
            true,
        ),
        (
            "PATCH",
            "/crm/services/data/v59.0/sobjects/Account/Ext__c/42",
            Some(json!({})),
            "sobject_upsert",
            true,
        ),
        (
            "GET",
            "/crm/services/data/v59.0/queryAll?q=SELECT+Id+FROM+Account",
            None,
            "query_all",
            false,
        ),
        (
            "GET",
            "/crm/services/data/v59.0/query?q=SELECT+Id+FROM+Account",
            None,
            "query",
            false,
        ),
        (
            "POST",
            "/crm/services/data/v59.0/composite",
            Some(
                json!({ "compositeRequest": [ { "method": "GET", "url": "/x", "referenceId": "a" } ] }),
            ),
            "composite",
            false,
        ),
        (
            "POST",
            "/crm/services/data/v59.0/composite",
            Some(
                json!({ "compositeRequest": [ { "method": "GET", "url": "/x", "referenceId": "a" },
                                               { "method": "PATCH", "url": "/y", "referenceId": "b", "body": {} } ] }),
            ),
            "composite",
            true,
        ),
    ];
    // Without an operation file the default org answers each (docs/src/guides/salesforce.md):
    // the agent's own mistakes (a malformed id, a missing required field) are input errors,
    // never a harness error.
    let want = [201, 404, 400, 400, 200, 200, 200, 200];
    for ((method, path, body, _, _), status) in cases.iter().zip(want) {
        let r = s.call(method, path, body.as_ref(), &[]).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.text);
        assert_eq!(r.header("understudy-error"), None, "{method} {path}");
    }
    let ev = s.evidence(&s.default_attempt()).await;
    let events = ev["tool_events"].as_array().unwrap();
    for (e, (method, path, _, id, write)) in events.iter().zip(&cases) {
        assert_eq!(e["operation_id"], *id, "{method} {path}");
        assert_eq!(e["is_write"], *write, "{method} {path}");
        assert_ne!(e["result_status"], "harness_error", "{method} {path}");
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_without_mock_is_no_mock() {
    let p = Project::new(&[("api", "rest")]);
    p.op("api", rest_op("later", "GET", "/later", None));
    let s = Server::start(&p).await;
    let r = s.call("GET", "/api/later", None, &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("no_mock"));
    assert_eq!(
        r.json(),
        json!({ "understudy_error": { "kind": "harness_error", "code": "no_mock",
            "message": r.json()["understudy_error"]["message"] } })
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 5. idempotency

fn idempotent_project() -> Project {
    let p = Project::new(&[("api", "rest")]);
    let op = json!({
        "operation_id": "create_order",
        "match": { "method": "POST", "path": "/orders" },
        "idempotency": { "header": "Idempotency-Key" },
        "input_schema": { "type": "object", "required": ["item"] },
        "output_schema": { "type": "object", "required": ["status"] },
        "mock": {
            "schema_version": 1, "default_variant": "ok",
            "initial_state": { "orders": 0, "last": null },
            "variants": { "ok": {
                "result": { "status": 201, "data": { "item": { "$input": "item" }, "before": { "$state": "last" } } },
                "set_state": { "last": { "$input": "item" } }
            } },
            "examples": [ { "variant": "ok", "input": { "item": "a" },
                            "expected": { "status": 201, "data": { "item": "a", "before": null } } } ]
        }
    });
    p.op("api", op);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_repeat_replays_and_other_arguments_are_422() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in crate::pg::Backend::all() {
        let p = idempotent_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let key = [("Idempotency-Key", "\"order-secret-key-1\"")];
        let first = s
            .call("POST", "/api/orders", Some(&json!({ "item": "a" })), &key)
            .await;
        assert_eq!(first.status, 201);
        assert_eq!(first.json(), json!({ "item": "a", "before": null }));
        let again = s
            .call("POST", "/api/orders", Some(&json!({ "item": "a" })), &key)
            .await;
        assert_eq!(again.status, 201);
        assert_eq!(
            again.text, first.text,
            "the first response is replayed byte for byte"
        );
        let other = s
            .call("POST", "/api/orders", Some(&json!({ "item": "b" })), &key)
            .await;
        assert_eq!(other.status, 422, "{}", other.text);
        assert!(other.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idempotency key"));
        // A different key takes effect, seeing the state of the first call only once.
        let third = s
            .call(
                "POST",
                "/api/orders",
                Some(&json!({ "item": "c" })),
                &[("Idempotency-Key", "k2")],
            )
            .await;
        assert_eq!(third.json(), json!({ "item": "c", "before": "a" }));
        let ev = s.evidence(&s.default_attempt()).await;
        let events = ev["tool_events"].as_array().unwrap();
        let statuses: Vec<&str> = events
            .iter()
            .map(|e| e["result_status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["ok", "replayed", "input_error", "ok"]);
        let r0 = events[0]["idempotency_key_ref"].as_str().unwrap();
        assert_eq!(r0.len(), 16);
        assert!(r0.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(events[1]["idempotency_key_ref"], r0);
        assert_eq!(events[2]["idempotency_key_ref"], r0);
        assert_ne!(events[3]["idempotency_key_ref"], r0);
        assert_ne!(
            events[0]["execution_attempt_id"],
            events[1]["execution_attempt_id"]
        );
        assert_eq!(events[2]["http_status"], 422);
        assert!(
            !ev.to_string().contains("order-secret-key-1"),
            "raw keys never stored"
        );
        assert_eq!(ev["verdict"], "pass");
        s.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_survives_a_restart() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in crate::pg::Backend::all() {
        let p = idempotent_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let a = s.attempt(json!({})).await;
        let url = format!("{}/orders", a.base("api"));
        let key = [("Idempotency-Key", "k")];
        let first = s
            .call("POST", &url, Some(&json!({ "item": "a" })), &key)
            .await;
        assert_eq!(first.status, 201);
        s.stop().await.unwrap();
        let s = Server::start(&p).await;
        let again = s
            .call("POST", &url, Some(&json!({ "item": "a" })), &key)
            .await;
        assert_eq!(again.status, 201, "{}", again.text);
        assert_eq!(again.text, first.text);
        let other = s
            .call("POST", &url, Some(&json!({ "item": "z" })), &key)
            .await;
        assert_eq!(other.status, 422);
        let ev = s.evidence(&a.id).await;
        assert_eq!(ev["tool_events"][1]["result_status"], "replayed");
        s.stop().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// 6. store and evidence

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_fails_check_refuses_the_start_with_the_check_messages() {
    let p = Project::new(&[("api", "rest")]);
    let mut op = rest_op(
        "broken",
        "GET",
        "/b",
        Some(mock(json!({ "status": 200, "data": {} }), json!({}))),
    );
    op["mock"]["default_variant"] = json!("nope");
    p.op("api", op);
    match App::build(p.options()) {
        Err(StartError::Check(problems)) => {
            let text = problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(text.contains("broken.json"), "{text}");
            assert!(text.contains("default_variant"), "{text}");
        }
        Err(e) => panic!("expected check problems, got {e}"),
        Ok(_) => panic!("a broken file must refuse the start"),
    }
    // The binary says the same and exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.json") && err.contains("default_variant"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_are_synced_from_files_and_pinned() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in crate::pg::Backend::all() {
        let p = standard_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let a = s.attempt(json!({})).await;
        assert_eq!(a.body["pins"]["crm/lookup_contact_by_phone"]["revision"], 1);
        assert!(
            a.body["pins"]["crm/lookup_contact_by_phone"]["contract_hash"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        s.stop().await.unwrap();
        // A changed definition becomes revision 2; the running attempt keeps revision 1.
        let mut op = support::sf_lookup_op();
        op["mock"]["default_variant"] = json!("missing");
        p.op("crm", op);
        let s = Server::start(&p).await;
        let b = s.attempt(json!({})).await;
        assert_eq!(b.body["pins"]["crm/lookup_contact_by_phone"]["revision"], 2);
        let path = "/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'";
        let old = s
            .call("GET", &format!("{}{path}", a.base("crm")), None, &[])
            .await;
        let new = s
            .call("GET", &format!("{}{path}", b.base("crm")), None, &[])
            .await;
        assert_eq!(
            old.json()["totalSize"],
            1,
            "attempt a keeps revision 1 (found)"
        );
        assert_eq!(
            new.json()["totalSize"],
            0,
            "attempt b pinned revision 2 (missing)"
        );
        s.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_envelope_has_every_member_of_spec_8() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({ "test_run_id": "run-42" })).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let path = "/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'";
    let r = s
        .call(
            "GET",
            &format!("{}{path}", a.base("crm")),
            None,
            &[("traceparent", tp)],
        )
        .await;
    assert_eq!(r.status, 200);
    let r = s
        .call(
            "GET",
            &format!("{}{path}", a.base("crm")),
            None,
            &[(
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            )],
        )
        .await;
    assert_eq!(r.status, 200);
    let ev = s.evidence(&a.id).await;
    for k in [
        "schema_version",
        "attempt_id",
        "test_run_id",
        "started_at",
        "ended_at",
        "pins",
        "tool_events",
        "tool_input_errors",
        "harness_errors",
        "blocked_side_effects",
        "final_state",
        "verdict",
    ] {
        assert!(ev.get(k).is_some(), "missing {k}: {ev}");
    }
    assert_eq!(ev["schema_version"], "understudy.evidence.v1");
    assert_eq!(ev["test_run_id"], "run-42");
    assert_eq!(ev["verdict"], "pass");
    let e = &ev["tool_events"][0];
    for k in [
        "sequence",
        "execution_attempt_id",
        "integration",
        "operation_id",
        "revision",
        "variant",
        "rule",
        "is_write",
        "arguments",
        "result",
        "result_status",
        "http_status",
        "latency_ms",
        "delay_ms",
        "idempotency_key_ref",
        "trace_id",
        "source",
    ] {
        assert!(e.get(k).is_some(), "event misses {k}: {e}");
    }
    assert_eq!(e["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(e["source"], "mock");
    assert_eq!(e["integration"], "crm");
    assert_eq!(e["http_status"], 200);
    assert_eq!(
        ev["tool_events"][1]["trace_id"],
        Value::Null,
        "an all-zero trace id is invalid"
    );
    s.stop().await.unwrap();
}

/// docs/src/reference/evidence-envelope.md: an acknowledged call is never missing from its attempt, even after `kill -9`.
#[test]
fn kill_9_loses_no_acknowledged_call() {
    let p = standard_project();
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("readiness line").unwrap();
    let base = ready
        .strip_prefix("understudy listening on ")
        .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
        .to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (attempt_id, acked) = rt.block_on(async {
        let client = support::client();
        let r = support::send(
            &client,
            "POST",
            &format!("{base}/_understudy/api/attempts"),
            Some(&json!({})),
            &[],
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let a = r.json();
        let token = a["token"].as_str().unwrap().to_string();
        let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..60i64 {
            let client = client.clone();
            let url = format!("{base}/~{token}/api/counter");
            let acked_by_task = acked.clone();
            tasks.push(tokio::spawn(async move {
                let resp = client.post(&url).json(&json!({ "n": n })).send().await;
                if let Ok(resp) = resp {
                    if resp.status().as_u16() == 200 && resp.bytes().await.is_ok() {
                        acked_by_task.lock().unwrap().push(n);
                    }
                }
            }));
            if n == 40 {
                // Kill while calls are in flight: wait for some acknowledgements first.
                while acked.lock().unwrap().len() < 20 {
                    tokio::task::yield_now().await;
                }
                child.kill().unwrap(); // SIGKILL
            }
        }
        for t in tasks {
            let _ = t.await;
        }
        let acked = acked.lock().unwrap().clone();
        (a["attempt_id"].as_str().unwrap().to_string(), acked)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        acked.len() >= 20,
        "some calls were acknowledged before the kill"
    );
    assert!(
        acked.len() <= 41,
        "calls sent after the kill cannot be acknowledged"
    );
    let store =
        understudy::store::Store::open(&p.data_dir()).expect("the store reopens after kill -9");
    let events = store.evidence(&attempt_id).unwrap();
    let recorded: BTreeSet<i64> = events
        .iter()
        .filter_map(|e| e.arguments["n"].as_i64())
        .collect();
    for n in &acked {
        assert!(
            recorded.contains(n),
            "acknowledged call n={n} is missing from the evidence"
        );
    }
    // Sequences stay dense.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.sequence, i as u64 + 1);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. admin: attempts, auth, leases, stale pins

/// Issue 20: an attempt pins one revision set by id; its pins are listed only on request
/// (`?pins=true`), and they read back the same after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_pin_one_revision_set_and_list_pins_only_on_request() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let post = |q: &'static str| {
        let s = &s;
        async move {
            let r = s
                .call(
                    "POST",
                    &format!("/_understudy/api/attempts{q}"),
                    Some(&json!({})),
                    &[],
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text);
            r.json()
        }
    };
    let a = post("").await;
    let b = post("").await;
    let set = a["revision_set"]
        .as_str()
        .expect("revision_set")
        .to_string();
    assert!(set.starts_with("rs_"), "{set}");
    assert!(a.get("pins").is_none(), "no pins unless asked: {a}");
    assert_eq!(
        b["revision_set"],
        set.as_str(),
        "nothing changed: the same set"
    );
    let c = post("?pins=true").await;
    assert_eq!(c["revision_set"], set.as_str());
    assert_eq!(c["pins"]["crm/lookup_contact_by_phone"]["revision"], 1);
    let id = a["attempt_id"].as_str().unwrap().to_string();
    let get = |q: &'static str| {
        let s = &s;
        let id = id.clone();
        async move {
            let r = s
                .call(
                    "GET",
                    &format!("/_understudy/api/attempts/{id}{q}"),
                    None,
                    &[],
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    let plain = get("").await;
    assert!(plain.get("pins").is_none(), "{plain}");
    assert_eq!(plain["revision_set"], set.as_str());
    let full = get("?pins=true").await;
    assert_eq!(full["pins"], c["pins"]);
    s.stop().await.unwrap();
    // After a restart the attempt's record is read back from the store: same set, same pins.
    let s = Server::start(&p).await;
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{id}?pins=true"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["revision_set"], set.as_str());
    assert_eq!(r.json()["pins"], c["pins"]);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_creation_answers_token_base_urls_and_pins() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s
        .attempt(json!({ "test_run_id": "r1", "ttl_s": 120, "variants": { "crm/lookup_contact_by_phone": "missing" } }))
        .await;
    let token = &a.token;
    assert!(token.len() >= 32, "≥128 random bits");
    assert!(token
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'));
    assert_eq!(
        a.body["base_urls"]["crm"],
        format!("http://{}/~{token}/crm", s.addr)
    );
    assert!(a.body["expires_at"].is_string());
    // The variant applies.
    let path = "/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'";
    let r = s
        .call("GET", &format!("{}{path}", a.base("crm")), None, &[])
        .await;
    assert_eq!(r.json()["totalSize"], 0);
    // GET /attempts/{id} never shows the token or secret.
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["status"], "active");
    assert_eq!(v["test_run_id"], "r1");
    assert_eq!(v["events"], 1);
    assert!(!r.text.contains(token.as_str()));
    // Bad bodies.
    let r = s
        .call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({ "ttl": 5 })),
            &[],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "bad_request");
    let r = s
        .call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({ "variants": { "crm/nope": "x" } })),
            &[],
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error"]["details"], json!(["crm/nope"]));
    let r = s
        .call("GET", "/_understudy/api/attempts/does-not-exist", None, &[])
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "not_found");
    // Every admin error has the one shape {"error":{"code","message","details"}}.
    let r = s.call("PUT", "/_understudy/api/attempts", None, &[]).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["error"]["code"], "method_not_allowed");
    let r = s.call("GET", "/_understudy/api/nope", None, &[]).await;
    assert_eq!(r.status, 404);
    let e = &r.json()["error"];
    assert!(e["message"].is_string() && e["details"].is_array());
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tokens_fail_closed_with_401() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    s.call(
        "POST",
        &format!("{}/counter", a.base("api")),
        Some(&json!({ "n": 5 })),
        &[],
    )
    .await;
    let forged = format!("{}x", a.token);
    for (path, headers) in [
        (format!("/~{forged}/api/counter"), vec![]),
        (
            "/api/counter".to_string(),
            vec![("Understudy-Attempt", forged.as_str())],
        ),
        (
            format!("{}/counter", a.base("api")),
            vec![("Understudy-Attempt", forged.as_str())],
        ),
        ("/~/api/counter".to_string(), vec![]),
    ] {
        let r = s
            .call("POST", &path, Some(&json!({ "n": 6 })), &headers)
            .await;
        assert_eq!(r.status, 401, "{path}: {}", r.text);
        let body = r.json();
        assert_eq!(body["understudy_error"]["code"], "unknown_attempt");
        assert!(!r.text.contains("previous"), "never another attempt's data");
    }
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 1);
    assert_eq!(ev["final_state"]["api"]["counter"], 5);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_the_lease_are_lease_expired_harness_errors() {
    let p = standard_project();
    let clock = Arc::new(ManualClock::new(SystemClock.now()));
    let mut opts = p.options();
    opts.clock = clock.clone();
    let s = Server::start_with(opts).await;
    let a = s.attempt(json!({ "ttl_s": 60 })).await;
    let url = format!("{}/counter", a.base("api"));
    assert_eq!(
        s.call("POST", &url, Some(&json!({ "n": 1 })), &[])
            .await
            .status,
        200
    );
    clock.advance(chrono::Duration::seconds(61));
    let r = s.call("POST", &url, Some(&json!({ "n": 2 })), &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("lease_expired"));
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["verdict"], "fail");
    assert_eq!(
        ev["final_state"]["api"]["counter"], 1,
        "the expired call changed nothing"
    );
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.json()["status"], "expired");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_mocks_refuse_attempt_creation_with_409() {
    let p = Project::new(&[("api", "rest")]);
    p.op("api", rest_op("stale_op", "GET", "/s", None));
    // A revision saved earlier against another contract (as the admin API would have).
    {
        let store = understudy::store::Store::open(&p.data_dir()).unwrap();
        let def = mock(json!({ "status": 200, "data": {} }), json!({}));
        store
            .sync_revision("api/stale_op", "sha256:0000", &def, "api")
            .unwrap();
        futures_flush(&store);
    }
    let s = Server::start(&p).await;
    let r = s
        .call("POST", "/_understudy/api/attempts", Some(&json!({})), &[])
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
    let body = r.json();
    assert_eq!(body["error"]["code"], "stale_contract");
    assert_eq!(body["error"]["details"][0]["operation"], "api/stale_op");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("api/stale_op"));
    // The default attempt does not pin it: the call is a precise harness error.
    let r = s.call("GET", "/api/s", None, &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("no_mock"));
    assert!(r.json()["understudy_error"]["message"]
        .as_str()
        .unwrap()
        .contains("stale"));
    s.stop().await.unwrap();
}

fn futures_flush(store: &understudy::store::Store) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current()
            .block_on(store.flush())
            .unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_attempt_and_reports_verified_cleanup() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in crate::pg::Backend::all() {
        let p = standard_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let a = s.attempt(json!({})).await;
        let url = format!("{}/counter", a.base("api"));
        s.call("POST", &url, Some(&json!({ "n": 3 })), &[]).await;
        let r = s
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{}", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(
            r.json()["cleanup"],
            json!({ "status": "verified", "remaining_state_keys": 0 })
        );
        assert!(r.json()["ended_at"].is_string());
        // Evidence is kept; the state is gone.
        let ev = s.evidence(&a.id).await;
        assert_eq!(ev["tool_events"].as_array().unwrap().len(), 1);
        assert_eq!(ev["verdict"], "pass");
        // Deleting again is harmless; the default attempt cannot be deleted.
        let r = s
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{}", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200);
        let r = s
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{}", s.default_attempt()),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 409);
        // A call after the end is refused 410 attempt_ended (and fails the attempt).
        let r = s.call("POST", &url, Some(&json!({ "n": 4 })), &[]).await;
        assert_eq!(r.header("understudy-error"), Some("attempt_ended"));
        assert_eq!(r.status, 410);
        s.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_is_required_when_configured() {
    let p = standard_project();
    let mut opts = p.options();
    opts.admin_token = Some("s3cret-admin".into());
    let s = Server::start_with(opts).await;
    let r = s.call("GET", "/_understudy/api/health", None, &[]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "unauthorized");
    assert!(r.header("www-authenticate").is_some());
    let r = s
        .call(
            "GET",
            "/_understudy/api/health",
            None,
            &[("Authorization", "Bearer wrong")],
        )
        .await;
    assert_eq!(r.status, 401);
    let r = s
        .call(
            "GET",
            "/_understudy/api/health",
            None,
            &[("Authorization", "Bearer s3cret-admin")],
        )
        .await;
    assert_eq!(r.status, 200);
    // The proxy itself does not need the admin token.
    let r = s
        .call("POST", "/api/counter", Some(&json!({ "n": 1 })), &[])
        .await;
    assert_eq!(r.status, 200);
    s.stop().await.unwrap();
}

#[test]
fn serve_refuses_a_non_loopback_listener_without_an_admin_token() {
    let p = standard_project();
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "0.0.0.0:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("admin token"), "{err}");
}

#[test]
fn project_file_with_unknown_keys_is_refused() {
    let p = standard_project();
    p.write_config(json!({ "listne": "127.0.0.1:0" }));
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listne"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// 9. limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_10_mib_get_413() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let big = "x".repeat(10 * 1024 * 1024 + 1);
    let r = s
        .call_raw(
            "POST",
            "/api/counter",
            &big,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "payload_too_large");
    // The server still works.
    let r = s
        .call("POST", "/api/counter", Some(&json!({ "n": 1 })), &[])
        .await;
    assert_eq!(r.status, 200);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_a_socket_closes_only_that_connection() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // A healthy keep-alive connection first.
    let mut good = std::net::TcpStream::connect(s.addr).unwrap();
    let mut bad = std::net::TcpStream::connect(s.addr).unwrap();
    let addr = s.addr;
    let (good_ok, bad_closed) = tokio::task::spawn_blocking(move || {
        bad.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n\0\0\0")
            .unwrap();
        let mut buf = Vec::new();
        let _ = bad.read_to_end(&mut buf); // the server closes it
        let req = format!(
            "GET /_understudy/api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        );
        good.write_all(req.as_bytes()).unwrap();
        let mut resp = String::new();
        good.read_to_string(&mut resp).unwrap();
        (resp.starts_with("HTTP/1.1 200"), true)
    })
    .await
    .unwrap();
    assert!(bad_closed);
    assert!(good_ok, "the other connection is unaffected");
    assert_eq!(
        s.call("GET", "/_understudy/api/health", None, &[])
            .await
            .status,
        200
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_closed() {
    let p = standard_project();
    let mut opts = p.options();
    opts.limits.header_read_timeout = std::time::Duration::from_millis(200);
    opts.limits.idle_timeout = std::time::Duration::from_millis(300);
    let s = Server::start_with(opts).await;
    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        // A head that never completes is cut off.
        let mut slow = std::net::TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /_understudy/api/health HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        let mut buf = Vec::new();
        let n = slow.read_to_end(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "closed without an answer");
        // A keep-alive connection is closed once idle.
        let mut idle = std::net::TcpStream::connect(addr).unwrap();
        idle.write_all(
            format!("GET /_understudy/api/health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut buf = Vec::new();
        let _ = idle.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    })
    .await
    .unwrap();
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// The README's quick start, on the bundled example project

/// Copies `examples/healthplus` into a temp dir (its data dir is relative to the project file).
fn copy_example(dest: &std::path::Path) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/healthplus");
    let mocks = dest.join("mocks/crm");
    std::fs::create_dir_all(&mocks).unwrap();
    std::fs::copy(src.join("understudy.json"), dest.join("understudy.json")).unwrap();
    for f in std::fs::read_dir(src.join("mocks/crm")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, mocks.join(f.file_name().unwrap())).unwrap();
    }
}

/// The three curl lines of the README: a lookup and a booking answer Salesforce-shaped, and
/// `attempts/default/evidence` shows both calls with a passing verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_quick_start_on_the_example_project() {
    let dir = tempfile::tempdir().unwrap();
    copy_example(dir.path());
    let config = understudy::config::Config::load(&dir.path().join("understudy.json")).unwrap();
    let s = Server::start_with(understudy::app::AppOptions::new(config)).await;

    let lookup = s
        .call(
            "GET",
            "/crm/services/data/v60.0/query?q=SELECT+Id,+FirstName,+LastName,+Phone+FROM+Contact+WHERE+Phone+=+'555-0100'",
            None,
            &[],
        )
        .await;
    assert_eq!(lookup.status, 200, "{}", lookup.text);
    let l = lookup.json();
    assert_eq!(l["totalSize"], 1);
    assert_eq!(l["records"][0]["Phone"], "555-0100");
    assert_eq!(l["records"][0]["attributes"]["type"], "Contact");

    let body = json!({ "Contact__c": "003Hp00000Ab12CAAR", "Requested_Date__c": "2026-12-01" });
    let booking = s
        .call(
            "POST",
            "/crm/services/data/v60.0/sobjects/Appointment__c",
            Some(&body),
            &[],
        )
        .await;
    assert_eq!(booking.status, 201, "{}", booking.text);
    let b = booking.json();
    assert_eq!(b["success"], true);
    assert!(b["id"].as_str().is_some_and(|id| id.len() == 18), "{b}");

    let ev = s
        .call(
            "GET",
            "/_understudy/api/attempts/default/evidence",
            None,
            &[],
        )
        .await;
    assert_eq!(ev.status, 200, "{}", ev.text);
    let ev = ev.json();
    assert_eq!(ev["attempt_id"], s.default_attempt().as_str());
    let ops: Vec<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["operation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["lookup_contact_by_phone", "book_appointment"]);
    assert_eq!(ev["verdict"], "pass");
    s.stop().await.unwrap();
}
