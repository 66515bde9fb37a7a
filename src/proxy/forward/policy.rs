//! What a blocked or simulated write answers (docs/src/reference/modes.md, docs/src/concepts/errors.md; the table of [`super`]; the rule
//! of the mode that decides it is `crate::proxy::decision::plan_for`): the message naming
//! why, and the deterministic fake id of a simulated one.
//! Also the evidence of a forward-proxy request to a host no integration covers
//! ([`refuse_unknown_host`]).

use sha2::{Digest, Sha256};

use crate::app::App;
use crate::config::Mode;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::NativeResponse;
use crate::profile::Profile;
use crate::proxy::call::{self, CallInfo};
use crate::proxy::decision::Decision;
use crate::records::{AttemptRecord, ResultStatus};

/// Why a write was blocked, in words the agent (and the log) can act on.
pub fn blocked_message(app: &App, integration: &str, what: &str) -> String {
    match app.mode {
        Mode::DryRun => format!(
            "understudy blocked this write: {what} has no mock, and in dry-run mode writes never reach the real system (integrations.{integration}.unmatched_writes is `block`; `simulate` answers a synthetic success, `tag` forwards it marked as test traffic)"
        ),
        _ => format!(
            "understudy blocked this write: {what} would change the real system, and `{}` mode blocks writes unless started with --allow-writes",
            app.mode
        ),
    }
}

/// The deterministic fake id of the `n`-th simulated write of an attempt (module doc).
/// `segments`: the request's path relative to the integration (for the sObject name).
pub fn fake_id(
    profile: &Profile,
    attempt: &AttemptRecord,
    integration: &str,
    n: u64,
    segments: &[String],
) -> String {
    let run = attempt
        .test_run_id
        .as_deref()
        .unwrap_or(&attempt.attempt_id);
    let digest =
        Sha256::digest(format!("understudy-simulate\0{run}\0{integration}\0{n}").as_bytes());
    let h: &[u8] = digest.as_slice();
    if profile.kind() == Some(crate::contract::ProfileKind::Salesforce) {
        let mut body = [0u8; 12];
        body.copy_from_slice(&h[..12]);
        return crate::profile::salesforce::record_id(
            crate::profile::salesforce::key_prefix_of_path(segments),
            &body,
        );
    }
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = crate::util::ids::hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..]
    )
}

/// The forward proxy's 403 `unknown_upstream_host` for a host no integration covers (the
/// connection closes): `message` names the host and the configured ones.
pub fn unknown_host_answer(message: &str) -> NativeResponse {
    NativeResponse {
        status: 403,
        headers: vec![
            ("Understudy-Error".into(), "unknown_upstream_host".into()),
            ("Connection".into(), "close".into()),
        ],
        body: Some(serde_json::json!({ "understudy_error": {
            "kind": "proxy_error", "code": "unknown_upstream_host", "message": message } })),
    }
}

/// A forward-proxy request refused because no integration covers its host
/// (`crate::server::connect`: a `CONNECT`, an absolute-form request, a tunnel's request). An
/// agent reached a system the test does not cover, so the refusal is evidence like any call:
/// the harness error `unknown_host` with `message` (which names the host), recorded with the
/// [`unknown_host_answer`] the agent gets, in the attempt `token` names (proxy credentials or
/// `Understudy-Attempt`), else — no token, or one of no attempt — the default attempt. A
/// harness error fails the verdict. `info.arguments` describes the request without its query
/// or body (they are another system's, secrets included). Returns the answer: the 403, or the
/// 500 `store_error` when the evidence could not be recorded.
pub async fn refuse_unknown_host(
    app: &App,
    token: Option<&str>,
    info: CallInfo,
    message: String,
) -> NativeResponse {
    let refused = unknown_host_answer(&message);
    let known = token.and_then(|t| app.attempts.by_token(&app.store, t).ok().flatten());
    let Some(attempt) = known.or_else(|| app.attempts.default_attempt()) else {
        return refused;
    };
    let mut d = Decision::answered(refused, ResultStatus::HarnessError);
    d.error = Some(CallError::Harness(HarnessError::new(
        HarnessCode::UnknownHost,
        message,
    )));
    match call::record(app, &attempt, info, d).await {
        Ok(c) => c.response,
        Err(f) => f.response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::attempt;

    #[test]
    fn fake_ids_are_deterministic_and_well_formed() {
        let sf = Profile::builtin("salesforce").unwrap();
        let new = attempt::NewAttempt {
            token: Some("tok"),
            test_run_id: Some("run-1".into()),
            ..attempt::NewAttempt::default()
        };
        let rec = attempt::new_record(chrono::Utc::now(), new);
        let segs: Vec<String> = ["services", "data", "v60.0", "sobjects", "Contact"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = fake_id(&sf, &rec, "crm", 1, &segs);
        assert_eq!(a.len(), 18);
        assert!(a.starts_with("003"), "{a}");
        assert_eq!(crate::profile::salesforce::to_18(&a[..15]), a);
        assert_eq!(a, fake_id(&sf, &rec, "crm", 1, &segs));
        assert_ne!(a, fake_id(&sf, &rec, "crm", 2, &segs));
        assert!(fake_id(&sf, &rec, "crm", 1, &[]).starts_with("a00"));
        let rest = Profile::builtin("rest").unwrap();
        let u = fake_id(&rest, &rec, "api", 1, &[]);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
