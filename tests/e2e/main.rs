//! End-to-end tests: they run the real `runner` binary against the built-in simulated
//! server (or a deliberately broken one) over real HTTP on loopback.

mod support;

mod bad_input;
mod cli;
mod compare;
mod determinism;
mod fault_server;
mod faults;
mod html;
mod llamacpp;
mod metrics;
mod outage;
mod packages;
mod precision;
mod progress;
mod report;
mod shards;
mod signals;
mod thresholds;
mod timing;
mod wasm;
mod workloads;
