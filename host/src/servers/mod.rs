//! The target side: the built-in simulated server, the scrape of a server's own metrics,
//! the calls that control a server around a phase (prefix-cache reset, profiler), and the
//! fit of a server's twin from its runs (`runner calibrate`).

pub mod control;
pub mod server_metrics;
pub mod sim;
pub mod twin;
