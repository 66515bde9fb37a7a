//! Secret scrubbing's one word: what a scrubbed value becomes ([`SCRUBBED`]). The scrubber
//! itself is `crate::author::record::scrub` for now.

/// What a scrubbed value becomes.
pub const SCRUBBED: &str = "[scrubbed]";
