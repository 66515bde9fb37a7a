//! One proxied call, from routing to the committed evidence (SPEC 4, 5): what happens to a
//! request that `crate::server` did not hand to the admin API.
//!
//! | module | owns |
//! |---|---|
//! | [`route`] | attempt → integration → operation, the `unmatched_request` message |
//! | [`pipeline`] | the call stages of SPEC 5, one documented function each, and evidence |
//! | [`mcp`] | the MCP endpoint of `mcp` integrations in `replay` |
//! | [`mcp_extras`] | resources, prompts and the rest of MCP beyond tools (SPEC 18) |
//! | [`forward`] | every mode but `replay`: forwarding to the real system, unmatched writes |
//!
//! The state these read (integrations, engines, attempts, the recorder, counters) is
//! `crate::app`; the listener that calls them is `crate::server`.

pub mod forward;
pub mod mcp;
pub mod mcp_extras;
pub mod pipeline;
pub mod route;
