//! The default attempt's retention bound (docs/src/reference/evidence-envelope.md#retention):
//! `"default_attempt": {"max_entries": N}` in `understudy.json`. The default attempt lives as
//! long as the server, so its evidence would grow without end; once the entries the store
//! keeps for it reach `max_entries`, they are judged (`crate::evidence::verdict::Judge::roll_over`),
//! their findings are kept per code in the attempt's record (`rolled_over`), and they leave
//! the store. Attempts created with a token are never rolled over: they end.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

/// `max_entries` when the project file names none.
pub const DEFAULT_MAX_ENTRIES: u64 = 1_000_000;

/// `"default_attempt"` of `understudy.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultAttempt {
    /// The most entries (tool calls and agent-side events) the store keeps for the default
    /// attempt (default 1000000, at least 1): reached, they roll out, judged and counted per
    /// reason code, so a failure among them still fails the attempt.
    #[serde(default = "default_max_entries")]
    pub max_entries: NonZeroU64,
}

fn default_max_entries() -> NonZeroU64 {
    NonZeroU64::new(DEFAULT_MAX_ENTRIES).unwrap_or(NonZeroU64::MIN)
}

impl Default for DefaultAttempt {
    fn default() -> DefaultAttempt {
        DefaultAttempt {
            max_entries: default_max_entries(),
        }
    }
}

impl DefaultAttempt {
    /// Whether the default attempt rolls over after writing `sequence` with entries up to
    /// `rolled_through` rolled out already: the store then keeps `max_entries` of them.
    pub fn due(&self, sequence: u64, rolled_through: u64) -> bool {
        sequence.saturating_sub(rolled_through) >= self.max_entries.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_the_kept_entries_reach_the_bound() {
        let d = DefaultAttempt {
            max_entries: NonZeroU64::new(5).unwrap(),
        };
        assert!(!d.due(4, 0));
        assert!(d.due(5, 0));
        assert!(!d.due(9, 5));
        assert!(d.due(10, 5));
        assert!(d.due(12, 5));
        assert!(!d.due(3, 5), "a sequence before the roll is never due");
        assert_eq!(
            DefaultAttempt::default().max_entries.get(),
            DEFAULT_MAX_ENTRIES
        );
    }

    #[test]
    fn zero_and_unknown_members_are_refused() {
        let e = serde_json::from_str::<DefaultAttempt>(r#"{"max_entries":0}"#).unwrap_err();
        assert!(e.to_string().contains("nonzero"), "{e}");
        assert!(serde_json::from_str::<DefaultAttempt>(r#"{"max":3}"#).is_err());
        let d: DefaultAttempt = serde_json::from_str("{}").unwrap();
        assert_eq!(d, DefaultAttempt::default());
    }
}
