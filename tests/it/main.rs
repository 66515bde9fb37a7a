//! The one integration-test binary. `support` starts real servers on port 0 with a real sled
//! store in a temp dir; each other module tests one feature.

mod support;

mod cli;
mod conformance;
mod serve;
mod store;
mod tls;
