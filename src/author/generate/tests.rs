use super::*;

fn op(v: Value) -> OperationFile {
    serde_json::from_value(v).unwrap()
}

#[test]
fn salesforce_create_gets_201_and_a_checked_draft() {
    let o = op(json!({
        "operation_id": "create_contact",
        "match": {"method": "POST", "path": "/services/data/*/sobjects/Contact"},
        "input_schema": {"type": "object", "required": ["LastName", "Email"], "properties": {
            "LastName": {"type": "string", "minLength": 2},
            "Email": {"type": "string", "format": "email"},
            "BirthDate": {"type": "string", "format": "date"},
            "Tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "Age": {"type": "integer", "minimum": 18, "maximum": 120},
            "Kind": {"enum": ["patient", "carer"]}
        }},
        "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
            "status": {"type": "integer"},
            "data": {"type": "object", "required": ["id", "success", "errors"], "properties": {
                "id": {"type": "string", "minLength": 15, "maxLength": 18},
                "success": {"const": true},
                "errors": {"type": "array", "maxItems": 0}
            }}
        }}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Salesforce);
    assert!(r.supported, "{:?}", r.reasons);
    let d = r.definition.unwrap();
    assert_eq!(
        d["contract_hash"],
        json!(o.contract_hash(crate::contract::ProfileKind::Salesforce))
    );
    let ex = &d["examples"][0];
    assert_eq!(ex["input"]["Email"], "jane.doe@example.com");
    assert_eq!(ex["input"]["Tags"].as_array().unwrap().len(), 2);
    assert_eq!(ex["input"]["Age"], 18);
    assert_eq!(ex["input"]["Kind"], "patient");
    assert_eq!(ex["expected"]["status"], 201);
    assert_eq!(ex["expected"]["data"]["success"], true);
    assert_eq!(ex["expected"]["data"]["errors"], json!([]));
    assert_eq!(ex["expected"], d["variants"]["default"]["result"]);
}

#[test]
fn bare_body_output_schemas_are_explained() {
    let o = op(json!({
        "operation_id": "get_contact",
        "match": {"method": "GET", "path": "/sobjects/Contact/{id}"},
        "output_schema": {"type": "object", "required": ["Id"], "properties": {"Id": {"type": "string"}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Salesforce);
    assert!(!r.supported);
    assert!(
        r.reasons[0].contains("describes a bare response body"),
        "{:?}",
        r.reasons
    );
    // A broad output schema is wrapped in the envelope.
    let o = op(json!({"operation_id": "get_contact", "match": {"method": "GET", "path": "/x"}}));
    let r = generate(&o, crate::contract::ProfileKind::Salesforce);
    assert_eq!(
        r.definition.unwrap()["variants"]["default"]["result"],
        json!({"status": 200, "data": {}})
    );
    let o = op(json!({"operation_id": "upd", "match": {"method": "PATCH", "path": "/x"}}));
    let r = generate(&o, crate::contract::ProfileKind::Salesforce);
    assert_eq!(
        r.definition.unwrap()["variants"]["default"]["result"],
        json!({"status": 204})
    );
}

#[test]
fn envelope_schemas_are_generated_as_they_are() {
    let o = op(json!({
        "operation_id": "ping",
        "match": {"method": "GET", "path": "/ping"},
        "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
            "status": {"type": "integer", "minimum": 200, "maximum": 299},
            "data": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
        }}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Rest);
    assert!(r.supported, "{:?}", r.reasons);
    assert_eq!(
        r.definition.unwrap()["variants"]["default"]["result"],
        json!({"status": 200, "data": {"ok": true}})
    );
}

#[test]
fn beyond_the_generator_says_why() {
    let o = op(json!({
        "operation_id": "lookup",
        "match": {"method": "GET", "path": "/x"},
        "input_schema": {"type": "object", "required": ["phone"], "properties": {"phone": {"type": "string", "not": {"const": "x"}}}},
        "output_schema": {"type": "object", "properties": {"status": {"type": "integer"}, "data": {"if": {"type": "object"}}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Rest);
    assert!(!r.supported);
    assert!(r.definition.is_none());
    assert!(
        r.reasons
            .iter()
            .any(|x| x.starts_with("input_schema/properties/phone: `not`")),
        "{:?}",
        r.reasons
    );
    assert!(
        r.reasons
            .iter()
            .any(|x| x.starts_with("output_schema/properties/data: `if`")),
        "{:?}",
        r.reasons
    );
    // A default settles a pattern.
    let o = op(json!({
        "operation_id": "lookup",
        "match": {"method": "GET", "path": "/x"},
        "input_schema": {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]+$", "default": "+15550100"}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Rest);
    assert_eq!(
        r.definition.unwrap()["examples"][0]["input"]["phone"],
        "+15550100"
    );
    // A default that violates the schema is replaced by a generated value, and said.
    let o = op(json!({
        "operation_id": "lookup",
        "match": {"method": "GET", "path": "/x"},
        "input_schema": {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]+$", "default": "nope"}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Rest);
    assert!(r.supported, "{:?}", r.reasons);
    assert!(
        r.replaced[0].starts_with("mock/examples/0/input"),
        "{:?}",
        r.replaced
    );
    let phone = r.definition.unwrap()["examples"][0]["input"]["phone"].clone();
    assert!(phone.as_str().unwrap().starts_with('+'), "{phone}");
}

#[test]
fn schemas_real_documents_use() {
    // A Twilio-like contract: patterned SIDs, lengths, formats, nullable members,
    // allOf/oneOf, a recursive `$defs` reference, an example that fails its own format.
    let o = op(json!({
        "operation_id": "fetch_account",
        "match": {"method": "GET", "path": "/Accounts/{Sid}.json"},
        "input_schema": {"type": "object", "required": ["Sid"], "properties": {
            "Sid": {"type": "string", "pattern": "^AC[0-9a-fA-F]{32}$", "minLength": 34, "maxLength": 34}}},
        "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
            "status": {"type": "integer"},
            "data": {"allOf": [
                {"type": "object", "required": ["sid", "uri"], "properties": {
                    "sid": {"type": ["string", "null"], "pattern": "^AC[0-9a-fA-F]{32}$"},
                    "uri": {"type": "string", "format": "uri", "examples": ["/2010-04-01/Accounts.json"]}}},
                {"type": "object", "required": ["price", "kind", "when", "tree"], "properties": {
                    "price": {"type": "number", "minimum": 0.5, "multipleOf": 0.25},
                    "kind": {"oneOf": [{"type": "null"}, {"type": "string", "enum": ["a", "b"]}]},
                    "when": {"type": "string", "format": "date-time"},
                    "tree": {"$ref": "#/$defs/node"}}}
            ]}
        }, "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Rest);
    assert!(r.supported, "{:?}", r.reasons);
    assert!(
        r.replaced.iter().any(|x| x.contains("uri")),
        "{:?}",
        r.replaced
    );
    let d = r.definition.unwrap();
    let sid = d["examples"][0]["input"]["Sid"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sid.starts_with("AC") && sid.len() == 34, "{sid}");
    let data = &d["variants"]["default"]["result"]["data"];
    assert_eq!(data["uri"], "https://example.com/", "{data}");
    assert_eq!(data["kind"], "a", "{data}");
}

#[test]
fn mcp_results() {
    let o = op(json!({
        "operation_id": "get_weather",
        "input_schema": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
        "output_schema": {"type": "object", "required": ["temp"], "properties": {"temp": {"type": "number", "exclusiveMinimum": -100}}}
    }));
    let r = generate(&o, crate::contract::ProfileKind::Mcp);
    assert!(r.supported, "{:?}", r.reasons);
    assert_eq!(
        r.definition.unwrap()["variants"]["default"]["result"],
        json!({"temp": 1})
    );
    let o = op(json!({"operation_id": "echo", "result_form": "call_tool_result"}));
    let r = generate(&o, crate::contract::ProfileKind::Mcp);
    assert!(r.supported, "{:?}", r.reasons);
    assert_eq!(
        r.definition.unwrap()["variants"]["default"]["result"]["content"][0]["type"],
        "text"
    );
    let o = op(json!({"operation_id": "echo", "match": {"method": "GET", "path": "/x"}}));
    let r = generate(&o, crate::contract::ProfileKind::Mcp);
    assert!(!r.supported);
    assert!(r.reasons[0].starts_with("match: "), "{:?}", r.reasons);
}
