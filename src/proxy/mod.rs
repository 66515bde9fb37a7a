//! One proxied call, from routing to the committed evidence (docs/src/reference/modes.md, docs/src/reference/operation-files.md#matching): what happens to a
//! request that `crate::server` did not hand to the admin API. [`handle`] is the one entry
//! point, in every mode.
//!
//! | module | owns |
//! |---|---|
//! | [`route`] | attempt → integration → operation, the `unmatched_request` message |
//! | [`answer`] | a static result's answer settled once per pinned revision: wire bytes, the event's `result` JSON |
//! | [`decision`] | [`decision::Plan`] (what happens to a call) and the mode rule that picks it, [`decision::Decision`] (how it ended) |
//! | [`call`] | the stages: identify, plan, prepare, evaluate, run_mocked, commit |
//! | [`pipeline`] | the order of an HTTP-profile call's stages, and nothing else |
//! | [`forward`] | the upstream leg: every plan but the mock's — forwarding to the real system, blocked and simulated writes |
//! | [`mcp`] | the one MCP endpoint of `mcp` integrations (replay, and forwarded outside `replay`) |
//!
//! Imports run one way: `pipeline` and `mcp` → `forward` → `call` → `decision`, `answer`,
//! `route`; `call` and `decision` never name `forward`, `mcp` or `pipeline`, and `forward`
//! and `mcp` never name `pipeline` (`scripts/check-layout.sh`).
//!
//! The state these read (integrations, engines, attempts, the recorder, counters) is
//! `crate::app`; the listener that calls them is `crate::server`.

pub mod answer;
pub mod call;
pub mod decision;
pub mod forward;
pub mod mcp;
pub mod pipeline;
pub mod route;

use std::sync::Arc;

use crate::app::App;
use crate::http::{HttpResponse, Request};

/// Answer one proxied request: the MCP endpoint of an `mcp` integration, else the call
/// pipeline of an HTTP profile. The mode is the pipeline's `plan` stage, not a branch here.
pub async fn handle(app: Arc<App>, req: Request) -> HttpResponse {
    if mcp::is_endpoint(&app, &req) {
        mcp::handle(app, req, pipeline::handle).await
    } else {
        pipeline::handle(app, req).await
    }
}
