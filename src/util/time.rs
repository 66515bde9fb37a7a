//! The one spelling of a time in stored records and evidence: RFC 3339 in UTC with
//! milliseconds and `Z` (`2026-01-02T03:04:05.678Z`).

use chrono::{DateTime, SecondsFormat, Utc};

/// `t` as RFC 3339 in UTC with milliseconds and `Z`.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The current (system) time as [`rfc3339`]. Code with an injectable clock
/// (`attempt::Clock`) formats that clock's time instead.
pub fn now_rfc3339() -> String {
    rfc3339(DateTime::<Utc>::from(std::time::SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        let t = now_rfc3339();
        assert!(DateTime::parse_from_rfc3339(&t).is_ok(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
        let fixed = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.6789+01:00").unwrap();
        assert_eq!(
            rfc3339(fixed.with_timezone(&Utc)),
            "2026-01-02T02:04:05.678Z"
        );
    }
}
