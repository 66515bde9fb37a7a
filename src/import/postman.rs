//! Not implemented yet: `--from postman` answers a usage error.
use super::Imported;
use crate::config::{ProfileKind, Scrub};
use std::path::Path;
pub fn import(
    _f: &Path,
    _t: &str,
    _i: &str,
    _p: ProfileKind,
    _s: &Scrub,
    _u: Option<&str>,
) -> Result<Imported, String> {
    Err("`--from postman` is not implemented yet".to_string())
}
