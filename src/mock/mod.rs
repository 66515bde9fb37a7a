//! The version-1 mock definition (docs/src/reference/mock-definition.md): model, references and expressions,
//! evaluation. The engine alone: it knows no operation file (`contract`), no wire and no
//! store; the checks, drafts and the call core that join it to a contract are
//! `crate::operation`.
//!
//! Pure: nothing here does I/O, runs on the async runtime, speaks HTTP or opens the data dir.
//! Evaluation returns an [`eval::Outcome`] (result, state patch, delay, variant, rule) or a
//! typed [`crate::error::CallError`]; the caller commits the state patch.

pub mod eval;
pub mod expr;
pub mod model;
pub mod path;

pub use eval::{Engine, Outcome};
pub use model::Definition;
