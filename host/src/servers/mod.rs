//! The target side: the built-in simulated server, the scrape of a server's own metrics,
//! and the calls that control a server around a phase (prefix-cache reset, profiler).

pub mod control;
pub mod server_metrics;
pub mod sim;
