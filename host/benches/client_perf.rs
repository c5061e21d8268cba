//! Whole-run cost of the client: the real `runner` binary against `runner sim` in a
//! separate process, so the client's CPU time and memory are its own. Run it with
//!
//!     cargo bench -p runner --bench client_perf [-- --quick]
//!
//! It prints, and appends to bench-results/client_perf.md with the machine and the date:
//! - streamed tokens/s, requests/s and client CPU-seconds (user + system, from `wait4`'s
//!   rusage of the client process) per million streamed tokens, 256 single-token chunks per
//!   request against the `zero` profile, at 64 / 512 / 4096 concurrent streams;
//! - send lateness p50 / p99 / max for Poisson arrivals at 500, 2000, 10000 req/s;
//! - the client's resident memory per stream with 10,000 streams held open (the `fixed`
//!   profile with a first token far in the future), over a 10-stream baseline;
//! - mean TTFT and p99 E2EL against the server's own logged send times
//!   (`--sim-send-log`), `fixed` profile, TTFT 50 ms, 10 ms gaps, 64 tokens, 64 streams.
//!
//! - the same against the server's send log with the simulator alone on CPU 1 and the
//!   client on CPU 0 beside two busy loops, with the kernel's receive times and with the
//!   client's read times (`loaded`, only when named).
//!
//! - the same at 1,000 streams of 100 tokens/s each, simulator on CPU 1 and client on
//!   CPU 0 (`wide`, only when named).
//!
//! Name sections to run only those: `... --bench client_perf -- streaming truth`
//! (streaming, lateness, truth, memory, loaded, wide).
//!
//! The scenario layer's cost and the 100 × 32,000-token prompts are measured by the
//! `scenario_cost` bench.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Instant;

use serde_json::Value;

mod support;
use support::{machine, pinned, repo, runner_bin, wait_with_usage, Sim, Usage};

/// Processes that spin on CPUs `cpus` until dropped: another program's load.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(count: usize, cpus: &str) -> BusyLoops {
        let spin = |_| {
            pinned(Some(cpus), "sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("a busy loop starts")
        };
        BusyLoops((0..count).map(spin).collect())
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One client run: `runner throughput.rhai` against `sim` with `-p` overrides; returns
/// result.json and the client's resource usage.
fn run_client(sim: &Sim, params: &[(&str, String)], extra: &[&str]) -> (Value, Usage) {
    run_scenario(
        &repo().join("scenarios/throughput.rhai"),
        sim,
        params,
        extra,
    )
}

fn run_scenario(
    scenario: &Path,
    sim: &Sim,
    params: &[(&str, String)],
    extra: &[&str],
) -> (Value, Usage) {
    run_scenario_on(None, scenario, sim, params, extra)
}

/// [`run_scenario`] with the client pinned to CPUs `cpus`.
fn run_scenario_on(
    cpus: Option<&str>,
    scenario: &Path,
    sim: &Sim,
    params: &[(&str, String)],
    extra: &[&str],
) -> (Value, Usage) {
    // --save-result, as `vllm bench serve --save-result`: no per-request record file.
    let out = tempfile::tempdir().expect("temp dir");
    let path = out.path().join("result.json");
    let mut cmd = pinned(cpus, &runner_bin());
    cmd.arg(scenario)
        .args(["--target", &sim.url, "-q", "--save-result"])
        .arg(&path)
        .args(extra)
        .stdout(Stdio::null());
    for (k, v) in params {
        cmd.arg("-p").arg(format!("{k}={v}"));
    }
    let started = Instant::now();
    let child = cmd.spawn().expect("runner starts");
    let usage = wait_with_usage(child, started);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    (serde_json::from_str(&text).expect("result.json"), usage)
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or(f64::NAN)
}

fn streaming(report: &mut String, quick: bool) {
    let sim = Sim::start(&["--sim-profile", "zero"]);
    // What a run costs before its first request (loading the tokenizer and the scenario,
    // the preflight): paid once per run, so it is also shown apart from the per-token cost.
    let (_, idle) = run_client(
        &sim,
        &[
            ("requests", "1".into()),
            ("input_tokens", "16".into()),
            ("output_tokens", "256".into()),
        ],
        &[],
    );
    let line = format!("Fixed cost of a run (1 request): {:.2} CPU s\n", idle.cpu_s);
    println!("{line}");
    writeln!(report, "### Streaming throughput (zero profile, 256 single-token chunks per request)\n\n{line}\n| streams | requests | tokens/s | requests/s | client CPU s | CPU s per 1M tokens | same, less the fixed cost | client wall s |\n|---|---|---|---|---|---|---|---|").unwrap();
    for streams in [64usize, 512, 4096] {
        let requests = if quick {
            streams.max(500)
        } else {
            (streams * 4).max(4000)
        };
        let (r, u) = run_client(
            &sim,
            &[
                ("requests", requests.to_string()),
                ("input_tokens", "16".into()),
                ("output_tokens", "256".into()),
                ("rate", "1e9".into()),
                ("max_concurrency", streams.to_string()),
            ],
            &[],
        );
        let tokens = f(&r, &["total_output_tokens"]);
        let row = format!(
            "| {streams} | {requests} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
            f(&r, &["output_throughput"]),
            f(&r, &["request_throughput"]),
            u.cpu_s,
            u.cpu_s / tokens * 1e6,
            (u.cpu_s - idle.cpu_s) / tokens * 1e6,
            u.wall_s
        );
        println!("{row}");
        writeln!(report, "{row}").unwrap();
    }
}

/// Client CPU per 1M streamed tokens with the server's metrics scraped every 100 ms and
/// with scraping off, runs alternated so drift in the machine's load hits both alike.
/// Written to its own file, bench-results/server_metrics.md.
fn scrape(header: &str) {
    let sim = Sim::start(&["--sim-profile", "zero"]);
    let params = [
        ("requests", "4000".to_string()),
        ("input_tokens", "16".into()),
        ("output_tokens", "256".into()),
        ("rate", "1e9".into()),
        ("max_concurrency", "512".into()),
    ];
    let settings: [(&str, &[&str]); 2] = [
        ("off", &["--server-metrics", "off"]),
        ("every 100 ms", &["--server-metrics-interval", "100ms"]),
    ];
    let mut per_million: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..5 {
        for (i, (name, extra)) in settings.iter().enumerate() {
            let (r, u) = run_client(&sim, &params, extra);
            let cpu = u.cpu_s / f(&r, &["total_output_tokens"]) * 1e6;
            println!("round {round}, scraping {name}: {cpu:.2} CPU s per 1M tokens");
            per_million[i].push(cpu);
        }
    }
    let mut text = format!("{header}### Client CPU per 1M streamed tokens, server metrics scraped or not (zero profile, 512 streams, 4000 requests of 256 single-token chunks, 5 alternated runs each)\n\n| scraping | mean | min | max | runs |\n|---|---|---|---|---|\n");
    for (i, (name, _)) in settings.iter().enumerate() {
        let v = &per_million[i];
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, 0f64), |(l, h), x| (l.min(*x), h.max(*x)));
        let runs: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
        writeln!(
            text,
            "| {name} | {mean:.2} | {lo:.2} | {hi:.2} | {} |",
            runs.join(", ")
        )
        .unwrap();
    }
    println!("{text}");
    let path = repo().join("bench-results/server_metrics.md");
    let mut all = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Server metrics scraping: `cargo bench -p runner --bench client_perf -- scrape`\n\nWhat scraping the server's /metrics costs the client: its CPU (user + system, wait4 rusage) per million streamed tokens against the simulator's `zero` profile, whose /metrics is vLLM's set of gauges, counters and histograms.\n".into()
    });
    all.push_str(&text);
    std::fs::write(&path, all).expect("bench-results/server_metrics.md");
}

fn lateness(report: &mut String, quick: bool) {
    let sim = Sim::start(&["--sim-profile", "zero"]);
    writeln!(report, "\n### Send lateness, Poisson arrivals (zero profile, 16 output tokens)\n\n| rate req/s | requests | p50 ms | p99 ms | max ms | client CPU s |\n|---|---|---|---|---|---|").unwrap();
    for rate in [500u64, 2000, 10000] {
        let seconds = if quick { 1 } else { 4 };
        let (r, u) = run_client(
            &sim,
            &[
                ("requests", (rate * seconds).to_string()),
                ("input_tokens", "16".into()),
                ("output_tokens", "16".into()),
                ("rate", rate.to_string()),
                ("max_concurrency", "100000".into()),
            ],
            &[],
        );
        let l = ["runner", "send_lateness"];
        let at = |k: &str| f(&r, &[l[0], l[1], k]);
        let row = format!(
            "| {rate} | {} | {:.3} | {:.3} | {:.3} | {:.2} |",
            rate * seconds,
            at("median_ms"),
            at("p99_ms"),
            at("max_ms"),
            u.cpu_s
        );
        println!("{row}");
        writeln!(report, "{row}").unwrap();
    }
}

fn memory(report: &mut String) {
    // The only token comes 15 s after each request arrives: every stream stays open
    // that long, so all of them are open at once.
    let sim = Sim::start(&["--sim-profile", "fixed", "--sim-ttft-ms", "15000"]);
    writeln!(report, "\n### Memory with streams held open (fixed profile, one token after 15 s)\n\n| streams | client max RSS MiB | peak concurrency |\n|---|---|---|").unwrap();
    let mut rss = Vec::new();
    for streams in [10usize, 10_000] {
        let (r, u) = run_client(
            &sim,
            &[
                ("requests", streams.to_string()),
                ("input_tokens", "16".into()),
                ("output_tokens", "1".into()),
                ("rate", "1e9".into()),
                ("max_concurrency", streams.to_string()),
            ],
            &[],
        );
        let row = format!(
            "| {streams} | {:.1} | {} |",
            u.max_rss_kib as f64 / 1024.0,
            r["max_concurrent_requests"]
        );
        println!("{row}");
        writeln!(report, "{row}").unwrap();
        rss.push((streams, u.max_rss_kib));
    }
    let per_stream = (rss[1].1 - rss[0].1) as f64 / (rss[1].0 - rss[0].0) as f64;
    let line = format!("\nClient memory per open stream: {per_stream:.1} KiB");
    println!("{line}");
    writeln!(report, "{line}").unwrap();
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Where the truth run's processes run, and the client's receive clock.
struct Placement {
    /// CPUs of the simulator and of the client (`taskset -c`); `None`: anywhere.
    server_cpus: Option<&'static str>,
    client_cpus: Option<&'static str>,
    /// Busy loops beside the client, on its CPUs.
    busy_loops: usize,
    clock: &'static str,
    /// Requests in flight, measured requests (after a warm-up of `streams`) and tokens
    /// per answer.
    streams: usize,
    requests: usize,
    tokens: usize,
}

/// The truth run's load as the `truth` and `loaded` sections use it: 64 streams, 640
/// measured requests of 64 tokens.
const NARROW: (usize, usize, usize) = (64, 640, 64);

/// One truth run: result.json, and per request paired with the server's send log by
/// `x-request-id`, the server's TTFT and E2EL and the client's excess over each (ms).
struct Truth {
    result: Value,
    paired: usize,
    ttft: Vec<f64>,
    e2el: Vec<f64>,
    over_ttft: Vec<f64>,
    over_e2el: Vec<f64>,
    /// The client's own delay of every measured chunk (kernel clock only), ms.
    delays: Vec<f64>,
    /// When the server's handler took each request up, after its bytes arrived (ms): a
    /// log counted from the handler, as before 2026-11-24, reads each request short by it.
    handler: Vec<f64>,
    /// The TTFT excess of each request had the log counted from the handler's start.
    over_ttft_from_handler: Vec<f64>,
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// One request in the server's send log: its handler's start and each chunk's send, ms
/// after the request's bytes arrived.
struct Sent {
    handler_ms: f64,
    chunk_ms: Vec<f64>,
}

/// The server's send times of each request, by the x-request-id the runner sent.
fn send_log(path: &Path) -> HashMap<String, Sent> {
    std::fs::read_to_string(path)
        .expect("send log")
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("send log line");
            let chunks = v["chunk_ms"].as_array().expect("chunk_ms").iter();
            let sent = Sent {
                handler_ms: v["handler_ms"].as_f64().unwrap_or(f64::NAN),
                chunk_ms: chunks.map(|c| c.as_f64().unwrap_or(f64::NAN)).collect(),
            };
            (
                v["request_id"].as_str().unwrap_or_default().to_string(),
                sent,
            )
        })
        .collect()
}

/// The fixed profile's timing (TTFT 50 ms, 10 ms gaps: 100 tokens/s per stream); a
/// warm-up phase of `streams` requests, then `requests` measured, `streams` at a time
/// (closed loop).
fn truth_run(place: &Placement) -> Truth {
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log = log_dir.path().join("sent.jsonl");
    let log_arg = log.to_string_lossy().into_owned();
    let out_arg = log_dir.path().join("out").to_string_lossy().into_owned();
    let sim_args = ["--sim-profile", "fixed", "--sim-send-log", &log_arg];
    let sim = Sim::start_on(place.server_cpus, &sim_args);
    let busy = BusyLoops::start(place.busy_loops, place.client_cpus.unwrap_or("0"));
    let (result, _) = run_scenario_on(
        place.client_cpus,
        &repo().join("tests/fixtures/scenarios/truth.rhai"),
        &sim,
        &[
            ("requests", place.requests.to_string()),
            ("concurrency", place.streams.to_string()),
            ("output_tokens", place.tokens.to_string()),
        ],
        &[
            "--percentiles",
            "50,99",
            "--output",
            &out_arg,
            "--receive-clock",
            place.clock,
        ],
    );
    drop(busy);
    drop(sim);
    let sent = send_log(&log);
    // The measured phase's records (phase 1; phase 0 is the warm-up), each with the
    // server's account of it.
    let records =
        std::fs::read_to_string(log_dir.path().join("out/requests.jsonl")).expect("requests.jsonl");
    let paired: Vec<(Value, &Sent)> = records
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("record"))
        .filter(|rec| rec["phase"] == 1)
        .filter_map(|rec| {
            let server = sent.get(rec["request_id"].as_str()?)?;
            (server.chunk_ms.len() == place.tokens).then_some((rec, server))
        })
        .collect();
    let client_ms = |rec: &Value, chunk: usize| {
        let t = rec["chunks"][chunk]["t_ns"].as_u64().unwrap_or(0);
        t.saturating_sub(rec["sent_ns"].as_u64().unwrap_or(0)) as f64 / 1e6
    };
    let last = place.tokens - 1;
    let delays = paired
        .iter()
        .flat_map(|p| p.0["chunks"].as_array().into_iter().flatten())
        .filter_map(|c| c["client_delay_ns"].as_u64())
        .map(|ns| ns as f64 / 1e6);
    Truth {
        paired: paired.len(),
        ttft: sorted(paired.iter().map(|p| p.1.chunk_ms[0]).collect()),
        e2el: sorted(paired.iter().map(|p| p.1.chunk_ms[last]).collect()),
        over_ttft: sorted(
            paired
                .iter()
                .map(|p| client_ms(&p.0, 0) - p.1.chunk_ms[0])
                .collect(),
        ),
        over_e2el: sorted(
            paired
                .iter()
                .map(|p| client_ms(&p.0, last) - p.1.chunk_ms[last])
                .collect(),
        ),
        delays: sorted(delays.collect()),
        handler: sorted(paired.iter().map(|p| p.1.handler_ms).collect()),
        over_ttft_from_handler: sorted(
            paired
                .iter()
                .map(|p| client_ms(&p.0, 0) - (p.1.chunk_ms[0] - p.1.handler_ms))
                .collect(),
        ),
        result,
    }
}

fn truth(report: &mut String) {
    let t = truth_run(&Placement {
        server_cpus: None,
        client_cpus: None,
        busy_loops: 0,
        clock: "kernel",
        streams: NARROW.0,
        requests: NARROW.1,
        tokens: NARROW.2,
    });
    let r = &t.result;
    writeln!(report, "\n### Against the server's own send times (fixed profile: TTFT 50 ms, 10 ms gaps, 64 tokens; 64 streams, 640 requests after a warm-up of 64)\n\n| figure | client measured | server sent (send log) | nominal |\n|---|---|---|---|").unwrap();
    for row in [
        format!(
            "| mean TTFT ms | {:.3} | {:.3} | 50 |",
            f(r, &["mean_ttft_ms"]),
            mean(&t.ttft)
        ),
        format!(
            "| p99 TTFT ms | {:.3} | {:.3} | 50 |",
            f(r, &["p99_ttft_ms"]),
            percentile(&t.ttft, 99.0)
        ),
        format!(
            "| mean E2EL ms | {:.3} | {:.3} | 680 |",
            f(r, &["mean_e2el_ms"]),
            mean(&t.e2el)
        ),
        format!(
            "| p99 E2EL ms | {:.3} | {:.3} | 680 |",
            f(r, &["p99_e2el_ms"]),
            percentile(&t.e2el, 99.0)
        ),
    ] {
        println!("{row}");
        writeln!(report, "{row}").unwrap();
    }
    writeln!(report, "\nRequest by request ({} paired by `x-request-id`), client's figure minus the server's:\n\n| figure | median ms | mean ms | p99 ms |\n|---|---|---|---|", t.paired).unwrap();
    for (what, over) in [("TTFT", &t.over_ttft), ("E2EL", &t.over_e2el)] {
        let row = format!(
            "| {what} excess | {:.3} | {:.3} | {:.3} |",
            percentile(over, 50.0),
            mean(over),
            percentile(over, 99.0)
        );
        println!("{row}");
        writeln!(report, "{row}").unwrap();
    }
}

/// The truth run with the server alone on CPU 1 and the client sharing CPU 0 with two
/// busy loops, with the kernel's receive times and with the client's own read times,
/// alternated `rounds` times.
fn loaded(report: &mut String, rounds: usize) {
    writeln!(report, "\n### Loaded client: the truth run with the simulator alone on CPU 1 and the client on CPU 0 beside two busy loops (`taskset`); client's figure minus the server's send log (counted from the kernel's receipt of each request), request by request. The last two columns: the server's handler start after that receipt, and the TTFT excess over a log counted from the handler instead (the reference before 2026-11-24)\n\n| receive clock | paired | TTFT excess mean ms | TTFT excess p99 ms | E2EL excess mean ms | E2EL excess p99 ms | client delay p50 / p99 / max ms | server handler wait mean / p99 ms | TTFT excess over the handler's time mean / p99 ms |\n|---|---|---|---|---|---|---|---|---|").unwrap();
    for _ in 0..rounds {
        for clock in ["kernel", "user"] {
            let t = truth_run(&Placement {
                server_cpus: Some("1"),
                client_cpus: Some("0"),
                busy_loops: 2,
                clock,
                streams: NARROW.0,
                requests: NARROW.1,
                tokens: NARROW.2,
            });
            let delay = match t.delays.last() {
                Some(max) => format!(
                    "{:.3} / {:.3} / {max:.3}",
                    percentile(&t.delays, 50.0),
                    percentile(&t.delays, 99.0)
                ),
                None => "none".into(),
            };
            let row = format!(
                "| {clock} | {} | {delay} | {} | {} |",
                t.excess_cells(),
                mean_and_p99(&t.handler),
                mean_and_p99(&t.over_ttft_from_handler),
            );
            println!("{row}");
            writeln!(report, "{row}").unwrap();
        }
    }
}

/// The truth run at 1,000 streams of 100 tokens at 100 tokens/s each (100,000 chunks/s
/// at the plateau), server on CPU 1 and client on CPU 0, kernel receive clock: the mean
/// TTFT excess over the server's send log is the accuracy figure of
/// bench-results/client_cost.md.
fn wide(report: &mut String, rounds: usize) {
    writeln!(report, "\n### 1,000 streams at 100 tokens/s each (fixed profile: TTFT 50 ms, 10 ms gaps, 100 tokens; 1,000 measured requests after a warm-up of 1,000; simulator on CPU 1, client on CPU 0); client's figure minus the server's send log, request by request\n\n| round | paired | TTFT excess mean ms | TTFT excess p99 ms | E2EL excess mean ms | E2EL excess p99 ms | client delay p50 / p99 ms | mean ITL ms (client) |\n|---|---|---|---|---|---|---|---|").unwrap();
    for round in 0..rounds {
        let t = truth_run(&Placement {
            server_cpus: Some("1"),
            client_cpus: Some("0"),
            busy_loops: 0,
            clock: "kernel",
            streams: 1000,
            requests: 1000,
            tokens: 100,
        });
        let row = format!(
            "| {round} | {} | {:.3} / {:.3} | {:.3} |",
            t.excess_cells(),
            percentile(&t.delays, 50.0),
            percentile(&t.delays, 99.0),
            f(&t.result, &["mean_itl_ms"]),
        );
        println!("{row}");
        writeln!(report, "{row}").unwrap();
    }
}

impl Truth {
    /// The table cells every truth row starts with: requests paired, then the mean and
    /// p99 of the TTFT and E2EL excess over the server's send log, ms.
    fn excess_cells(&self) -> String {
        format!(
            "{} | {:.3} | {:.3} | {:.3} | {:.3}",
            self.paired,
            mean(&self.over_ttft),
            percentile(&self.over_ttft, 99.0),
            mean(&self.over_e2el),
            percentile(&self.over_e2el, 99.0)
        )
    }
}

fn mean_and_p99(v: &[f64]) -> String {
    format!("{:.3} / {:.3}", mean(v), percentile(v, 99.0))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |name: &str| {
        let picked: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
        picked.is_empty() || picked.iter().any(|a| name.contains(a.as_str()))
    };
    let mut report = format!(
        "\n## {}{}\n\n{}\nBinary: {}\n\n",
        chrono::Local::now().format("%Y-%m-%d %H:%M"),
        if quick { " (--quick)" } else { "" },
        machine(),
        runner_bin()
    );
    println!("{report}");
    // Only when named: it writes its own file.
    if args[1..].iter().any(|a| a == "scrape") {
        scrape(&report);
        return;
    }
    if only("streaming") {
        streaming(&mut report, quick);
    }
    if only("lateness") {
        lateness(&mut report, quick);
    }
    if only("truth") {
        truth(&mut report);
    }
    // Only when named: it pins processes to CPUs 0 and 1 and loads CPU 0.
    if args[1..].iter().any(|a| a == "loaded") {
        loaded(&mut report, if quick { 1 } else { 3 });
    }
    // Only when named: it pins processes to CPUs 0 and 1.
    if args[1..].iter().any(|a| a == "wide") {
        wide(&mut report, if quick { 1 } else { 3 });
    }
    if only("memory") {
        memory(&mut report);
    }
    let path = repo().join("bench-results/client_perf.md");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Client performance: `cargo bench -p runner --bench client_perf`\n\nClient and simulated server are separate processes sharing the machine. CPU is the client process's user + system time (wait4 rusage).\n".into()
    });
    text.push_str(&report);
    std::fs::write(&path, text).expect("bench-results/client_perf.md");
    println!("\nappended to {}", path.display());
}
