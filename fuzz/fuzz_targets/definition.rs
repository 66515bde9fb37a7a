//! Arbitrary bytes → JSON → operation file / mock definition → every check. Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use understudy::contract::OperationFile;
use understudy::mock::{eval::compile_problems, Definition, Engine};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // The value as a bare definition …
    if let Ok(def) = Definition::from_value(&v) {
        let _ = compile_problems(&def);
        if let Ok(engine) = Engine::new(def) {
            let state = engine.initial_state();
            let input = Value::Object(Default::default());
            let _ = engine.evaluate(None, &input, &state);
        }
    }
    // … and as a whole operation file under each profile (`check`).
    if let Ok(op) = serde_json::from_value::<OperationFile>(v) {
        for profile in [
            understudy::contract::ProfileKind::Rest,
            understudy::contract::ProfileKind::Salesforce,
            understudy::contract::ProfileKind::Mcp,
        ] {
            let _ = understudy::operation::check::check_operation(
                &op,
                profile,
                std::path::Path::new("fuzz.json"),
            );
        }
    }
});
