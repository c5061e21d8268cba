//! The end-to-end tests that check measured times against known truth to the millisecond:
//! a test binary of their own, because cargo runs test binaries one after another, so the
//! rest of the suite (Wasm component compiles, a headless browser, llama.cpp) never runs
//! beside them on a 2-core machine. Within this binary they still take turns through
//! `support::exclusive`.

#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

#[path = "../e2e/metrics.rs"]
mod metrics;
#[path = "../e2e/precision.rs"]
mod precision;
#[path = "../e2e/timing.rs"]
mod timing;
