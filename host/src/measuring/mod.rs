//! Measuring a run: the engine that drives a scenario, the schedule of sends, the streaming HTTP client, the request-stream digest, the statistics and the pass/fail thresholds.

pub mod client;
pub mod digest;
pub mod engine;
pub mod metrics;
pub mod schedule;
pub mod thresholds;
