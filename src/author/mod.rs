//! Offline writers and checkers of operation files (they run from the CLI, never inside a
//! proxied call).
//!
//! | module | owns |
//! |---|---|
//! | [`drift`] | `understudy drift`: each read example sent to the real system and its answer diffed against the mock's (through `crate::upstream`) |

pub mod drift;
