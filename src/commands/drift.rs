//! `understudy drift`: not implemented yet (the pure diff is [`crate::drift`]); the command
//! says so and exits 2 rather than pretending nothing drifted.

use super::Exit;
use crate::cli::DriftArgs;

/// `understudy drift`.
pub fn drift(args: &DriftArgs) -> Exit {
    eprintln!(
        "understudy drift: not implemented yet (integration `{}` was not checked against its upstream)",
        args.integration
    );
    Exit::Usage
}
