//! Form-encoded and multipart request bodies as input (`understudy::http::form`): a real
//! server in replay answers a form body and a multipart body of the same fields alike, with
//! the fields typed by the operation's input schema (an integer field echoes as a number,
//! repeated keys as an array), refuses a field that does not spell its type as an input
//! error naming it, and records the typed input in evidence with a secret field scrubbed.

use serde_json::{json, Value};

use crate::support::{Project, Server};

const FORM_SECRET: &str = "FormFieldPassword-3e81";

fn message_op() -> Value {
    let result = json!({"status": 201, "data": {
        "to": {"$input": "To"}, "media": {"$input": "MediaUrl"},
        "price": {"$input": "Price"}, "send": {"$input": "Send"},
        "account": {"$input": "AccountSid"}
    }});
    let expected = json!({"status": 201, "data": {
        "to": "+15551230000", "media": ["a", "b"], "price": 12, "send": true,
        "account": "AC1"
    }});
    json!({
        "operation_id": "create_message",
        "description": "Send a message (form-encoded, like Twilio's)",
        "match": {"method": "POST", "path": "/Accounts/{AccountSid}/Messages"},
        "write": true,
        "input_schema": {"type": "object", "required": ["AccountSid", "To", "Price"], "properties": {
            "AccountSid": {"type": "string"},
            "To": {"type": "string"},
            "MediaUrl": {"type": "array", "items": {"type": "string"}},
            "Price": {"type": "integer", "minimum": 0},
            "Send": {"type": "boolean"},
            "password": {"type": "string"}
        }},
        "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
            "status": {"const": 201},
            "data": {"type": "object", "required": ["price", "send"], "properties": {
                "price": {"type": "integer"}, "send": {"type": "boolean"},
                "media": {"type": "array"}
            }}
        }},
        "mock": {
            "schema_version": 1,
            "default_variant": "sent",
            "variants": {"sent": {"result": result}},
            "examples": [{"variant": "sent", "input": {
                "AccountSid": "AC1", "To": "+15551230000", "MediaUrl": ["a", "b"],
                "Price": 12, "Send": true
            }, "expected": expected}]
        }
    })
}

fn multipart(boundary: &str, fields: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in fields {
        s.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
        ));
    }
    s.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"; filename=\"n.txt\"\r\nContent-Type: text/plain\r\n\r\nattached\r\n--{boundary}--\r\n"
    ));
    s
}

#[tokio::test]
async fn form_and_multipart_bodies_are_typed_input_in_replay() {
    let p = Project::new(&[("tw", "rest")]);
    p.op("tw", message_op());
    let s = Server::start(&p).await;
    let form_ct = ("content-type", "application/x-www-form-urlencoded");
    let body = format!(
        "To=%2B15551230000&MediaUrl=a&MediaUrl=b&Price=12&Send=true&password={FORM_SECRET}"
    );
    let r = s
        .call_raw("POST", "/tw/Accounts/AC1/Messages", &body, &[form_ct])
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let want = json!({"to": "+15551230000", "media": ["a", "b"], "price": 12, "send": true, "account": "AC1"});
    assert_eq!(r.json(), want);

    // The same fields as multipart/form-data (and a file part).
    let mp = multipart(
        "XbOuNd",
        &[
            ("To", "+15551230000"),
            ("MediaUrl", "a"),
            ("MediaUrl", "b"),
            ("Price", "12"),
            ("Send", "true"),
        ],
    );
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            &mp,
            &[("content-type", "multipart/form-data; boundary=XbOuNd")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json(), want);

    // A field that does not spell its schema's type: an input error naming the field.
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            "To=x&Price=twelve",
            &[form_ct],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("Price"), "{}", r.text);
    // A required field missing.
    let r = s
        .call_raw("POST", "/tw/Accounts/AC1/Messages", "To=x", &[form_ct])
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("Price"), "{}", r.text);
    // A broken multipart body is an input error, not a harness error.
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            "--XbOuNd\r\nContent-Disposition: form-data; name=\"To\"\r\n\r\nx",
            &[("content-type", "multipart/form-data; boundary=XbOuNd")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("multipart"), "{}", r.text);

    // Evidence: the typed input, the secret field scrubbed.
    let ev = s.evidence(&s.default_attempt()).await;
    let events = ev["tool_events"].as_array().unwrap();
    let args = &events[0]["arguments"];
    assert_eq!(args["Price"], 12, "{args}");
    assert_eq!(args["MediaUrl"], json!(["a", "b"]), "{args}");
    assert_eq!(args["Send"], true, "{args}");
    let pw = args["password"].as_str().unwrap_or("");
    assert!(pw.starts_with("[redacted:"), "{args}");
    assert_eq!(events[1]["arguments"]["note"], "attached");
    let text = ev.to_string();
    assert!(
        !text.contains(FORM_SECRET),
        "the form secret reached evidence"
    );
    s.stop().await.unwrap();
}
