//! End-to-end tests: they run the real `runner` binary against the built-in simulated
//! server (or a deliberately broken one) over real HTTP on loopback. The tests that check
//! timing to the millisecond are in their own binary (tests/timing), which cargo runs
//! after this one, so no component compile or browser of these tests runs beside them.

mod support;

mod accounting;
mod apis;
mod backlog;
mod bad_input;
mod bench_serve;
mod budgets;
mod build_steps;
mod calibrate;
mod calibrate_recipe;
mod cli;
mod clock;
mod compare;
mod determinism;
mod energy;
mod fault_server;
mod faults;
mod file_access;
mod fuzz;
mod hostile;
mod html;
mod languages;
mod large;
mod leaks;
mod live;
mod llamacpp;
mod memory_cap;
mod messages;
mod mistakes;
mod oci;
mod otlp;
mod outage;
mod output_dir;
mod packages;
mod prefix_intent;
mod progress;
mod redaction;
mod repeat;
mod report;
mod requests;
mod schema;
mod server_control;
mod server_metrics;
mod session_state;
mod sessions;
mod sessions_languages;
mod shards;
mod signals;
mod sim_timetable;
mod skew;
mod slurm;
mod spec_decode;
mod steady_state;
mod thresholds;
mod tools;
mod traces;
mod tuning_study;
mod virtual_time;
mod wasm;
mod whatif;
mod wheel;
mod workloads;
