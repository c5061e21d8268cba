//! The server's Prometheus metrics: scraped from the built-in simulator while a run goes
//! on, written to server_metrics.jsonl, summarised per phase in every report, given to
//! scenarios (kv_guard.rhai), and a target without them is one warning line.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::Value;

use crate::fault_server::{Fault, FaultServer};
use crate::support::{exclusive, run_ok, runner, scenario, stderr, stdout, SimProcess};

/// A run of `args` with `--output` into a temp dir: its stdout, result.json, and the
/// scrapes of server_metrics.jsonl.
fn run_scraped(args: &[&str]) -> (String, Value, Vec<Value>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let mut all = args.to_vec();
    all.extend(["--output", &out]);
    let (stdout, result) = run_ok(&all);
    (stdout, result, samples_in(dir.path()))
}

fn samples_in(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("server_metrics.jsonl"))
        .expect("server_metrics.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The text report from its "Server metrics" section on.
fn server_section(text: &str) -> &str {
    text.split("Server metrics")
        .nth(1)
        .expect("a Server metrics section")
}

/// A phase's summary of the known gauge `name` in result.json.
fn gauge<'a>(phase: &'a Value, name: &str) -> &'a Value {
    phase["runner"]["server_metrics"]["gauges"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == name))
        .unwrap_or_else(|| panic!("no gauge {name} in {}", phase["runner"]["server_metrics"]))
}

const RUNNING: &str = "vllm:num_requests_running";
const WAITING: &str = "vllm:num_requests_waiting";
const KV_USE: &str = "vllm:kv_cache_usage_perc";

#[test]
fn scrapes_come_at_the_interval_and_show_the_simulators_limits() {
    let _quiet = exclusive();
    let max_seqs = 16;
    let (text, result, samples) = run_scraped(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=200",
        "-p",
        "input_tokens=64",
        "-p",
        "output_tokens=64",
        "--sim-max-seqs",
        &max_seqs.to_string(),
        "--server-metrics-interval",
        "100ms",
    ]);
    // At the asked interval, ±20 %: the mean gap between scrapes of the run.
    let times: Vec<f64> = samples.iter().map(|s| s["t_s"].as_f64().unwrap()).collect();
    assert!(times.len() >= 10, "{} scrapes", times.len());
    let gap = (times[times.len() - 1] - times[0]) / (times.len() - 1) as f64;
    assert!(
        (0.08..=0.12).contains(&gap),
        "mean gap between scrapes {gap} s"
    );
    // 512 offered at once over 16 slots: 16 running at the most, the rest waiting.
    assert_eq!(gauge(&result, RUNNING)["max"], max_seqs as f64);
    assert!(gauge(&result, WAITING)["max"].as_f64().unwrap() > 0.0);
    let most_running = samples
        .iter()
        .filter_map(|s| s["values"][RUNNING].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(most_running, max_seqs as f64);
    // The text report has the section, in plain words.
    let section = server_section(&text);
    assert!(
        section.contains("Requests running (mean / max):"),
        "{section}"
    );
    assert!(section.contains(&format!("/ {max_seqs}.00")), "{section}");
    assert!(section.contains("Client TTFT mean (ms):"), "{section}");
}

/// Two simulators of 4 slots each behind two `--target`s: both endpoints are scraped at
/// each tick and seen as one fleet. Each line of server_metrics.jsonl holds both
/// endpoints' values and their combination (requests and counters summed, KV cache use
/// averaged); the report's running maximum is the fleet's 8, which neither server reaches
/// alone.
#[test]
fn every_targets_metrics_are_scraped_and_summed() {
    let _quiet = exclusive();
    let sims = [
        SimProcess::start(&["--sim-max-seqs", "4"]),
        SimProcess::start(&["--sim-max-seqs", "4"]),
    ];
    let (text, result, samples) = run_scraped(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=120",
        "-p",
        "input_tokens=64",
        "-p",
        "output_tokens=64",
        "--target",
        &sims[0].url,
        "--target",
        &sims[1].url,
        "--server-metrics-interval",
        "100ms",
    ]);
    let server = &result["runner"]["server_metrics"];
    assert_eq!(server["endpoints"], 2, "{server}");
    assert_eq!(gauge(&result, RUNNING)["max"], 8.0);
    assert!(gauge(&result, WAITING)["max"].as_f64().unwrap() > 0.0);
    let both: Vec<&Value> = samples
        .iter()
        .filter(|s| s["endpoints"].as_array().is_some_and(|e| e.len() == 2))
        .collect();
    assert!(
        both.len() >= 5,
        "{} of {} scrapes hold both",
        both.len(),
        samples.len()
    );
    for s in both {
        let each = |name: &str| -> Vec<f64> {
            let endpoints = s["endpoints"].as_array().unwrap();
            endpoints
                .iter()
                .filter_map(|e| e["values"][name].as_f64())
                .collect()
        };
        for name in [RUNNING, WAITING, "vllm:prompt_tokens_total"] {
            let parts = each(name);
            assert_eq!(parts.len(), 2, "{name} in {s}");
            assert_eq!(
                s["values"][name].as_f64(),
                Some(parts[0] + parts[1]),
                "{name}"
            );
        }
        let kv = each(KV_USE);
        let mean = (kv[0] + kv[1]) / 2.0;
        let combined = s["values"][KV_USE].as_f64().expect("KV cache use");
        assert!(
            (combined - mean).abs() < 1e-12,
            "{combined} is not the mean of {kv:?}"
        );
    }
    let urls: Vec<String> = sims.iter().map(|s| format!("{}/metrics", s.url)).collect();
    assert!(samples
        .iter()
        .flat_map(|s| s["endpoints"].as_array())
        .flatten()
        .all(|e| {
            e["url"].as_str()
                == urls
                    .get(e["endpoint"].as_u64().unwrap_or(9) as usize)
                    .map(String::as_str)
        }));
    let section = server_section(&text);
    assert!(
        section.contains("Endpoints (summed; % averaged):"),
        "{section}"
    );
    assert!(section.contains("/ 8.00"), "{section}");
}

/// One target of two serves no metrics (the fault server answers /metrics with an event
/// stream): one warning line names it, and the other target's metrics still make the
/// section, as one endpoint.
#[test]
fn a_target_of_several_without_metrics_is_one_warning_and_the_rest_are_read() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&[]);
    let bare = FaultServer::start(|_| Fault::None);
    let o = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=40",
        "-p",
        "input_tokens=32",
        "-p",
        "output_tokens=32",
        "--target",
        &sim.url,
        "--target",
        &bare.url,
        "--server-metrics-interval",
        "100ms",
    ]);
    let (err, text) = (stderr(&o), stdout(&o));
    assert!(o.status.success(), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("server metrics"))
        .collect();
    let bare_metrics = format!("{}/metrics", bare.url.trim_end_matches("/v1"));
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains(&bare_metrics), "{}", warnings[0]);
    assert!(
        warnings[0].ends_with("the other endpoints are still read"),
        "{}",
        warnings[0]
    );
    let section = server_section(&text);
    assert!(
        section.contains("Requests running (mean / max):"),
        "{section}"
    );
    assert!(!section.contains("Endpoints ("), "{section}");
    // The client's TTFT is split only on the simulator, which measured its first tokens:
    // its mean there is the per-target table's (shown to 2 decimals in both).
    assert!(!section.contains("Client TTFT mean (ms):"), "{section}");
    let split = section
        .lines()
        .find_map(|l| l.strip_prefix("Client TTFT mean, target 0 (ms):"))
        .unwrap_or_else(|| panic!("no split on target 0:\n{section}"))
        .trim();
    assert!(
        split.ends_with("(target 1: no server TTFT measured, left out)"),
        "{split}"
    );
    let client = split.split(' ').next().unwrap();
    let per_target = text
        .split("Per-target Metrics")
        .nth(1)
        .and_then(|t| t.lines().find(|l| l.split_whitespace().next() == Some("0")))
        .unwrap_or_else(|| panic!("no per-target row of target 0:\n{text}"));
    assert!(
        per_target.split_whitespace().any(|cell| cell == client),
        "{client} is not target 0's mean TTFT: {per_target}"
    );
}

/// `shared_prefix.rhai` at `ratio`: its result.
fn shared_prefix(ratio: &str) -> Value {
    run_ok(&[
        &scenario("shared_prefix.rhai"),
        "-p",
        "groups=4",
        "-p",
        "requests_per_group=8",
        "-p",
        "input_tokens=2048",
        "-p",
        "output_tokens=8",
        "-p",
        "rate=20",
        "-p",
        &format!("prefix_ratio={ratio}"),
        "--server-metrics-interval",
        "100ms",
    ])
    .1
}

#[test]
fn a_shared_prefix_hits_the_simulators_prefix_cache_and_shortens_ttft() {
    let _quiet = exclusive();
    let shared = shared_prefix("0.75");
    let alone = shared_prefix("0");
    let hit_rate = |r: &Value| r["runner"]["server_metrics"]["prefix_cache_hit_rate"].as_f64();
    // The first request of each group of 8 misses: 0.75 × 7/8 of the prompt tokens hit,
    // less the partial block at the end of each prefix.
    let expected = 0.75 * 7.0 / 8.0;
    let got = hit_rate(&shared).expect("a hit rate");
    assert!(
        (got - expected).abs() < 0.03,
        "hit rate {got}, expected about {expected}"
    );
    assert!(
        hit_rate(&alone).unwrap_or(0.0) < 0.01,
        "{:?}",
        hit_rate(&alone)
    );
    let ttft = |r: &Value| r["mean_ttft_ms"].as_f64().unwrap();
    assert!(
        ttft(&shared) < 0.8 * ttft(&alone),
        "TTFT with shared prefixes {} ms, without {} ms",
        ttft(&shared),
        ttft(&alone)
    );
}

/// A phase's increase of the known counter `name` in result.json.
fn counter_delta(phase: &Value, name: &str) -> f64 {
    phase["runner"]["server_metrics"]["counters"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .and_then(|c| c["delta"].as_f64())
        .unwrap_or_else(|| panic!("no counter {name} in {}", phase["runner"]["server_metrics"]))
}

#[test]
fn every_phase_counts_exactly_the_tokens_the_client_counted() {
    let _quiet = exclusive();
    // Seven phases of 1 to 64 prompts, most far shorter than the 1 s between scrapes: each
    // phase's counters end with the scrape taken after its last response, and start with
    // the one that ended the phase before.
    let (text, result) = run_ok(&[
        &scenario("sweep.rhai"),
        "-p",
        "max_prompts=64",
        "-p",
        "output_tokens=32",
    ]);
    let phases = result["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 7);
    for phase in phases {
        let client_out = phase["total_output_tokens"].as_f64().unwrap();
        let client_in = phase["total_input_tokens"].as_f64().unwrap();
        assert!(client_out > 0.0);
        assert_eq!(
            counter_delta(phase, "vllm:generation_tokens_total"),
            client_out,
            "{}",
            phase["phase"]
        );
        assert_eq!(
            counter_delta(phase, "vllm:prompt_tokens_total"),
            client_in,
            "{}",
            phase["phase"]
        );
    }
    // The last phase's text section reads the client's 64 × 32 tokens.
    let last = text.rsplit("Server metrics").next().unwrap();
    assert!(last.contains("Generated tokens:"), "{last}");
    let generated = last
        .lines()
        .find(|l| l.starts_with("Generated tokens:"))
        .unwrap();
    assert!(generated.contains(" 2048 ("), "{generated}");
}

/// One shared_prefix run against `sim`: its stdout, stderr and result.json.
fn shared_prefix_on(sim: &SimProcess, extra: &[&str]) -> (String, String, Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("result.json").display().to_string();
    let mut args = vec![
        scenario("shared_prefix.rhai"),
        "-p".into(),
        "groups=2".into(),
        "-p".into(),
        "requests_per_group=6".into(),
        "-p".into(),
        "output_tokens=4".into(),
        "--target".into(),
        sim.url.clone(),
        "--save-result".into(),
        path.clone(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let result = std::fs::read_to_string(&path).expect("result.json");
    (
        stdout(&o),
        stderr(&o),
        serde_json::from_str(&result).unwrap(),
    )
}

const LEFTOVER: &str = "which no request of this run could have filled yet";

#[test]
fn the_answers_cached_tokens_give_a_hit_rate_and_a_cache_left_warm_is_a_warning() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&[]);
    let (text, err, first) = shared_prefix_on(&sim, &[]);
    // The simulator's usage says what its prefix cache held, as its counters do.
    let usage = &first["runner"]["prefix_cache"];
    let counters = first["runner"]["server_metrics"]["prefix_cache_hit_rate"]
        .as_f64()
        .unwrap();
    assert_eq!(usage["requests"], 12, "{usage}");
    assert!(
        (usage["hit_rate"].as_f64().unwrap() - counters).abs() < 1e-9,
        "{usage} against {counters}"
    );
    assert!(text.contains("Prefix cache (answers' usage):"), "{text}");
    assert!(
        !text.contains(LEFTOVER) && !err.contains(LEFTOVER),
        "{text}{err}"
    );
    // The same prompts again: the first request finds the first run's prefix.
    let (text, err, second) = shared_prefix_on(&sim, &[]);
    assert!(text.contains(LEFTOVER), "{text}");
    assert!(err.contains(LEFTOVER), "{err}");
    assert!(
        second["runner"]["prefix_cache"]["early_least_share"]
            .as_f64()
            .unwrap()
            > 0.5
    );
    // Emptied first, the run is the first run again: its early requests find nothing.
    // The later ones' hits depend on which requests the simulator's scheduler takes up
    // in the same step (one admitted beside the request that writes its prefix finds
    // less of it), which the machine's load moves: 15,309 against 15,313 cached tokens
    // of 24,580 beside two busy loops. So those are compared within 5 points.
    let (text, err, third) = shared_prefix_on(&sim, &["--reset-prefix-cache", "run"]);
    assert!(
        !text.contains(LEFTOVER) && !err.contains(LEFTOVER),
        "{text}{err}"
    );
    let (again, before) = (
        &third["runner"]["prefix_cache"],
        &first["runner"]["prefix_cache"],
    );
    for key in [
        "requests",
        "prompt_tokens",
        "early_requests",
        "early_prompt_tokens",
        "early_cached_tokens",
        "early_least_share",
    ] {
        assert_eq!(again[key], before[key], "{key}: {again} against {before}");
    }
    let hit_rate = |v: &Value| v["hit_rate"].as_f64().unwrap();
    assert!(
        (hit_rate(again) - hit_rate(before)).abs() < 0.05,
        "{again} against {before}"
    );
}

/// kv_guard's arguments: the rate doubles from 4 req/s every 2 s on a simulator whose KV
/// cache holds 31 requests of 512 + 128 tokens, so KV use passes 90 % within a few phases.
const KV_GUARD_ARGS: [&str; 18] = [
    "-p",
    "start_rate=4",
    "-p",
    "growth=2",
    "-p",
    "phase_duration=2",
    "-p",
    "input_tokens=512",
    "-p",
    "output_tokens=128",
    "-p",
    "waiting_limit=1000",
    "--sim-kv-tokens",
    "20000",
    "--server-metrics-interval",
    "100ms",
    "--seed",
    "7",
];

/// The search stopped at the first phase whose KV use passed 90 %, and its notes say so.
fn assert_stopped_where_kv_filled(result: &Value) {
    let phases = result["phases"].as_array().expect("several phases");
    let kv = |p: &Value| {
        gauge(p, "vllm:kv_cache_usage_perc")["max"]
            .as_f64()
            .unwrap()
    };
    let (last, held) = phases.split_last().expect("phases");
    assert!(kv(last) > 0.9, "the last phase's KV use {}", kv(last));
    for p in held {
        assert!(
            kv(p) <= 0.9,
            "phase {} went on at KV use {}",
            p["phase"],
            kv(p)
        );
    }
    let notes = &result["scenario_result"];
    assert_eq!(notes["crossed_by"], "kv_cache");
    assert_eq!(notes["limit_crossed_at"], last["request_rate"]);
    match held.last() {
        Some(p) => assert_eq!(notes["last_rate_that_held"], p["request_rate"]),
        None => assert_eq!(notes["last_rate_that_held"], "none"),
    }
}

#[test]
fn kv_guard_stops_where_the_kv_cache_fills() {
    let _quiet = exclusive();
    let (_, result) = run_ok(&[&[scenario("kv_guard.rhai").as_str()][..], &KV_GUARD_ARGS].concat());
    assert_stopped_where_kv_filled(&result);
}

#[test]
fn the_sdk_twin_of_kv_guard_stops_where_the_kv_cache_fills() {
    let wasm = crate::wasm::component("kv_guard");
    let _quiet = exclusive();
    let (_, result) = run_ok(&[&[wasm.as_str()][..], &KV_GUARD_ARGS].concat());
    assert_stopped_where_kv_filled(&result);
}

/// A server on loopback that answers every request with `status` and an HTML page.
fn html_server(status: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<!doctype html><html><body>metrics? no</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/metrics")
}

#[test]
fn a_target_without_metrics_is_one_warning_and_a_normal_report() {
    let html_ok = html_server("200 OK");
    let html_404 = html_server("404 Not Found");
    for url in [
        html_ok.as_str(),
        html_404.as_str(),
        "http://127.0.0.1:9/metrics",
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().display().to_string();
        let o = runner(&[
            &scenario("throughput.rhai"),
            "-p",
            "requests=20",
            "-p",
            "input_tokens=32",
            "-p",
            "output_tokens=8",
            "--server-metrics",
            url,
            "--server-metrics-interval",
            "100ms",
            "--output",
            &out,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        let warnings: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("server metrics"))
            .collect();
        assert_eq!(warnings.len(), 1, "{url}: {err}");
        assert!(warnings[0].starts_with("warning: "), "{}", warnings[0]);
        assert!(
            stdout(&o).contains("Successful requests:"),
            "{}",
            stdout(&o)
        );
        assert!(!stdout(&o).contains("Server metrics"));
        let result = std::fs::read_to_string(dir.path().join("result.json")).expect("result");
        assert!(!result.contains("server_metrics"));
    }
}

#[test]
fn server_metrics_off_scrapes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let o = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=10",
        "-p",
        "input_tokens=32",
        "-p",
        "output_tokens=8",
        "--server-metrics",
        "off",
        "--output",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!dir.path().join("server_metrics.jsonl").exists());
    assert!(!stdout(&o).contains("Server metrics"));
}

/// A scenario whose `stop` reads the server's queue from its snapshot.
const STOP_ON_QUEUE: &str = r#"
fn describe() { #{ name: "stop_on_queue", description: "floods the server until it queues", params: [] } }
fn phases() { [#{ name: "flood", arrival: #{ process: "poisson", rate: 400.0 }, max_requests: 4000 }] }
fn next_request(phase, index) {
    #{ prompt: synthetic_text(64), input_tokens: 64, max_tokens: 64, ignore_eos: true }
}
fn stop(snapshot) {
    let waiting = snapshot.server["vllm:num_requests_waiting"];
    waiting != () && waiting > 0.0
}
"#;

#[test]
fn a_stop_function_sees_the_servers_queue() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("stop_on_queue.rhai");
    std::fs::write(&path, STOP_ON_QUEUE).expect("scenario written");
    let (text, result) = run_ok(&[
        path.to_str().expect("a UTF-8 path"),
        "--sim-max-seqs",
        "8",
        "--server-metrics-interval",
        "100ms",
    ]);
    assert!(
        text.contains("Phase ended: the scenario's stop condition held."),
        "{text}"
    );
    let sent = result["completed"].as_u64().unwrap() + result["failed"].as_u64().unwrap();
    assert!(sent < 4000, "{sent} requests sent");
    assert!(gauge(&result, WAITING)["max"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_merge_keeps_the_scrapes_of_shard_0() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&[]);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dirs: Vec<String> = (0..2)
        .map(|i| tmp.path().join(format!("shard{i}")).display().to_string())
        .collect();
    for (i, dir) in dirs.iter().enumerate() {
        let o = runner(&[
            &scenario("throughput.rhai"),
            "--target",
            &sim.url,
            "-q",
            "-p",
            "requests=60",
            "-p",
            "input_tokens=32",
            "-p",
            "output_tokens=64",
            "--server-metrics-interval",
            "100ms",
            "--shard",
            &format!("{i}/2"),
            "--output",
            dir,
        ]);
        assert!(o.status.success(), "shard {i}: {}", stderr(&o));
    }
    let merged = tmp.path().join("merged");
    let o = runner(&[
        "merge",
        &dirs[0],
        &dirs[1],
        "--output",
        &merged.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shard0 = samples_in(Path::new(&dirs[0]));
    assert!(!shard0.is_empty());
    assert_eq!(samples_in(&merged), shard0, "one series, shard 0's");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(merged.join("result.json")).expect("result.json"),
    )
    .expect("JSON");
    let shard_result: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&dirs[0]).join("result.json")).expect("result.json"),
    )
    .expect("JSON");
    assert_eq!(
        result["runner"]["server_metrics"],
        shard_result["runner"]["server_metrics"]
    );
    assert!(stdout(&o).contains(" Server metrics "), "{}", stdout(&o));
}
