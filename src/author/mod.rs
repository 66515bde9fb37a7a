//! The offline writers and checkers of operation files: nothing here serves a call or opens
//! the store.
//!
//! | module | owns |
//! |---|---|
//! | [`record`] | captured exchanges → draft operation files (a pure transformation), secret scrubbing, the writer |
//! | [`import`] | `understudy import`: HAR, Postman, WireMock, OpenAPI → operation files, with a report of what could not be mapped |
//! | [`discover`] | a live MCP server's tools/list → operation files |
//! | [`generate`] | schema-derived draft mocks (`understudy generate`) |
//! | [`sample`] | strings that satisfy a `pattern` (seeded, deterministic), for `generate` |
//! | [`drift`] | `understudy drift`: each read example sent to the real system (through `crate::upstream`) and its answer diffed against the mock's |

pub mod discover;
pub mod drift;
pub mod generate;
pub mod import;
pub mod record;
pub mod sample;
