//! The default answers of the Salesforce profile's built-in operations
//! (docs/src/guides/salesforce.md): what a built-in operation answers when no operation file
//! of the same id overrides it — the login ([`super::login`]), the versions list,
//! describeGlobal, `/limits`, SOSL (`search`, `parameterizedSearch`) and the Tooling query.
//! The reads answer an org that has the standard objects and no records: an operation file
//! with a mock (by the same operation id) replaces a default answer entirely.
//!
//! [`answer`] is the one entry: pure, given the call ([`Ctx`], the buffered request and the
//! path after the integration).

use serde_json::{json, Value};

use super::login::{self, Answer, Ctx};
use crate::http::{NativeResponse, Request};

/// The built-in operations that have a default answer.
pub const WITH_DEFAULTS: &[&str] = &[
    "oauth_token",
    "oauth_userinfo",
    "oauth_revoke",
    "soap_login",
    "versions",
    "describe_global",
    "limits",
    "search",
    "parameterized_search",
    "tooling_query",
];

/// Whether built-in operation `operation_id` answers without a file: the login and reads
/// here ([`answer`]) or the org's records, queries and jobs ([`super::org`]).
pub fn has_default(operation_id: &str) -> bool {
    WITH_DEFAULTS.contains(&operation_id) || super::org::WITH_STATE.contains(&operation_id)
}

/// The answer of a built-in operation of the org ([`super::org::WITH_STATE`]) that the
/// attempt's variant decides alone: `request_limit_exceeded` (403), or any other variant
/// (the harness error `unknown_variant`). `None`: no variant, the org answers.
pub fn org_variant(operation_id: &str, variant: Option<&str>) -> Option<Answer> {
    match variant? {
        VARIANT_LIMIT_EXCEEDED => Some(limit_exceeded()),
        v => Some(Answer::unknown_variant(
            operation_id,
            v,
            &format!("`{VARIANT_LIMIT_EXCEEDED}`"),
        )),
    }
}

/// 403 `REQUEST_LIMIT_EXCEEDED`: the org is over its daily API allowance (not 429).
pub fn limit_exceeded() -> Answer {
    Answer::plain(
        NativeResponse {
            status: 403,
            headers: Vec::new(),
            body: Some(
                json!([{"message": "TotalRequests Limit exceeded.", "errorCode": "REQUEST_LIMIT_EXCEEDED"}]),
            ),
        },
        json!({}),
    )
}

/// The variant of every built-in operation with a default answer that answers as an org over
/// its daily API allowance does: 403 `REQUEST_LIMIT_EXCEEDED`.
pub const VARIANT_LIMIT_EXCEEDED: &str = "request_limit_exceeded";

/// The newest API version the default answers name.
pub const LATEST_VERSION: u32 = 66;
/// `DailyApiRequests.Max` of the default org (`Sforce-Limit-Info: api-usage=N/15000`).
pub const DAILY_API_REQUESTS: u64 = 15_000;

/// The default answer of built-in operation `operation_id`, or `None` when it has none.
/// `rel` is the path after the integration (`services`, `data`, `v59.0`, …).
pub fn answer(operation_id: &str, ctx: &Ctx<'_>, req: &Request, rel: &[String]) -> Option<Answer> {
    if !WITH_DEFAULTS.contains(&operation_id) {
        return None;
    }
    if ctx.variant == Some(VARIANT_LIMIT_EXCEEDED) {
        return Some(limit_exceeded());
    }
    let login = matches!(operation_id, "oauth_token" | "soap_login");
    if let (Some(v), false) = (ctx.variant, login) {
        let expected = format!("`{VARIANT_LIMIT_EXCEEDED}`");
        return Some(Answer::unknown_variant(operation_id, v, &expected));
    }
    let a = match operation_id {
        "oauth_token" => login::token(ctx, req),
        "oauth_userinfo" => login::userinfo(ctx, req),
        "oauth_revoke" => login::revoke(ctx, req),
        "soap_login" => {
            let version = rel.get(3).map(String::as_str).unwrap_or("59.0");
            login::soap_login(ctx, req, version)
        }
        "versions" => Answer::plain(
            ok(versions(&ctx.instance_url)),
            Value::Object(Default::default()),
        ),
        "describe_global" => Answer::plain(ok(describe_global(version_of(rel))), json!({})),
        "limits" => Answer::plain(ok(limits(ctx.calls)), json!({})),
        "search" => match q_of(req) {
            Some(q) => Answer::plain(ok(json!({"searchRecords": []})), json!({ "q": q })),
            None => input_error(
                "MALFORMED_SEARCH",
                "No search term found. The search term must be at least 2 characters long.",
            ),
        },
        "parameterized_search" => {
            let body = req.json().ok().flatten().cloned();
            match body
                .as_ref()
                .and_then(|b| b.get("q"))
                .and_then(Value::as_str)
            {
                Some(q) if !q.trim().is_empty() => {
                    let args = body.clone().unwrap_or(Value::Null);
                    Answer::plain(ok(json!({"searchRecords": [], "metadata": {}})), args)
                }
                _ => input_error(
                    "MALFORMED_SEARCH",
                    "expected a JSON body with a non-empty `q`",
                ),
            }
        }
        "tooling_query" => match q_of(req) {
            Some(q) => Answer::plain(
                ok(
                    json!({"size": 0, "totalSize": 0, "done": true, "queryLocator": null, "entityTypeName": null, "records": []}),
                ),
                json!({ "q": q }),
            ),
            None => input_error(
                "MALFORMED_QUERY",
                "expected the query parameter `q` (a SOQL query)",
            ),
        },
        _ => return None,
    };
    Some(a)
}

fn ok(body: Value) -> NativeResponse {
    NativeResponse {
        status: 200,
        headers: Vec::new(),
        body: Some(body),
    }
}

/// A Salesforce error answer (`[{"message","errorCode"}]`, 400) that is the agent's mistake.
fn input_error(code: &str, message: &str) -> Answer {
    let mut a = Answer::plain(
        NativeResponse {
            status: 400,
            headers: Vec::new(),
            body: Some(json!([{"message": message, "errorCode": code}])),
        },
        json!({}),
    );
    a.input_error = true;
    a
}

fn q_of(req: &Request) -> Option<String> {
    req.query
        .iter()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.trim().is_empty())
}

/// The API version segment of `/services/data/vNN.N/…` (`v59.0` → `59.0`).
fn version_of(rel: &[String]) -> &str {
    rel.get(2)
        .map(|v| v.trim_start_matches(['v', 'V']))
        .unwrap_or("59.0")
}

/// `GET /services/data/`: every version from 20.0 to [`LATEST_VERSION`], oldest first, with
/// the release names Salesforce gives them (three a year: Spring, Summer, Winter).
pub fn versions(instance_url: &str) -> Value {
    let _ = instance_url;
    let list: Vec<Value> = (20..=LATEST_VERSION)
        .map(|v| {
            let k = LATEST_VERSION - v;
            let season = ["Spring", "Winter", "Summer"][(k % 3) as usize];
            let year = 26 - (k + 1) / 3;
            json!({
                "label": format!("{season} '{year:02}"),
                "url": format!("/services/data/v{v}.0"),
                "version": format!("{v}.0"),
            })
        })
        .collect();
    Value::Array(list)
}

/// The standard objects of the default org (name, key prefix).
const OBJECTS: &[(&str, &str, &str)] = &[
    ("Account", "001", "Accounts"),
    ("Note", "002", "Notes"),
    ("Contact", "003", "Contacts"),
    ("User", "005", "Users"),
    ("Opportunity", "006", "Opportunities"),
    ("Lead", "00Q", "Leads"),
    ("Task", "00T", "Tasks"),
    ("Event", "00U", "Events"),
    ("Attachment", "00P", "Attachments"),
    ("Product2", "01t", "Products"),
    ("Pricebook2", "01s", "Price Books"),
    ("Case", "500", "Cases"),
    ("Campaign", "701", "Campaigns"),
    ("Contract", "800", "Contracts"),
    ("Order", "801", "Orders"),
];

/// `GET /services/data/vNN.N/sobjects/` (describeGlobal).
pub fn describe_global(version: &str) -> Value {
    let sobjects: Vec<Value> = OBJECTS
        .iter()
        .map(|(name, prefix, plural)| {
            let base = format!("/services/data/v{version}/sobjects/{name}");
            json!({
                "name": name,
                "label": name,
                "labelPlural": plural,
                "keyPrefix": prefix,
                "custom": false,
                "customSetting": false,
                "queryable": true,
                "searchable": true,
                "retrieveable": true,
                "createable": *name != "User",
                "updateable": true,
                "deletable": *name != "User",
                "undeletable": *name != "User",
                "layoutable": true,
                "triggerable": true,
                "replicateable": true,
                "deprecatedAndHidden": false,
                "urls": {
                    "sobject": base,
                    "describe": format!("{base}/describe"),
                    "rowTemplate": format!("{base}/{{ID}}"),
                },
            })
        })
        .collect();
    json!({"encoding": "UTF-8", "maxBatchSize": 200, "sobjects": sobjects})
}

/// `GET /services/data/vNN.N/limits`: `DailyApiRequests` counts the attempt's calls.
pub fn limits(calls: u64) -> Value {
    let max = DAILY_API_REQUESTS;
    let pair = |max: u64, used: u64| json!({"Max": max, "Remaining": max.saturating_sub(used)});
    json!({
        "DailyApiRequests": pair(max, calls),
        "DailyAsyncApexExecutions": pair(250_000, 0),
        "DailyBulkApiBatches": pair(15_000, 0),
        "DailyBulkV2QueryJobs": pair(10_000, 0),
        "DailyBulkV2QueryFileStorageMB": pair(976_562, 0),
        "DataStorageMB": pair(5, 0),
        "FileStorageMB": pair(20, 0),
        "HourlyODataCallout": pair(10_000, 0),
        "SingleEmail": pair(5_000, 0),
    })
}

/// `Sforce-Limit-Info` of an answer after `calls` calls of the attempt.
pub fn limit_info(calls: u64) -> String {
    format!("api-usage={calls}/{DAILY_API_REQUESTS}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_named_like_salesforce_names_them() {
        let v = versions("x");
        let list = v.as_array().unwrap();
        assert_eq!(list[0]["version"], "20.0");
        let last = list.last().unwrap();
        assert_eq!(last["version"], format!("{LATEST_VERSION}.0"));
        assert_eq!(last["label"], "Spring '26");
        let v59 = list.iter().find(|e| e["version"] == "59.0").unwrap();
        assert_eq!(v59["label"], "Winter '24");
        assert_eq!(v59["url"], "/services/data/v59.0");
    }

    #[test]
    fn describe_global_lists_standard_objects() {
        let d = describe_global("59.0");
        let names: Vec<&str> = d["sobjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"Contact") && names.contains(&"Account"));
        assert_eq!(
            d["sobjects"][2]["urls"]["describe"],
            "/services/data/v59.0/sobjects/Contact/describe"
        );
    }

    #[test]
    fn the_limit_variant_answers_403_request_limit_exceeded() {
        let r = Request::new(
            "GET",
            "/crm/services/data/v59.0/sobjects",
            None,
            Default::default(),
            Default::default(),
            "127.0.0.1:1".parse().unwrap(),
            std::time::Instant::now(),
        );
        let mut ctx = Ctx {
            instance_url: "http://x/crm".into(),
            secret: "00",
            attempt_id: "a1",
            integration: "crm",
            variant: Some(VARIANT_LIMIT_EXCEEDED),
            now_ms: 0,
            calls: 1,
        };
        let a = answer("describe_global", &ctx, &r, &r.segments[1..]).unwrap();
        assert_eq!(a.response.status, 403);
        assert_eq!(
            a.response.body.unwrap()[0]["errorCode"],
            "REQUEST_LIMIT_EXCEEDED"
        );
        ctx.variant = None;
        let a = answer("describe_global", &ctx, &r, &r.segments[1..]).unwrap();
        assert_eq!(a.response.status, 200);
        assert!(answer("query", &ctx, &r, &r.segments[1..]).is_none());
        ctx.variant = Some("nope");
        let a = answer("describe_global", &ctx, &r, &r.segments[1..]).unwrap();
        assert_eq!(
            a.harness.unwrap().code,
            crate::error::HarnessCode::UnknownVariant
        );
    }

    #[test]
    fn limits_count_the_calls() {
        assert_eq!(
            limits(7)["DailyApiRequests"],
            json!({"Max": 15000, "Remaining": 14993})
        );
        assert_eq!(limit_info(3), "api-usage=3/15000");
    }
}
