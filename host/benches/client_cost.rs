//! What the client costs beside a peer client, by one method: one zero-delay server
//! (`runner sim --sim-profile zero`, each chunk its own write, as a real server's) pinned to
//! CPU 1, each client pinned to CPU 0 in turn, the clients alternated within every round
//! so that drift in the machine's load hits them alike. Run it with
//!
//!     cargo bench -p runner --bench client_cost [-- --rounds N]
//!
//! Clients, from the environment:
//! - `RUNNER_BIN`: ours (default: this build's `runner`);
//! - `RUNNER_BEFORE`: another `runner` build to compare with (e.g. main before a change);
//! - `VLLM_BENCH`: vLLM's Rust client (`vllm-bench`, built from its public source outside
//!   this repository), run with the same workload flags `vllm bench serve` takes;
//! - `BENCH_TOKENIZER`: a Hugging Face tokenizer (a directory holding tokenizer.json) that
//!   every client loads, so that all of them pay for the same tokenizer. Without it our
//!   client runs with its default tokenizer and the peer, which needs one, is left out.
//!
//! Per client, the median over the rounds (and the range) of: CPU-seconds (user + system,
//! `wait4`'s rusage) per million streamed tokens and streamed tokens/s for 2,000 requests
//! of 256 single-token chunks at 64 streams; the CPU of a 64-request run (start-up
//! dominated); the peak resident memory at 64 and at 512 streams. Appended to
//! bench-results/client_cost.md with the machine, the load average and the binaries.

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::Instant;

use serde_json::Value;

mod support;
use support::{machine, pinned, repo, runner_bin, wait_with_usage, Sim};

/// The CPU every client runs on; the server has CPU 1.
const CLIENT_CPU: &str = "0";
const SERVER_CPU: &str = "1";
const OUTPUT_TOKENS: usize = 256;
const INPUT_TOKENS: usize = 16;

/// One workload: `requests` at most `streams` at a time, all offered at once.
#[derive(Clone, Copy)]
struct Load {
    requests: usize,
    streams: usize,
}

const STREAMING: Load = Load {
    requests: 2000,
    streams: 64,
};
const START_UP: Load = Load {
    requests: 64,
    streams: 64,
};
const WIDE: Load = Load {
    requests: 512,
    streams: 512,
};

enum Kind {
    Runner { bin: String },
    VllmBench { bin: String },
}

struct Client {
    name: String,
    kind: Kind,
    tokenizer: Option<String>,
}

/// One client run's figures.
#[derive(Clone, Copy, Default)]
struct Measure {
    cpu_s: f64,
    rss_mib: f64,
    tokens: f64,
    tokens_per_s: f64,
}

impl Client {
    fn run(&self, sim: &Sim, load: Load) -> Measure {
        let out = tempfile::tempdir().expect("temp dir");
        let mut cmd = match &self.kind {
            Kind::Runner { bin } => {
                let mut cmd = pinned(Some(CLIENT_CPU), bin);
                cmd.arg(repo().join("scenarios/throughput.rhai"))
                    .args(["--target", &sim.url, "-q", "--save-result"])
                    .arg(out.path().join("result.json"));
                for (k, v) in [
                    ("requests", load.requests),
                    ("input_tokens", INPUT_TOKENS),
                    ("output_tokens", OUTPUT_TOKENS),
                    ("max_concurrency", load.streams),
                ] {
                    cmd.arg("-p").arg(format!("{k}={v}"));
                }
                cmd.args(["-p", "rate=1e9"]);
                cmd
            }
            Kind::VllmBench { bin } => {
                let mut cmd = pinned(Some(CLIENT_CPU), bin);
                cmd.args(["--backend", "vllm", "--base-url", &sim.url])
                    .args(["--dataset-name", "random", "--ignore-eos", "--disable-tqdm"])
                    .args(["--random-input-len", &INPUT_TOKENS.to_string()])
                    .args(["--random-output-len", &OUTPUT_TOKENS.to_string()])
                    .args(["--num-prompts", &load.requests.to_string()])
                    .args(["--max-concurrency", &load.streams.to_string()])
                    .args(["--save-result", "--result-filename", "result.json"])
                    .arg("--result-dir")
                    .arg(out.path());
                cmd
            }
        };
        if let Some(t) = &self.tokenizer {
            cmd.args(["--tokenizer", t]);
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let started = Instant::now();
        let usage = wait_with_usage(cmd.spawn().expect("client starts"), started);
        let path = out.path().join("result.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let r: Value = serde_json::from_str(&text).expect("result JSON");
        let tokens = r["total_output_tokens"].as_f64().unwrap_or(f64::NAN);
        Measure {
            cpu_s: usage.cpu_s,
            rss_mib: usage.max_rss_kib as f64 / 1024.0,
            tokens,
            tokens_per_s: r["output_throughput"].as_f64().unwrap_or(f64::NAN),
        }
    }
}

fn clients() -> (Vec<Client>, Vec<String>) {
    let tokenizer = std::env::var("BENCH_TOKENIZER").ok();
    let mut notes = Vec::new();
    let mut clients = vec![Client {
        name: "runner".into(),
        kind: Kind::Runner { bin: runner_bin() },
        tokenizer: tokenizer.clone(),
    }];
    if let Ok(bin) = std::env::var("RUNNER_BEFORE") {
        clients.push(Client {
            name: "runner before".into(),
            kind: Kind::Runner { bin },
            tokenizer: tokenizer.clone(),
        });
    }
    match (std::env::var("VLLM_BENCH"), &tokenizer) {
        (Ok(bin), Some(_)) => clients.push(Client {
            name: "vllm-bench".into(),
            kind: Kind::VllmBench { bin },
            tokenizer: tokenizer.clone(),
        }),
        (Ok(_), None) => notes.push("VLLM_BENCH given without BENCH_TOKENIZER: the peer needs a tokenizer file, so it was left out.".into()),
        (Err(_), _) => notes.push("No peer client (VLLM_BENCH unset): our figures alone.".into()),
    }
    if tokenizer.is_some() {
        // What a user who names no tokenizer pays (the built-in o200k_base).
        clients.push(Client {
            name: "runner, default tokenizer".into(),
            kind: Kind::Runner { bin: runner_bin() },
            tokenizer: None,
        });
        if let Ok(bin) = std::env::var("RUNNER_BEFORE") {
            clients.push(Client {
                name: "runner before, default tokenizer".into(),
                kind: Kind::Runner { bin },
                tokenizer: None,
            });
        }
    }
    (clients, notes)
}

/// Every client's measures of one load, round by round.
type Rounds = Vec<Vec<Measure>>;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (mid, v[0], v[v.len() - 1])
}

fn cell(v: Vec<f64>, digits: usize) -> String {
    let (mid, lo, hi) = median(v);
    format!("{mid:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

fn table(clients: &[Client], by_load: &[(Load, Rounds)]) -> String {
    let of = |load: usize, client: usize, f: fn(&Measure) -> f64| -> Vec<f64> {
        by_load[load]
            .1
            .iter()
            .map(|round| f(&round[client]))
            .collect()
    };
    let mut t = String::from("| client | CPU s per 1M tokens | streamed tok/s | CPU s, 64 requests | peak RSS MiB, 64 streams | peak RSS MiB, 512 streams |\n|---|---|---|---|---|---|\n");
    for (i, c) in clients.iter().enumerate() {
        let per_million = |m: &Measure| m.cpu_s / m.tokens * 1e6;
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} |",
            c.name,
            cell(of(0, i, per_million), 2),
            cell(of(0, i, |m| m.tokens_per_s), 0),
            cell(of(1, i, |m| m.cpu_s), 2),
            cell(of(0, i, |m| m.rss_mib), 1),
            cell(of(2, i, |m| m.rss_mib), 1),
        );
    }
    t
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(3usize)
        // Medians need at least one round.
        .max(1);
    let (clients, notes) = clients();
    let mut header = format!(
        "\n### {}\n\n{}\n\nServer: `runner sim --sim-profile zero` ({}) on CPU {SERVER_CPU}; clients on CPU {CLIENT_CPU}, alternated in each of {rounds} rounds. Tokenizer of every client: {}.\n\n",
        chrono::Local::now().format("%Y-%m-%d %H:%M"),
        machine(),
        runner_bin(),
        std::env::var("BENCH_TOKENIZER").unwrap_or_else(|_| "each one's default".into()),
    );
    for c in &clients {
        let bin = match &c.kind {
            Kind::Runner { bin } | Kind::VllmBench { bin } => bin,
        };
        let _ = writeln!(header, "- {}: `{bin}`", c.name);
    }
    for n in &notes {
        let _ = writeln!(header, "\n{n}");
    }
    header.push('\n');
    println!("{header}");
    let sim = Sim::start_on(Some(SERVER_CPU), &["--sim-profile", "zero"]);
    let mut by_load: Vec<(Load, Rounds)> = [STREAMING, START_UP, WIDE]
        .into_iter()
        .map(|l| (l, Vec::new()))
        .collect();
    for round in 0..rounds {
        for (load, measures) in &mut by_load {
            let mut row = vec![Measure::default(); clients.len()];
            // A different client goes first in each round.
            for k in 0..clients.len() {
                let i = (k + round) % clients.len();
                row[i] = clients[i].run(&sim, *load);
                println!(
                    "round {round}, {} requests at {} streams, {}: {:.2} CPU s, {:.0} tok/s, {:.1} MiB",
                    load.requests, load.streams, clients[i].name, row[i].cpu_s, row[i].tokens_per_s, row[i].rss_mib
                );
            }
            measures.push(row);
        }
    }
    let mut report = header;
    report.push_str("Medians over the rounds (min–max); streaming figures from 2,000 requests of 256 single-token chunks at 64 streams.\n\n");
    report.push_str(&table(&clients, &by_load));
    println!("{report}");
    let path = repo().join("bench-results/client_cost.md");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Client cost beside a peer: `cargo bench -p runner --bench client_cost`\n\nEvery figure comes from the kernel's accounting of the finished client process (wait4 rusage: user + system CPU, peak resident memory); throughput is what each client's own result JSON reports.\n".into()
    });
    text.push_str(&report);
    std::fs::write(&path, text).expect("bench-results/client_cost.md");
    println!("\nappended to {}", path.display());
}
