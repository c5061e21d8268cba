//! What one request costs in the scenario layer, Rhai against Wasm: `next_request` plus
//! `arrival` of the same workload written twice (tests/fixtures/scenarios/bench_twin.rhai
//! and tests/guests/bench_twin), and the time to generate long_context's prompts of
//! 32,000 tokens with each twin. Run it with
//!
//!     cargo bench -p runner --bench scenario_cost
//!
//! It builds the components first (wasm32-wasip2, into target/wasm-guests). Figures are
//! medians over batches, so a stall of the machine shows as spread, not as the result.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runner::workloads::scenario::files::FileAccess;
use runner::workloads::scenario::{self, HostContext, Next, Params, Scenario};
use runner::workloads::tokenizer::Tokenizer;

const BATCH: u64 = 2_000;
const BATCHES: usize = 25;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn build_components() -> PathBuf {
    let target_dir = repo().join("target/wasm-guests");
    for manifest in ["scenarios/wasm/Cargo.toml", "tests/guests/Cargo.toml"] {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--release",
                "--locked",
                "--target",
                "wasm32-wasip2",
            ])
            .arg("--manifest-path")
            .arg(repo().join(manifest))
            .arg("--target-dir")
            .arg(&target_dir)
            .status()
            .expect("cargo starts");
        assert!(status.success(), "building {manifest} failed");
    }
    target_dir.join("wasm32-wasip2/release")
}

fn load(path: &Path, tokenizer: &Arc<Tokenizer>, overrides: &[(&str, &str)]) -> Box<dyn Scenario> {
    let dir = path.parent().unwrap().to_path_buf();
    let files = FileAccess::lone_file(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
    let host = HostContext::new(tokenizer.clone(), files, true);
    let mut s = scenario::load(path, host).unwrap_or_else(|e| panic!("{e}"));
    let overrides: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = Params::resolve("bench", &s.describe().params, &overrides).unwrap();
    s.configure(&params).unwrap();
    s.phases().unwrap();
    s
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// Per-request cost of next_request + arrival, in microseconds: (min, median, max) over
/// batches.
fn per_request(s: &mut dyn Scenario) -> (f64, f64, f64) {
    let mut index = 0u64;
    let mut batch = |n: u64| {
        let start = Instant::now();
        for _ in 0..n {
            match s.next_request(0, index).unwrap() {
                Next::Request(r) => std::hint::black_box(r),
                other => panic!("unexpected {other:?}"),
            };
            std::hint::black_box(s.arrival(0, index).unwrap());
            index += 1;
        }
        start.elapsed()
    };
    batch(BATCH); // warm-up
    let times = (0..BATCHES)
        .map(|_| batch(BATCH).as_secs_f64() * 1e6 / BATCH as f64)
        .collect();
    median(times)
}

/// Seconds to generate `n` long_context requests of `tokens` prompt tokens.
fn long_prompts(s: &mut dyn Scenario, n: u64) -> Duration {
    let start = Instant::now();
    for i in 0..n {
        std::hint::black_box(s.next_request(0, i).unwrap());
    }
    start.elapsed()
}

fn main() {
    let components = build_components();
    let tokenizer = Arc::new(Tokenizer::load("o200k_base").unwrap());
    let rhai_twin = repo().join("tests/fixtures/scenarios/bench_twin.rhai");
    let wasm_twin = components.join("bench_twin.wasm");

    let start = Instant::now();
    let _ = load(&wasm_twin, &tokenizer, &[]);
    let wasm_start = start.elapsed();

    println!("Scenario layer, per request (next_request + arrival), µs: min / median / max over {BATCHES} batches of {BATCH}");
    for (label, path) in [("Rhai", &rhai_twin), ("Wasm", &wasm_twin)] {
        let mut s = load(path, &tokenizer, &[]);
        let (lo, med, hi) = per_request(&mut *s);
        println!("  {label:<5} {lo:>7.2} / {med:>7.2} / {hi:>7.2}");
    }
    println!(
        "Wasm start-up (compile {} KB component, instantiate, describe): {:.1} ms",
        std::fs::metadata(&wasm_twin)
            .map(|m| m.len() / 1024)
            .unwrap_or(0),
        wasm_start.as_secs_f64() * 1e3
    );

    let rhai_long = repo().join("scenarios/long_context.rhai");
    let wasm_long = components.join("long_context.wasm");
    println!("long_context: 100 prompts of 32,000 tokens, seconds (3 runs)");
    for (label, path) in [("Rhai", &rhai_long), ("Wasm", &wasm_long)] {
        let runs: Vec<String> = (0..3)
            .map(|_| {
                let mut s = load(path, &tokenizer, &[]);
                format!("{:.3}", long_prompts(&mut *s, 100).as_secs_f64())
            })
            .collect();
        println!("  {label:<5} {}", runs.join("  "));
    }
}
