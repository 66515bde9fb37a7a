//! The default org: each call against the org the previous one left.

use super::*;
use crate::profile::salesforce::csv;
use serde_json::json;

struct T {
    state: Option<Value>,
}

impl T {
    fn new() -> T {
        T { state: None }
    }

    fn call(
        &mut self,
        op: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Answer {
        self.raw(op, path, query, body, bytes::Bytes::new(), None)
    }

    fn raw(
        &mut self,
        op: &str,
        path: &str,
        query: &[(&str, &str)],
        json: Option<Value>,
        body: bytes::Bytes,
        batch: Option<usize>,
    ) -> Answer {
        let call = Call {
            integration: "crm".into(),
            operation_id: op.into(),
            rel: path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body,
            json,
            batch_size: batch,
            secret: "00ff".into(),
            now_ms: 1_700_000_000_000,
        };
        let (a, changed) = answer(&call, self.state.as_ref());
        if let Some(c) = changed {
            self.state = Some(c);
        }
        a
    }

    fn org(&self) -> Org {
        Org::of(self.state.as_ref())
    }
}

const V: &str = "services/data/v59.0";

fn body(a: &Answer) -> Value {
    a.response.body.clone().unwrap_or(Value::Null)
}

#[test]
fn collections_create_then_read_back_and_all_or_none_rolls_back() {
    let mut t = T::new();
    let a = t.call(
        "collections_create",
        &format!("{V}/composite/sobjects"),
        &[],
        Some(json!({"allOrNone": false, "records": [
            {"attributes": {"type": "Contact"}, "LastName": "Lovelace", "FirstName": "Ada"},
            {"attributes": {"type": "Contact"}, "FirstName": "NoLastName"},
        ]})),
    );
    assert_eq!(a.response.status, 200);
    let r = body(&a);
    assert_eq!(r[0]["success"], true);
    assert!(r[0]["id"].as_str().unwrap().starts_with("003"));
    assert_eq!(r[1]["success"], false);
    assert_eq!(r[1]["errors"][0]["statusCode"], "REQUIRED_FIELD_MISSING");
    assert_eq!(r[1]["errors"][0]["fields"], json!(["LastName"]));
    let id = r[0]["id"].as_str().unwrap().to_string();
    let got = t.call(
        "sobject_get",
        &format!("{V}/sobjects/Contact/{id}"),
        &[],
        None,
    );
    assert_eq!(body(&got)["LastName"], "Lovelace");
    assert_eq!(body(&got)["attributes"]["type"], "Contact");

    // allOrNone: one bad record → nothing stored, the good one reports the rollback.
    let before = t.org();
    let a = t.call(
        "collections_create",
        &format!("{V}/composite/sobjects"),
        &[],
        Some(json!({"allOrNone": true, "records": [
            {"attributes": {"type": "Contact"}, "LastName": "Hopper"},
            {"attributes": {"type": "Contact"}, "Id": "003000000000000AAA", "LastName": "X"},
        ]})),
    );
    let r = body(&a);
    assert_eq!(
        r[0]["errors"][0]["statusCode"],
        "ALL_OR_NONE_OPERATION_ROLLED_BACK"
    );
    assert_eq!(r[1]["errors"][0]["statusCode"], "INVALID_FIELD");
    assert_eq!(t.org(), before, "nothing changed");

    // Update and delete by collection; an unknown id fails alone.
    let a = t.call(
        "collections_update",
        &format!("{V}/composite/sobjects"),
        &[],
        Some(json!({"records": [
            {"attributes": {"type": "Contact"}, "id": id, "Phone": "555"},
            {"attributes": {"type": "Contact"}, "id": "003000000000000AAA", "Phone": "1"},
        ]})),
    );
    let r = body(&a);
    assert_eq!(
        (r[0]["success"].clone(), r[1]["success"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(t.org().get(None, &id).unwrap()["Phone"], "555");
    let a = t.call(
        "collections_delete",
        &format!("{V}/composite/sobjects"),
        &[("ids", id.as_str()), ("allOrNone", "false")],
        None,
    );
    assert_eq!(body(&a)[0]["success"], true);
    assert!(t.org().get(None, &id).is_none());

    // More than 200 records: 400, nothing changed.
    let many: Vec<Value> = (0..201)
        .map(|i| json!({"attributes": {"type": "Account"}, "Name": i.to_string()}))
        .collect();
    let a = t.call(
        "collections_create",
        &format!("{V}/composite/sobjects"),
        &[],
        Some(json!({"records": many})),
    );
    assert_eq!(a.response.status, 400);
    assert_eq!(body(&a)[0]["errorCode"], "EXCEEDED_ID_LIMIT");
}

#[test]
fn collections_upsert_creates_then_updates() {
    let mut t = T::new();
    let path = format!("{V}/composite/sobjects/Account/Ext__c");
    let rec = |n: &str| json!({"records": [{"attributes": {"type": "Account"}, "Ext__c": "E1", "Name": n}]});
    let a = t.call("collections_upsert", &path, &[], Some(rec("First")));
    assert_eq!(body(&a)[0]["created"], true);
    let a = t.call("collections_upsert", &path, &[], Some(rec("Second")));
    assert_eq!(body(&a)[0]["created"], false);
    let recs = t.org().of_object("Account").to_vec();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["Name"], "Second");
}

#[test]
fn composite_resolves_references_and_rolls_back_all_or_none() {
    let mut t = T::new();
    let req = |all: bool, last: Value| {
        json!({"allOrNone": all, "compositeRequest": [
            {"method": "POST", "url": "/services/data/v59.0/sobjects/Account", "referenceId": "acct", "body": {"Name": "Acme"}},
            {"method": "POST", "url": "/services/data/v59.0/sobjects/Contact", "referenceId": "ct",
             "body": {"LastName": last, "AccountId": "@{acct.id}"}},
            {"method": "GET", "url": "/services/data/v59.0/sobjects/Contact/@{ct.id}", "referenceId": "read"},
        ]})
    };
    let a = t.call(
        "composite",
        &format!("{V}/composite"),
        &[],
        Some(req(true, json!("Lovelace"))),
    );
    let items = body(&a)["compositeResponse"].clone();
    assert_eq!(items[0]["httpStatusCode"], 201);
    let acct = items[0]["body"]["id"].as_str().unwrap().to_string();
    assert_eq!(items[2]["httpStatusCode"], 200);
    assert_eq!(items[2]["body"]["AccountId"], json!(acct));
    assert_eq!(items[2]["referenceId"], "read");

    // allOrNone and a failing second subrequest: everything rolled back, 200 all the same.
    let before = t.org();
    let a = t.call(
        "composite",
        &format!("{V}/composite"),
        &[],
        Some(req(true, Value::Null)),
    );
    assert_eq!(a.response.status, 200);
    let items = body(&a)["compositeResponse"].clone();
    assert_eq!(items[0]["httpStatusCode"], 400);
    assert_eq!(items[0]["body"][0]["errorCode"], "PROCESSING_HALTED");
    assert_eq!(items[1]["body"][0]["errorCode"], "REQUIRED_FIELD_MISSING");
    assert_eq!(items[2]["body"][0]["errorCode"], "PROCESSING_HALTED");
    assert_eq!(
        t.org().of_object("Account").len(),
        before.of_object("Account").len()
    );

    // Without allOrNone the first one stays; the reference to the failed one is halted.
    let a = t.call(
        "composite",
        &format!("{V}/composite"),
        &[],
        Some(req(false, Value::Null)),
    );
    let items = body(&a)["compositeResponse"].clone();
    assert_eq!(items[0]["httpStatusCode"], 201);
    assert_eq!(items[2]["httpStatusCode"], 400);
    assert_eq!(t.org().of_object("Account").len(), 2);

    let too_many: Vec<Value> = (0..26).map(|i| json!({"method": "GET", "url": "/services/data/v59.0/query?q=SELECT+Id+FROM+Account", "referenceId": format!("r{i}")})).collect();
    let a = t.call(
        "composite",
        &format!("{V}/composite"),
        &[],
        Some(json!({"compositeRequest": too_many})),
    );
    assert_eq!(a.response.status, 400);
}

#[test]
fn composite_graph_is_all_or_nothing_per_graph() {
    let mut t = T::new();
    let a = t.call(
        "composite_graph",
        &format!("{V}/composite/graph"),
        &[],
        Some(json!({"graphs": [
            {"graphId": "good", "compositeRequest": [
                {"method": "POST", "url": "/services/data/v59.0/sobjects/Account", "referenceId": "a", "body": {"Name": "G"}},
                {"method": "POST", "url": "/services/data/v59.0/sobjects/Contact", "referenceId": "c", "body": {"LastName": "L", "AccountId": "@{a.id}"}}]},
            {"graphId": "bad", "compositeRequest": [
                {"method": "POST", "url": "/services/data/v59.0/sobjects/Account", "referenceId": "a", "body": {"Name": "B"}},
                {"method": "POST", "url": "/services/data/v59.0/sobjects/Contact", "referenceId": "c", "body": {"AccountId": "@{a.id}"}}]},
        ]})),
    );
    let g = body(&a)["graphs"].clone();
    assert_eq!(g[0]["isSuccessful"], true);
    assert_eq!(g[1]["isSuccessful"], false);
    assert_eq!(
        g[1]["graphResponse"]["compositeResponse"][0]["body"][0]["errorCode"],
        "PROCESSING_HALTED"
    );
    let names: Vec<Value> = t
        .org()
        .of_object("Account")
        .iter()
        .map(|r| r["Name"].clone())
        .collect();
    assert_eq!(names, vec![json!("G")]);
}

#[test]
fn query_pages_follow_next_records_url_in_order() {
    let mut t = T::new();
    for chunk in 0..3 {
        let recs: Vec<Value> = (0..150)
            .map(|i| json!({"attributes": {"type": "Contact"}, "LastName": format!("L{:03}", chunk * 150 + i)}))
            .collect();
        t.call(
            "collections_create",
            &format!("{V}/composite/sobjects"),
            &[],
            Some(json!({"records": recs})),
        );
    }
    let q = "SELECT Id, LastName FROM Contact ORDER BY LastName";
    let a = t.raw(
        "query",
        &format!("{V}/query"),
        &[("q", q)],
        None,
        bytes::Bytes::new(),
        Some(200),
    );
    let b = body(&a);
    assert_eq!(
        (b["totalSize"].clone(), b["done"].clone()),
        (json!(450), json!(false))
    );
    assert_eq!(b["records"].as_array().unwrap().len(), 200);
    let mut names: Vec<String> = b["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["LastName"].as_str().unwrap().to_string())
        .collect();
    let mut next = b["nextRecordsUrl"].as_str().unwrap().to_string();
    let mut pages = 1;
    loop {
        let path = next.trim_start_matches('/').to_string();
        let a = t.call("query_more", &path, &[], None);
        let b = body(&a);
        pages += 1;
        names.extend(
            b["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["LastName"].as_str().unwrap().to_string()),
        );
        if b["done"] == true {
            assert!(b.get("nextRecordsUrl").is_none());
            break;
        }
        next = b["nextRecordsUrl"].as_str().unwrap().to_string();
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..450).map(|i| format!("L{i:03}")).collect();
    assert_eq!(names, want);
    let a = t.call(
        "query_more",
        &format!("{V}/query/01gXXXXXXXXXXXX-200"),
        &[],
        None,
    );
    assert_eq!(body(&a)[0]["errorCode"], "INVALID_QUERY_LOCATOR");
    let a = t.call(
        "query",
        &format!("{V}/query"),
        &[("q", "SELECT COUNT() FROM Contact")],
        None,
    );
    assert_eq!(a.response.status, 400);
    assert_eq!(body(&a)[0]["errorCode"], "MALFORMED_QUERY");
}

#[test]
fn bulk_ingest_then_query_as_a_state_machine() {
    let mut t = T::new();
    let a = t.call("bulk_ingest_create", &format!("{V}/jobs/ingest"), &[],
        Some(json!({"object": "Contact", "operation": "insert", "lineEnding": "LF", "columnDelimiter": "COMMA"})));
    assert_eq!(a.response.status, 200);
    let job = body(&a)["id"].as_str().unwrap().to_string();
    assert_eq!(body(&a)["state"], "Open");
    assert_eq!(
        body(&a)["contentUrl"],
        format!("services/data/v59.0/jobs/ingest/{job}/batches")
    );
    // Results before the job is done: refused.
    let a = t.call(
        "bulk_ingest_results",
        &format!("{V}/jobs/ingest/{job}/successfulResults"),
        &[],
        None,
    );
    assert_eq!(a.response.status, 409);
    let csv_text = "FirstName,LastName\nAda,Lovelace\nGrace,\"Hopper, RADM\"\nNo,\n";
    let a = t.raw(
        "bulk_ingest_upload",
        &format!("{V}/jobs/ingest/{job}/batches"),
        &[],
        None,
        bytes::Bytes::from(csv_text),
        None,
    );
    assert_eq!(a.response.status, 201);
    assert_eq!(a.arguments["rows"], 3);
    assert!(
        !a.arguments.to_string().contains("Lovelace"),
        "rows are not arguments"
    );
    let a = t.call(
        "bulk_ingest_state",
        &format!("{V}/jobs/ingest/{job}"),
        &[],
        Some(json!({"state": "UploadComplete"})),
    );
    assert_eq!(body(&a)["state"], "UploadComplete");
    assert_eq!(
        t.org().of_object("Contact").len(),
        0,
        "not applied before processing"
    );
    let states: Vec<Value> = (0..3)
        .map(|_| {
            body(&t.call(
                "bulk_ingest_get",
                &format!("{V}/jobs/ingest/{job}"),
                &[],
                None,
            ))["state"]
                .clone()
        })
        .collect();
    assert_eq!(
        states,
        vec![
            json!("InProgress"),
            json!("JobComplete"),
            json!("JobComplete")
        ]
    );
    let info = body(&t.call(
        "bulk_ingest_get",
        &format!("{V}/jobs/ingest/{job}"),
        &[],
        None,
    ));
    assert_eq!(
        (
            info["numberRecordsProcessed"].clone(),
            info["numberRecordsFailed"].clone()
        ),
        (json!(3), json!(1))
    );
    let ok_csv = t.call(
        "bulk_ingest_results",
        &format!("{V}/jobs/ingest/{job}/successfulResults"),
        &[],
        None,
    );
    let ok_rows = csv::parse(body(&ok_csv).as_str().unwrap().as_bytes(), b',').unwrap();
    assert_eq!(
        ok_rows.header,
        vec!["sf__Id", "sf__Created", "FirstName", "LastName"]
    );
    assert_eq!(ok_rows.rows.len(), 2);
    assert_eq!(ok_rows.rows[1][3], "Hopper, RADM");
    let bad = t.call(
        "bulk_ingest_results",
        &format!("{V}/jobs/ingest/{job}/failedResults"),
        &[],
        None,
    );
    let bad_rows = csv::parse(body(&bad).as_str().unwrap().as_bytes(), b',').unwrap();
    assert!(
        bad_rows.rows[0][1].starts_with("REQUIRED_FIELD_MISSING"),
        "{:?}",
        bad_rows.rows
    );
    assert_eq!(t.org().of_object("Contact").len(), 2);
    // A second upload to a closed job: refused.
    let a = t.raw(
        "bulk_ingest_upload",
        &format!("{V}/jobs/ingest/{job}/batches"),
        &[],
        None,
        bytes::Bytes::from("A\n1\n"),
        None,
    );
    assert_eq!(a.response.status, 409);

    // Query job: UploadComplete → InProgress → JobComplete, results paged by the locator.
    let a = t.call("bulk_query_create", &format!("{V}/jobs/query"), &[],
        Some(json!({"operation": "query", "query": "SELECT Id, LastName FROM Contact ORDER BY LastName"})));
    let q = body(&a)["id"].as_str().unwrap().to_string();
    assert_eq!(body(&a)["state"], "UploadComplete");
    let a = t.call(
        "bulk_query_results",
        &format!("{V}/jobs/query/{q}/results"),
        &[],
        None,
    );
    assert_eq!(a.response.status, 409);
    t.call("bulk_query_get", &format!("{V}/jobs/query/{q}"), &[], None);
    let info = body(&t.call("bulk_query_get", &format!("{V}/jobs/query/{q}"), &[], None));
    assert_eq!(info["state"], "JobComplete");
    let a = t.call(
        "bulk_query_results",
        &format!("{V}/jobs/query/{q}/results"),
        &[("maxRecords", "1")],
        None,
    );
    let h: std::collections::HashMap<_, _> = a.response.headers.iter().cloned().collect();
    assert_eq!(h["Sforce-NumberOfRecords"], "1");
    let loc = h["Sforce-Locator"].clone();
    assert_ne!(loc, "null");
    let first = csv::parse(body(&a).as_str().unwrap().as_bytes(), b',').unwrap();
    assert_eq!(first.rows[0][1], "Hopper, RADM");
    let a = t.call(
        "bulk_query_results",
        &format!("{V}/jobs/query/{q}/results"),
        &[("maxRecords", "1"), ("locator", &loc)],
        None,
    );
    let h: std::collections::HashMap<_, _> = a.response.headers.iter().cloned().collect();
    assert_eq!(h["Sforce-Locator"], "null");
    let second = csv::parse(body(&a).as_str().unwrap().as_bytes(), b',').unwrap();
    assert_eq!(second.rows[0][1], "Lovelace");

    // A malformed CSV fails the job, not the upload.
    let a = t.call(
        "bulk_ingest_create",
        &format!("{V}/jobs/ingest"),
        &[],
        Some(json!({"object": "Contact", "operation": "insert"})),
    );
    let j2 = body(&a)["id"].as_str().unwrap().to_string();
    t.raw(
        "bulk_ingest_upload",
        &format!("{V}/jobs/ingest/{j2}/batches"),
        &[],
        None,
        bytes::Bytes::from("LastName,X\n\"open\n"),
        None,
    );
    t.call(
        "bulk_ingest_state",
        &format!("{V}/jobs/ingest/{j2}"),
        &[],
        Some(json!({"state": "UploadComplete"})),
    );
    t.call(
        "bulk_ingest_get",
        &format!("{V}/jobs/ingest/{j2}"),
        &[],
        None,
    );
    let info = body(&t.call(
        "bulk_ingest_get",
        &format!("{V}/jobs/ingest/{j2}"),
        &[],
        None,
    ));
    assert_eq!(info["state"], "Failed");
    assert!(
        info["errorMessage"]
            .as_str()
            .unwrap()
            .contains("not closed"),
        "{info}"
    );
    // Unknown jobs and bad job definitions are the agent's mistakes.
    let a = t.call(
        "bulk_ingest_get",
        &format!("{V}/jobs/ingest/750000000000000AAA"),
        &[],
        None,
    );
    assert_eq!(a.response.status, 404);
    let a = t.call(
        "bulk_ingest_create",
        &format!("{V}/jobs/ingest"),
        &[],
        Some(json!({"object": "Contact", "operation": "upsert"})),
    );
    assert_eq!(a.response.status, 400);
    assert!(a.input_error);
}

#[test]
fn ids_are_the_same_for_the_same_calls() {
    let run = || {
        let mut t = T::new();
        let a = t.call(
            "sobject_create",
            &format!("{V}/sobjects/Account"),
            &[],
            Some(json!({"Name": "A"})),
        );
        body(&a)["id"].clone()
    };
    assert_eq!(run(), run());
    assert!(run().as_str().unwrap().starts_with("001"));
}
