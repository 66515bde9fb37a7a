//! Arbitrary captured exchanges (as JSON) → record drafts for each profile → every draft
//! serialized. Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use understudy::author::record::{drafts, Exchange};
use understudy::config::Scrub;
use understudy::contract::ProfileKind;

fuzz_target!(|data: &[u8]| {
    let Ok(exchanges) = serde_json::from_slice::<Vec<Exchange>>(data) else {
        return;
    };
    let scrub = Scrub {
        headers: vec!["X-Secret".into()],
        fields: vec!["ssn".into()],
    };
    for profile in [ProfileKind::Rest, ProfileKind::Salesforce, ProfileKind::Mcp] {
        let set = drafts(&exchanges, &[], profile, &scrub);
        for f in &set.files {
            let _ = f.to_json_pretty();
        }
    }
});
