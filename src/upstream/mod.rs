//! The real system (docs/src/reference/modes.md, docs/src/reference/https.md, docs/src/reference/import-drift.md): the only code that reaches it. Nothing here names the
//! running server (`app`), the proxy, the admin API or the commands: callers pass the client
//! and the limits they use.
//!
//! | module | owns |
//! |---|---|
//! | [`client`] | the pooled HTTP(S) client: rustls, header hygiene, streaming, upstream errors (re-exported here) |
//! | [`mcp_client`] | the one MCP client (`discover`, and an on-demand real `tools/call`): era negotiation, sessions, SSE answers |
//! | [`request`] | the one request built from an input (the inverse of the proxy's input building) and its sending, read whole |
//! | [`call`] | one real call of an operation on demand: HTTP from its `match`, MCP `tools/call` |
//! | [`answer`] | the one real answer → native envelope conversion |
//! | [`diff`] | the one mock-vs-real diff |

pub mod answer;
pub mod call;
pub mod client;
pub mod diff;
pub mod mcp_client;
pub mod request;

pub use client::*;
