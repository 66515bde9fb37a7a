//! Log and progress notifications a variant (or rule) declares (docs/src/reference/mcp.md), sent on the SSE
//! response stream of the call before its result.
//!
//! A declaration is data only, one of:
//! - `{"log": {"level": "info", "data": <any JSON>, "logger"?: "name"}}` →
//!   `notifications/message` `{level, logger?, data}`, sent only at or above the level set
//!   with `logging/setLevel` (all levels before one is set), and only in the session era
//!   (logging is gone in 2026-07-28);
//! - `{"progress": {"progress": 50, "total"?: 100, "message"?: "…"}}` →
//!   `notifications/progress` `{progressToken, progress, total?, message?}`, sent only when
//!   the request's `params._meta.progressToken` is present (its value is echoed).
//!
//! An answer carrying notifications is SSE when the client accepts SSE; a client that
//! accepts only JSON gets the result alone (a JSON answer has nowhere to put them).

use serde_json::{json, Map, Value};

use super::catalog::ExtrasState;

/// The JSON-RPC notifications to send before a result, in declaration order.
pub fn messages(
    declared: Vec<Value>,
    params: Option<&Map<String, Value>>,
    extras: &ExtrasState,
    stateless: bool,
) -> Vec<Value> {
    let token = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number());
    let mut out = Vec::new();
    for d in declared {
        if let Some(log) = d.get("log").and_then(Value::as_object) {
            let level = log.get("level").and_then(Value::as_str).unwrap_or("info");
            if stateless || !extras.log_passes(level) {
                continue;
            }
            let mut p = Map::new();
            p.insert("level".into(), json!(level));
            if let Some(l) = log.get("logger") {
                p.insert("logger".into(), l.clone());
            }
            p.insert(
                "data".into(),
                log.get("data").cloned().unwrap_or(Value::Null),
            );
            out.push(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": p}));
        } else if let Some(progress) = d.get("progress").and_then(Value::as_object) {
            let Some(token) = token else { continue };
            let mut p = Map::new();
            p.insert("progressToken".into(), token.clone());
            for k in ["progress", "total", "message"] {
                if let Some(v) = progress.get(k) {
                    p.insert(k.into(), v.clone());
                }
            }
            out.push(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": p}));
        }
    }
    out
}

/// Whether one declaration is well formed (for `check`): a `log` with a known level, or a
/// `progress` with a numeric `progress`.
pub fn declaration_problem(d: &Value) -> Option<String> {
    if let Some(log) = d.get("log") {
        let level = log.get("level").and_then(Value::as_str);
        if !level.is_some_and(|l| super::catalog::LOG_LEVELS.contains(&l)) {
            return Some(format!(
                "a `log` notification needs `level`, one of {}",
                super::catalog::LOG_LEVELS.join(", ")
            ));
        }
        return None;
    }
    if let Some(p) = d.get("progress") {
        if !p.get("progress").is_some_and(Value::is_number) {
            return Some("a `progress` notification needs a numeric `progress`".into());
        }
        return None;
    }
    Some("expected {\"log\": {...}} or {\"progress\": {...}}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_follow_the_level_and_progress_needs_a_token() {
        let extras = ExtrasState::default();
        let declared = vec![
            json!({"log": {"level": "debug", "data": "d"}}),
            json!({"progress": {"progress": 0, "total": 100}}),
            json!({"log": {"level": "error", "data": {"x": 1}, "logger": "l"}}),
        ];
        let with_token = json!({"_meta": {"progressToken": "p1"}});
        let m = messages(declared.clone(), with_token.as_object(), &extras, false);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1]["params"],
            json!({"progressToken": "p1", "progress": 0, "total": 100})
        );
        assert_eq!(
            m[2]["params"],
            json!({"level": "error", "logger": "l", "data": {"x": 1}})
        );
        let m = messages(declared.clone(), None, &extras, false);
        assert_eq!(m.len(), 2, "no progress without a progressToken");
        let m = messages(declared.clone(), with_token.as_object(), &extras, true);
        assert_eq!(m.len(), 1, "no logs in 2026-07-28");
        assert!(declaration_problem(&declared[0]).is_none());
        assert!(declaration_problem(&json!({"log": {"level": "loud"}})).is_some());
        assert!(declaration_problem(&json!({"progress": {}})).is_some());
        assert!(declaration_problem(&json!({"other": 1})).is_some());
    }
}
