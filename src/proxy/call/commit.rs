//! Stage 5, the one commit of every call (STYLE habit 10): the event and the integration's new
//! state in one store transaction under the lock, published to the next call, made durable
//! before the answer leaves; a failed flush withdraws what it published (docs/src/reference/mock-definition.md#state).

use std::collections::hash_map::Entry;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::{scrub, CallInfo};
use crate::app::attempt::{self, Attempt, AttemptState};
use crate::app::App;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::NativeResponse;
use crate::proxy::decision::{Committed, Decision, StoreFailed};
use crate::records::ToolEvent;
use crate::store::{CallRecord, StoreError};

/// [`commit`] of a call decided without the attempt's state (forwarded, blocked, simulated,
/// or failed to forward): takes the state lock, so its event is ordered with the others,
/// and with a shared store the attempt's row lock too (its state read under it, so this
/// process's copy stays current for the next mocked call).
pub async fn record(
    app: &App,
    attempt: &Attempt,
    info: CallInfo,
    decision: Decision,
) -> Result<Committed, StoreFailed> {
    let mut state = attempt.lock.lock().await;
    let _row = attempt::lock_in_store(&app.store, &attempt.id, &mut state).await;
    commit(app, attempt, state, info, decision).await
}

/// Stage 5 — the one commit: write the call's evidence (and the integration's new state)
/// in one store transaction under the state lock, make the new state and the idempotency
/// entry visible, release the lock, then wait for the group flush that makes the write
/// durable: the answer never leaves before its evidence is on disk, yet calls to one attempt
/// share fsyncs. The arguments of a call that carries its secret set (`info.secrets`) are
/// scrubbed first. A failed write commits nothing and is [`StoreFailed`]; so is a failed
/// *flush* (disk gone): the write stays in the store's log and may or may not survive a
/// crash, so it is never acknowledged — and the state change it published is withdrawn
/// ([`withdraw`]) before the 500 is returned. Publishing before the flush keeps the group
/// commit (the next call of the attempt runs during this one's fsync); the rollback copy is
/// the replaced state itself, moved out, not cloned.
pub async fn commit(
    app: &App,
    attempt: &Attempt,
    state: tokio::sync::MutexGuard<'_, AttemptState>,
    info: CallInfo,
    d: Decision,
) -> Result<Committed, StoreFailed> {
    commit_as(app, attempt, state, info, d, false).await
}

/// [`commit`]; `withdrawal`: the record of a [`withdraw`] (nothing to withdraw if it fails,
/// and no second count of the failure).
async fn commit_as(
    app: &App,
    attempt: &Attempt,
    mut state: tokio::sync::MutexGuard<'_, AttemptState>,
    mut info: CallInfo,
    mut d: Decision,
    withdrawal: bool,
) -> Result<Committed, StoreFailed> {
    if let Some(secrets) = &info.secrets {
        scrub(app, secrets, &mut info.arguments);
    }
    if !withdrawal {
        attempt
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    // The caller's span, read once: an MCP call's `params._meta.traceparent` (the only
    // carrier over `mcp stdio`), else the `traceparent` header — the event's `trace_id` (what
    // joins the agent's own spans to the attempt) and the exported span's parent alike
    // (docs/src/guides/traces.md#traces-out).
    let mcp = app
        .is_mcp(&info.integration)
        .then(|| info.span_context.mcp_message(info.operation_id.as_deref()));
    info.trace_id = info
        .span_context
        .caller_of(mcp.as_ref())
        .map(|c| c.trace_id.to_string());
    // The result moves into the event (no deep copy per call): nothing below reads it.
    let result = std::mem::take(&mut d.result);
    let (event, latency_ms) = tool_event(app, &mut info, &d, result);
    // A call of the default attempt missed every exclusive attempt open now.
    let outside = attempt.is_default().then(|| {
        format!(
            "{} {}/{}: {} {}",
            event.timestamp,
            event.integration,
            event.operation_id.as_deref().unwrap_or("?"),
            event.http_status,
            event.result_status.as_str()
        )
    });
    // Traces out: the call's span, made from its event (nothing when export is off).
    let result_json = d.shared.as_ref().and_then(|a| a.result_json.clone());
    let span = app.call_span(
        &attempt.id,
        &event,
        result_json.as_ref(),
        &info.span_context,
        mcp.as_ref(),
    );
    let rec = CallRecord {
        event,
        state: d.new_state.clone(),
        result_json,
    };
    let op_name = info.operation_id.as_deref().unwrap_or("");
    let written = app.store.write_call(&attempt.id, rec);
    let undo = match &written {
        Ok(seq) => publish(&mut state, &mut d, *seq),
        Err(_) => None,
    };
    drop(state);
    // Durability `attempt`: flushed in the background, durable by the verdict read. The
    // commits to wait for are taken now, before anything else of this task writes.
    let ack = written.map(|seq| (seq, app.store.acknowledge(attempt.durability)));
    // A call of the default attempt is counted against the open exclusive attempts while
    // its own commit is on its way (on a fleet both are round trips to PostgreSQL): the
    // count does not depend on the call's durability, and the list it reads is read after
    // the call arrived either way.
    let note = async {
        if let Some(line) = &outside {
            app.attempts
                .note_outside(&app.store, app.clock.now(), line)
                .await;
        }
    };
    let durable = async {
        match ack {
            Ok((seq, wait)) => wait.await.map(|()| seq),
            Err(e) => Err(e),
        }
    };
    let (durable, ()) = tokio::join!(durable, note);
    app.send_call_span(span, durable.as_ref().ok().copied());
    // The default attempt's retention bound (docs/src/reference/config.md).
    if let (true, Ok(seq)) = (attempt.is_default(), &durable) {
        crate::app::retention::after_call(app, attempt, *seq).await;
    }
    let e = match durable {
        Ok(sequence) => {
            app.metrics.observe(
                &info.integration,
                op_name,
                d.result_status.as_str(),
                latency_ms,
            );
            match &d.error {
                Some(CallError::Harness(e)) => tracing::warn!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, code = %e.code, "harness error: {}", e.message
                ),
                Some(CallError::Input(e)) => tracing::info!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, "input error: {}", e.message
                ),
                None => tracing::debug!(
                    attempt = %attempt.id, sequence, integration = %info.integration,
                    operation = op_name, status = d.response.status,
                    result_status = d.result_status.as_str(), source = d.source.as_str(), "call"
                ),
            }
            return Ok(Committed {
                sequence,
                response: d.response,
                delay_ms: d.delay_ms,
            });
        }
        Err(e) => e,
    };
    tracing::error!(attempt = %attempt.id, error = %e, "cannot record the call's evidence");
    if withdrawal {
        return Err(store_failed(&e));
    }
    if let Some(undo) = undo {
        withdraw(app, attempt, undo, &info.integration, &e).await;
    }
    attempt.note_store_failure(&app.store);
    app.metrics
        .observe(&info.integration, op_name, "store_error", latency_ms);
    Err(store_failed(&e))
}

/// The 500 `store_error` of a call whose evidence could not be recorded.
fn store_failed(e: &StoreError) -> StoreFailed {
    let body = json!({ "understudy_error": {
        "kind": "internal_error",
        "code": "store_error",
        "message": format!("the call could not be recorded, so it was not answered: {e}"),
    }});
    StoreFailed {
        response: NativeResponse {
            status: 500,
            headers: vec![("Understudy-Error".into(), "store_error".into())],
            body: Some(body),
        },
    }
}

/// What a commit published before its flush, kept until the flush answered: enough to put
/// it back ([`withdraw`]).
struct Undo {
    /// The call's sequence in the evidence.
    sequence: u64,
    /// `AttemptState::published` once this change was published.
    version: u64,
    /// The integration whose state the call replaced, and what it replaced.
    state: Option<(String, Option<Map<String, Value>>)>,
    /// The idempotency entry the call added.
    remembered: Option<(String, String)>,
}

/// Make the decision's state change and idempotency entry visible to the next call (under
/// the lock, once its evidence is written); `Some` when something changed.
fn publish(state: &mut AttemptState, d: &mut Decision, sequence: u64) -> Option<Undo> {
    let replaced = d.new_state.take().map(|(integ, s)| {
        let old = state.state.insert(integ.clone(), s);
        (integ, old)
    });
    let remembered = d
        .remember
        .take()
        .and_then(|(k, e)| match state.idempotency.entry(k) {
            Entry::Vacant(v) => {
                let k = v.key().clone();
                v.insert(e);
                Some(k)
            }
            Entry::Occupied(_) => None,
        });
    if replaced.is_none() && remembered.is_none() {
        return None;
    }
    state.published += 1;
    Some(Undo {
        sequence,
        version: state.published,
        state: replaced,
        remembered,
    })
}

/// docs/src/reference/mock-definition.md#state for a call answered `store_error` after its change was published: under the
/// lock again, put back the state and idempotency entry it replaced — unless a later call
/// already published a change built on it (then the evidence, where that call follows this
/// one, explains the state; the attempt fails on `store_failures` either way). The embedded
/// store keeps the failed call's write queued (a later flush may still commit it), so the
/// withdrawal is recorded too: a harness error `store_error` carrying the restored state,
/// which fails the verdict for good and makes the store's state the one the next call
/// sees. A shared store (PostgreSQL) rolled the failed transaction back, and every call
/// reads the state under its row lock: nothing to do.
fn withdraw<'a>(
    app: &'a App,
    attempt: &'a Attempt,
    undo: Undo,
    integration: &'a str,
    why: &'a StoreError,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        if app.store.is_shared() {
            return;
        }
        let mut state = attempt.lock.lock().await;
        if state.published != undo.version {
            tracing::error!(
                attempt = %attempt.id, sequence = undo.sequence,
                "a call answered store_error is not withdrawn: a later call already built on its state change"
            );
            return;
        }
        if let Some(k) = &undo.remembered {
            state.idempotency.remove(k);
        }
        let restored = undo.state.map(|(integ, old)| {
            let old = old.unwrap_or_default();
            state.state.insert(integ.clone(), old.clone());
            (integ, old)
        });
        state.published += 1;
        let info = CallInfo::received_at(
            Instant::now(),
            restored.as_ref().map_or(integration, |(i, _)| i.as_str()),
            json!({ "withdrawn_sequence": undo.sequence }),
        );
        let mut d = Decision::harness(HarnessError::new(
            HarnessCode::StoreError,
            format!(
                "call #{} was answered 500 store_error (its evidence could not be made durable: {why}); its state change is withdrawn",
                undo.sequence
            ),
        ));
        d.new_state = restored;
        if commit_as(app, attempt, state, info, d, true).await.is_err() {
            tracing::error!(attempt = %attempt.id, sequence = undo.sequence, "cannot record the withdrawal of a call answered store_error");
        }
    })
}

/// The evidence event of one decided call (its `result` given), and its latency so far
/// (ms). Takes the per-call fields out of `info` (its integration and operation id stay for
/// logging); the store assigns the sequence; `http_status` is the decision's.
fn tool_event(app: &App, info: &mut CallInfo, d: &Decision, result: Value) -> (ToolEvent, f64) {
    let latency_ms = info.received.elapsed().as_secs_f64() * 1000.0;
    let event = ToolEvent {
        sequence: 0,
        execution_attempt_id: std::mem::take(&mut info.execution_attempt_id),
        integration: info.integration.clone(),
        operation_id: info.operation_id.clone(),
        revision: d.revision,
        variant: d.variant.clone(),
        rule: d.rule,
        is_write: info.is_write,
        arguments: std::mem::take(&mut info.arguments),
        result,
        result_status: d.result_status.clone(),
        http_status: d.response.status,
        latency_ms,
        delay_ms: d.delay_ms,
        idempotency_key_ref: info.idempotency_key_ref.take(),
        trace_id: info.trace_id.take(),
        source: d.source.clone(),
        error: d.error.as_ref().map(CallError::to_json),
        timestamp: crate::util::time::rfc3339(app.clock.now()),
        fault: d.fault_record.clone(),
    };
    (event, latency_ms)
}
