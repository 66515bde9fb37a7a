//! The version-1 mock definition (SPEC section 3): model, references and expressions,
//! evaluation, `check`, and schema-derived drafts.
//!
//! Pure: nothing here does I/O, touches tokio, HTTP or sled. Evaluation returns an
//! [`eval::Outcome`] (result, state patch, delay, variant, rule) or a typed
//! [`crate::error::CallError`]; the caller commits the state patch.

pub mod check;
pub mod eval;
pub mod expr;
pub mod generate;
pub mod model;
pub mod path;

pub use eval::{Engine, Outcome};
pub use model::Definition;
