//! The `rest` profile: any JSON-over-HTTP API. Everything it needs is data in
//! `profiles/rest.json` (write methods, the `{"error":{"message","details"}}` error body, the
//! synthetic answers of simulated writes); this file embeds it and makes fake ids.

/// `profiles/rest.json`, embedded in the binary.
pub const PROFILE_JSON: &str = include_str!("../../profiles/rest.json");

/// A fake resource id for a simulated create: a random UUID v4.
pub fn fake_id() -> String {
    crate::util::ids::new_uuid()
}

#[cfg(test)]
mod tests {
    #[test]
    fn fake_ids_differ() {
        assert_ne!(super::fake_id(), super::fake_id());
        assert_eq!(super::fake_id().len(), 36);
    }
}
