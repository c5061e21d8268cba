//! End-to-end tests: they run the real `runner` binary against the built-in simulated
//! server (or a deliberately broken one) over real HTTP on loopback.

mod support;

mod bad_input;
mod cli;
mod determinism;
mod fault_server;
mod faults;
mod metrics;
mod outage;
mod report;
mod signals;
mod timing;
mod wasm;
