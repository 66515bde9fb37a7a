//! Evidence and its judgement: the exported envelope of an attempt, the one verdict, the
//! tool-call contracts that read the evidence, and the reports of it. Pure: nothing here
//! opens the store (the stream writer reads the timeline through a callback and writes to
//! any `Write`; only a long derived list goes to an unlinked temporary file).
//!
//! | module | owns |
//! |---|---|
//! | [`envelope`] | the typed envelope of one attempt (calls, agent-side events, state, contract results, verdict; its JSON Schema is `understudy schema evidence`), redaction, the evaluator's view of the evidence |
//! | [`stream`] | the one writer of the envelope: written as the timeline is read, judged in the same pass, paged with a window |
//! | [`verdict`] | every rule that can fail an attempt with its stable code ([`verdict::Rule`]) and the one function that judges ([`verdict::Judge`]) |
//! | [`verify`] | tool-call contracts: model, static checks, the pure evaluator over evidence |
//! | [`report`] | JUnit XML and the self-contained HTML report of an envelope |

pub mod envelope;
pub mod report;
pub mod stream;
pub mod verdict;
pub mod verify;

pub use envelope::{
    contract_results, evaluate_contracts, redacted, verdict_of, verify_evidence, Envelope, Inputs,
    REDACTED, SCHEMA_VERSION,
};
pub use stream::{envelope, envelope_of};
pub use verdict::{Reason, Rule, Verdict};
