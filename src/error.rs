//! The error vocabulary shared by every layer (docs/src/concepts/errors.md).
//!
//! Every failure of a call says who is at fault: the caller (an [`InputError`], an ordinary
//! tool error the agent may recover from) or the test setup (a [`HarnessError`] with one of the
//! codes of docs/src/concepts/errors.md, which always fails the attempt's verdict). A file that cannot be used —
//! the project file or an operation file — is a [`Problem`]: file, JSON path, message.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// The harness error codes of docs/src/concepts/errors.md. `as_str` gives the wire spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessCode {
    UnmatchedRequest,
    UnknownTool,
    NoMock,
    UnknownVariant,
    MissingReference,
    InvalidFixtureLiteral,
    OutputSchemaViolation,
    LeaseExpired,
    /// A call with the token of an attempt that was ended: answered 410, recorded on that
    /// attempt, and it fails it.
    AttemptEnded,
    StaleContract,
    UpstreamUnavailable,
    /// The forward proxy refused a host no integration covers (the test does not cover it).
    UnknownHost,
    /// A call was answered 500 `store_error` (its evidence could not be made durable) and
    /// its state change withdrawn: recorded so the evidence explains the state after it.
    StoreError,
}

impl HarnessCode {
    pub fn as_str(self) -> &'static str {
        match self {
            HarnessCode::UnmatchedRequest => "unmatched_request",
            HarnessCode::UnknownTool => "unknown_tool",
            HarnessCode::NoMock => "no_mock",
            HarnessCode::UnknownVariant => "unknown_variant",
            HarnessCode::MissingReference => "missing_reference",
            HarnessCode::InvalidFixtureLiteral => "invalid_fixture_literal",
            HarnessCode::OutputSchemaViolation => "output_schema_violation",
            HarnessCode::LeaseExpired => "lease_expired",
            HarnessCode::AttemptEnded => "attempt_ended",
            HarnessCode::StaleContract => "stale_contract",
            HarnessCode::UpstreamUnavailable => "upstream_unavailable",
            HarnessCode::UnknownHost => "unknown_host",
            HarnessCode::StoreError => "store_error",
        }
    }
}

impl std::fmt::Display for HarnessCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The test setup is broken: never a pass.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct HarnessError {
    pub code: HarnessCode,
    pub message: String,
    /// JSON path inside the definition (e.g. `variants/found/result/data/Id`), when known.
    pub path: Option<String>,
}

impl HarnessError {
    pub fn new(code: HarnessCode, message: impl Into<String>) -> Self {
        HarnessError {
            code,
            message: message.into(),
            path: None,
        }
    }
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// The caller sent a bad argument: an ordinary tool error the agent can recover from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    pub message: String,
    /// Path inside the caller's input (e.g. `amount`), when known.
    pub path: Option<String>,
    /// Extra machine-readable details (schema errors), rendered by the profile.
    pub details: Vec<String>,
    /// HTTP status the profile should use (400 by default; 422 for an idempotency mismatch).
    pub status: u16,
    /// The evidence's error code: `input_error`, or `too_deep` for a body nested too deep.
    pub code: &'static str,
}

impl InputError {
    pub fn new(message: impl Into<String>) -> Self {
        InputError {
            message: message.into(),
            path: None,
            details: Vec::new(),
            status: 400,
            code: "input_error",
        }
    }

    /// The input error of a request body that could not be read (not JSON, or nested too
    /// deep: code `too_deep`; the caller, which parsed the body, says which).
    pub fn of_body(message: String, too_deep: bool) -> Self {
        let mut e = InputError::new(message);
        if too_deep {
            e.code = "too_deep";
        }
        e
    }
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// The failure of one call: whose fault it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("input error: {0}")]
    Input(InputError),
    #[error("harness error: {0}")]
    Harness(HarnessError),
}

impl CallError {
    /// `"input_error"` or `"harness_error"`, as in `error_kind` of docs/src/reference/admin-api.md.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Input(_) => "input_error",
            CallError::Harness(_) => "harness_error",
        }
    }
    pub fn message(&self) -> &str {
        match self {
            CallError::Input(e) => &e.message,
            CallError::Harness(e) => &e.message,
        }
    }
    pub fn path(&self) -> Option<&str> {
        match self {
            CallError::Input(e) => e.path.as_deref(),
            CallError::Harness(e) => e.path.as_deref(),
        }
    }
    /// `{"code","message","path"}` as in docs/src/reference/admin-api.md; input errors use code `input_error`
    /// (`too_deep` for a body nested too deep).
    pub fn to_json(&self) -> serde_json::Value {
        let code = match self {
            CallError::Input(e) => e.code,
            CallError::Harness(e) => e.code.as_str(),
        };
        serde_json::json!({ "code": code, "message": self.message(), "path": self.path() })
    }
}

impl From<InputError> for CallError {
    fn from(e: InputError) -> Self {
        CallError::Input(e)
    }
}

impl From<HarnessError> for CallError {
    fn from(e: HarnessError) -> Self {
        CallError::Harness(e)
    }
}

/// One thing wrong with a file the user wrote: an operation file, the project file
/// (`understudy.json`) or a tool-call contract — the crate's one problem type. Prints as `file: json/path: what is wrong, what was expected` (the
/// path is left out when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub file: PathBuf,
    /// `/`-separated JSON path inside the file, e.g. `mock/variants/found/result` or
    /// `integrations/crm/profile`; empty for the file as a whole.
    pub path: String,
    pub message: String,
}

impl Problem {
    pub fn new(
        file: impl AsRef<Path>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Problem {
        Problem {
            file: file.as_ref().to_path_buf(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// `{"file","path","message"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.file.display().to_string(),
            "path": self.path,
            "message": self.message,
        })
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.path,
                self.message
            )
        }
    }
}
