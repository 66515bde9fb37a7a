//! `understudy generate`: print a schema-derived draft mock for an operation; exit 1 when
//! the schema is beyond what can be generated (the reasons on stderr), 2 for usage errors.

use super::{optional_config, resolve_profile, Exit};
use crate::author::generate::generate as draft;
use crate::cli::GenerateArgs;
use crate::operation::load::load_file;

/// `understudy generate`.
pub fn generate(args: &GenerateArgs) -> Exit {
    let cfg = match optional_config(args.config.as_deref(), "generate") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (profile, _) = resolve_profile(args.profile, cfg.as_ref(), &args.operation);
    let loaded = match load_file(&args.operation, profile) {
        Ok(l) => l,
        Err(p) => {
            eprintln!("understudy generate: {p}");
            return Exit::Usage;
        }
    };
    let r = draft(&loaded.op, profile);
    println!(
        "{}",
        serde_json::to_string_pretty(&r.to_json()).unwrap_or_default()
    );
    if r.supported {
        Exit::Ok
    } else {
        for reason in &r.reasons {
            eprintln!(
                "understudy generate: {}: {reason}",
                args.operation.display()
            );
        }
        Exit::Problems
    }
}
