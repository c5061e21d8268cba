//! The target side: the built-in simulated server and the scrape of a server's own metrics.

pub mod server_metrics;
pub mod sim;
