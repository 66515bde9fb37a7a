//! The one integration-test binary. `support` starts real servers on port 0 with a real sled
//! store in a temp dir; each other module tests one feature.

mod pg;
mod support;

mod agents_fixes;
mod cli;
mod clients;
mod conformance;
mod contracts;
mod control;
mod docs;
mod drift;
mod dryrun;
mod durability;
mod faults;
mod faults_injected;
mod fds;
mod fleet;
mod forward_pool;
mod hostile;
mod hostile_h2;
mod https;
mod import;
mod import_forms;
mod import_real;
mod isolation;
mod mcp;
mod mcp_ask;
mod mcp_era;
mod mcp_record;
mod mcp_stdio;
mod no_silent_pass;
mod otel;
mod record;
mod regression;
mod report;
mod schemas;
mod secrets;
mod serve;
mod store;
mod testing_api;
mod tls;
mod tool_test;
mod verdict;
mod verdict_model;
