//! Sharded runs: four shard processes against one simulated server, merged, compared with
//! a single process running the same scenario and seed.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::{records_in, runner, stderr, stdout, SimProcess};

const SHARDS: usize = 4;

/// Open loop: Poisson arrivals, prompt and output lengths drawn from the seeded generator,
/// so every request of the stream differs.
pub(crate) const OPEN_LOOP: &str = r#"
fn describe() {
    #{ name: "shards-open", description: "Poisson, varied prompts", params: [
        #{ name: "requests", value: 160, help: "requests" },
        #{ name: "rate", value: 160.0, help: "req/s" },
        #{ name: "seed", value: 7, help: "seed" } ] }
}
fn phases() {
    [#{ name: "poisson", arrival: #{ process: "poisson", rate: param("rate") },
       max_requests: param("requests") }]
}
fn next_request(phase, index) {
    let n = rand_int(20, 200);
    let tag = if n > 100 { "long" } else { "short" };
    #{ prompt: synthetic_text(n), input_tokens: n, max_tokens: rand_int(2, 40), ignore_eos: true,
       tag: tag }
}
"#;

/// Closed loop: 6 in flight (shares 2, 2, 1, 1), then 2 in flight (two shards take part).
const CLOSED_LOOP: &str = r#"
fn describe() {
    #{ name: "shards-closed", description: "closed loop, two widths", params: [
        #{ name: "seed", value: 11, help: "seed" } ] }
}
fn phases() {
    [#{ name: "six", arrival: #{ process: "closed", concurrency: 6 }, max_requests: 61 },
     #{ name: "two", arrival: #{ process: "closed", concurrency: 2 }, max_requests: 13 }]
}
fn next_request(phase, index) {
    let n = rand_int(10, 120);
    #{ prompt: synthetic_text(n), input_tokens: n, max_tokens: rand_int(2, 24), ignore_eos: true }
}
"#;

pub(crate) fn write_scenario(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write scenario");
    path.display().to_string()
}

pub(crate) fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("JSON")
}

/// Runs the shards side by side, each with its own command-line tail, starting together.
fn run_shards(
    scenario: &str,
    target: &str,
    dirs: &[PathBuf],
    extra: impl Fn(usize) -> (Vec<String>, Vec<(String, String)>),
) {
    // Far enough ahead for a debug build to load its tokenizer in every process.
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        + 4.0;
    let start_at = format!("{start_at:.3}");
    let children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let (args, env) = extra(i);
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_runner"));
            cmd.args([scenario, "--target", target, "-q", "--start-at", &start_at])
                .arg("--output")
                .arg(dir)
                .args(&args)
                .env_remove("OPENAI_API_KEY")
                .env_remove("JOB_COMPLETION_INDEX")
                .env_remove("SLURM_ARRAY_TASK_ID")
                .env("RUST_BACKTRACE", "0")
                .envs(env)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().expect("a shard starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("shard output");
        assert!(
            out.status.success(),
            "shard {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn dir_args(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter().map(|d| d.display().to_string()).collect()
}

/// numpy.percentile (linear) over sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Per-request TTFT, TPOT and E2EL (ms) and chunk gaps of the successful records.
fn raw_latencies(records: &[serde_json::Value]) -> [Vec<f64>; 4] {
    let mut out: [Vec<f64>; 4] = Default::default();
    for r in records.iter().filter(|r| r.get("error").is_none()) {
        let ns = |v: &serde_json::Value| v.as_u64().expect("ns") as f64;
        let sent = ns(&r["sent_ns"]);
        let chunks: Vec<f64> = r["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .map(|c| ns(&c["t_ns"]))
            .collect();
        let (first, last) = (chunks[0], chunks[chunks.len() - 1]);
        let tokens = r["output_tokens"].as_u64().expect("tokens") as f64;
        out[0].push((first - sent) / 1e6);
        if tokens > 1.0 {
            out[1].push((last - first) / (tokens - 1.0) / 1e6);
        }
        out[2].push((last - sent) / 1e6);
        out[3].extend(chunks.windows(2).map(|w| (w[1] - w[0]) / 1e6));
    }
    for v in &mut out {
        v.sort_by(f64::total_cmp);
    }
    out
}

/// Asserts that the merged result's median and p99 TTFT, TPOT, E2EL and ITL equal those of
/// all shards' raw records, within the histogram's precision (3 significant digits on µs:
/// 0.1 % plus half a microsecond); returns each (key, merged, raw) it compared.
pub(crate) fn assert_merged_percentiles(
    m: &serde_json::Value,
    dirs: &[PathBuf],
) -> Vec<(String, f64, f64)> {
    let all: Vec<serde_json::Value> = dirs.iter().flat_map(|d| records_in(d)).collect();
    let raw = raw_latencies(&all);
    let mut compared = Vec::new();
    for (k, name) in ["ttft", "tpot", "e2el", "itl"].iter().enumerate() {
        let v = &raw[k];
        assert!(v.len() > 100, "{name}: {} samples", v.len());
        for (key, exact) in [
            (format!("median_{name}_ms"), percentile(v, 50.0)),
            (format!("p99_{name}_ms"), percentile(v, 99.0)),
        ] {
            let got = m[&key].as_f64().expect(&key);
            assert!(
                (got - exact).abs() <= exact * 1e-3 + 0.0005,
                "{key}: merged {got} vs raw {exact}"
            );
            compared.push((key, got, exact));
        }
    }
    compared
}

fn sum_over(results: &[serde_json::Value], key: &str) -> u64 {
    results
        .iter()
        .map(|r| r[key].as_u64().unwrap_or_else(|| panic!("no {key}")))
        .sum()
}

#[test]
fn open_loop_shards_merge_into_the_single_run() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(tmp.path(), "open.rhai", OPEN_LOOP);
    let sim = SimProcess::start(&[]);
    let _quiet = crate::support::exclusive();

    let single = tmp.path().join("single");
    let single_dir = single.display().to_string();
    let out = runner(&[
        &scenario,
        "--target",
        &sim.url,
        "-q",
        "--output",
        &single_dir,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let single_result = json(&single.join("result.json"));

    let dirs: Vec<PathBuf> = (0..SHARDS)
        .map(|i| tmp.path().join(format!("shard{i}")))
        .collect();
    run_shards(&scenario, &sim.url, &dirs, |i| {
        (vec!["--shard".into(), format!("{i}/{SHARDS}")], vec![])
    });

    let merged = tmp.path().join("merged");
    let mut args = vec!["merge".to_string()];
    args.extend(dir_args(&dirs));
    args.extend(["--output".into(), merged.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner(&args);
    assert!(out.status.success(), "merge failed: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("============ Serving Benchmark Result ============"));
    let m = json(&merged.join("result.json"));

    merged_is_the_single_run(&m, &single_result, &text, &dirs);
    merged_reports_starts_and_files(&m, &text, &merged);
    thresholds_are_checked_on_the_merged_run(&dirs);
    incomplete_or_mixed_shard_sets_are_refused(tmp.path(), &scenario, &sim.url, &dirs);
}

/// The union of the shards' streams, counts, tags and percentiles is the single run's.
fn merged_is_the_single_run(
    m: &serde_json::Value,
    single_result: &serde_json::Value,
    text: &str,
    dirs: &[PathBuf],
) {
    // The union of the four streams is the single run's stream.
    let digest = single_result["runner"]["request_digest"]
        .as_str()
        .expect("digest");
    assert_eq!(m["runner"]["request_digest"].as_str(), Some(digest));
    assert!(text.contains(&format!("Request stream digest (sha256): {digest}")));
    // Each shard's own digest is a different part of it.
    let shards: Vec<serde_json::Value> =
        dirs.iter().map(|d| json(&d.join("result.json"))).collect();
    for s in &shards {
        assert_ne!(s["runner"]["request_digest"].as_str(), Some(digest));
    }

    // Counts and token totals: exactly the sum of the shards, and the single run's.
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(m[key].as_u64(), Some(sum_over(&shards, key)), "{key}");
        assert_eq!(m[key], single_result[key], "{key}");
    }
    assert_eq!(m["completed"].as_u64(), Some(160));
    // Per-tag counts merge too.
    let tags = |v: &serde_json::Value| -> Vec<(String, u64, f64)> {
        v["runner"]["tags"]
            .as_array()
            .expect("tags")
            .iter()
            .map(|t| {
                let tag = t["tag"].as_str().expect("tag").to_string();
                (
                    tag,
                    t["completed"].as_u64().unwrap(),
                    t["mean_input_tokens"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(tags(m).len(), 2);
    assert_eq!(tags(m), tags(single_result));
    // Every shard sent its stripe: 40 of the 160 requests.
    for (i, d) in dirs.iter().enumerate() {
        let recs = records_in(d);
        assert_eq!(recs.len(), 40, "shard {i}");
        assert!(recs
            .iter()
            .all(|r| r["index"].as_u64().unwrap() % SHARDS as u64 == i as u64));
    }

    assert_merged_percentiles(m, dirs);
}

/// The shards' start offsets and spread, and the same exports as a single run's --output.
fn merged_reports_starts_and_files(m: &serde_json::Value, text: &str, merged: &Path) {
    // The shards' starts: one offset each against --start-at, and their spread.
    let shard_info = &m["shards"];
    assert_eq!(shard_info["count"].as_u64(), Some(SHARDS as u64));
    let starts: Vec<u64> = shard_info["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| {
            assert!(s["clock_offset_ms"].as_f64().expect("offset").is_finite());
            s["started_unix_ns"].as_u64().expect("start")
        })
        .collect();
    let spread = (starts.iter().max().unwrap() - starts.iter().min().unwrap()) as f64 / 1e6;
    assert!((shard_info["start_spread_ms"].as_f64().unwrap() - spread).abs() < 1e-3);
    assert!(text.contains("Start spread (ms):"));
    // The same exports as a single run's --output.
    for f in [
        "report.txt",
        "report.html",
        "requests.jsonl",
        "requests.csv",
    ] {
        assert!(merged.join(f).is_file(), "{f}");
    }
    assert_eq!(records_in(merged).len(), 160);
}

fn thresholds_are_checked_on_the_merged_run(dirs: &[PathBuf]) {
    // Thresholds are checked on the merged run: a count only the union reaches, and a
    // percentile the shards did not report (they ran with the default 99) computed from
    // the merged histograms.
    let checked = |thresholds: &[&str]| {
        let mut args: Vec<String> = vec!["merge".into(), "-q".into()];
        args.extend(dir_args(dirs));
        for t in thresholds {
            args.extend(["--threshold".into(), t.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        runner(&args)
    };
    let out = checked(&["completed>=160", "p95_ttft_ms<60000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Thresholds") && text.contains("completed>=160") && !text.contains("FAIL"),
        "{text}"
    );
    let out = checked(&["completed>160", "p95_ttft_ms<60000"]);
    assert_eq!(out.status.code(), Some(99), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "error: 1 of 2 thresholds failed: completed>160 (160.00)"
    );
}

fn incomplete_or_mixed_shard_sets_are_refused(
    tmp: &Path,
    scenario: &str,
    sim_url: &str,
    dirs: &[PathBuf],
) {
    // A missing shard is refused, naming it.
    let mut three = vec!["merge".to_string()];
    three.extend(dir_args(&dirs[..3]));
    let three: Vec<&str> = three.iter().map(String::as_str).collect();
    let out = runner(&three);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: shard 3/4 is missing (given: 0/4, 1/4, 2/4)"
    );
    // So is a shard given twice.
    let twice = [&three[..], &[three[1]]].concat();
    let out = runner(&twice);
    assert!(
        stderr(&out).contains("shard 0/4 is given twice"),
        "{}",
        stderr(&out)
    );

    // A shard of another workload (another seed) is refused, naming its directory.
    let foreign = tmp.join("foreign3");
    let foreign_dir = foreign.display().to_string();
    let out = runner(&[
        scenario,
        "--target",
        sim_url,
        "-q",
        "--shard",
        "3/4",
        "-p",
        "seed=8",
        "--output",
        &foreign_dir,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut mixed = three.clone();
    mixed.push(&foreign_dir);
    let out = runner(&mixed);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{foreign_dir} (shard 3/4) is not the same workload"
        )) && err.contains("the seed differs (8 vs 7)"),
        "{err}"
    );
}

#[test]
fn closed_loop_shards_split_concurrency_and_budget() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(tmp.path(), "closed.rhai", CLOSED_LOOP);
    let sim = SimProcess::start(&[]);
    let _quiet = crate::support::exclusive();

    let single = tmp.path().join("single");
    let out = runner(&[
        &scenario,
        "--target",
        &sim.url,
        "-q",
        "--output",
        &single.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let single_result = json(&single.join("result.json"));

    // As a Kubernetes Indexed Job starts them: the index from JOB_COMPLETION_INDEX, the
    // count from RUNNER_SHARDS.
    let dirs: Vec<PathBuf> = (0..SHARDS)
        .map(|i| tmp.path().join(format!("shard{i}")))
        .collect();
    run_shards(&scenario, &sim.url, &dirs, |i| {
        (
            vec![],
            vec![
                ("JOB_COMPLETION_INDEX".into(), i.to_string()),
                ("RUNNER_SHARDS".into(), SHARDS.to_string()),
            ],
        )
    });

    let mut args = vec!["merge".to_string()];
    args.extend(dir_args(&dirs));
    let merged = tmp.path().join("merged");
    args.extend(["--output".into(), merged.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner(&args);
    assert!(out.status.success(), "merge failed: {}", stderr(&out));
    let m = json(&merged.join("result.json"));

    assert_eq!(m["request_digest"], single_result["request_digest"]);
    assert!(m["request_digest"].as_str().is_some_and(|d| d.len() == 64));
    let shards: Vec<serde_json::Value> =
        dirs.iter().map(|d| json(&d.join("result.json"))).collect();
    let phase = |v: &serde_json::Value, p: usize| v["phases"][p].clone();
    // Per shard: its share of each phase's concurrency and of its request budget.
    let expected_width = [[2, 2, 1, 1], [1, 1, 0, 0]];
    let expected_requests = [[16, 15, 15, 15], [7, 6, 0, 0]];
    for (p, total) in [(0, 61u64), (1, 13)] {
        let merged_phase = phase(&m, p);
        let shard_phases: Vec<serde_json::Value> = shards.iter().map(|s| phase(s, p)).collect();
        for key in [
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
        ] {
            assert_eq!(
                merged_phase[key].as_u64(),
                Some(sum_over(&shard_phases, key)),
                "phase {p} {key}"
            );
            assert_eq!(
                merged_phase[key],
                phase(&single_result, p)[key],
                "phase {p} {key}"
            );
        }
        assert_eq!(merged_phase["completed"].as_u64(), Some(total));
        // The merged phase reports the whole run's concurrency.
        assert_eq!(
            merged_phase["max_concurrency"],
            phase(&single_result, p)["max_concurrency"]
        );
        for (i, s) in shard_phases.iter().enumerate() {
            assert_eq!(
                s["completed"].as_u64(),
                Some(expected_requests[p][i]),
                "phase {p} shard {i}"
            );
            let width = s["max_concurrency"].as_u64().unwrap_or(0);
            assert_eq!(width, expected_width[p][i], "phase {p} shard {i}");
            // Never more in flight than its share.
            assert!(s["max_concurrent_requests"].as_f64().unwrap() <= width as f64);
        }
    }
    merged_steady_state_is_over_the_merged_records(&m, &records_in(&merged));
}

/// The merged "six" phase's steady state is found over the merged requests in flight
/// (the sum over the shards, against the whole run's cap of 6, which no shard's share of
/// at most 2 reaches), and counts exactly the merged records sent inside its window.
fn merged_steady_state_is_over_the_merged_records(
    m: &serde_json::Value,
    records: &[serde_json::Value],
) {
    let st = &m["phases"][0]["runner"]["steady_state"];
    let w = &st["window"];
    assert_eq!(w["rule"], "plateau", "{st}");
    assert_eq!(
        (w["cap"].as_u64(), w["threshold_requests"].as_u64()),
        (Some(6), Some(6)),
        "{st}"
    );
    assert!(w["mean_concurrency"].as_f64().unwrap() > 2.0, "{st}");
    let ns = |v: &serde_json::Value| (v.as_f64().expect("seconds") * 1e9).round() as u64;
    let (from, to) = (ns(&w["start_s"]), ns(&w["end_s"]));
    let sent = records
        .iter()
        .filter(|r| r["phase"] == 0 && r.get("error").is_none_or(|e| e.is_null()))
        .filter(|r| (from..to).contains(&r["sent_ns"].as_u64().expect("sent_ns")))
        .count() as u64;
    assert!(sent > 0, "{st}");
    assert_eq!(w["requests_sent"].as_u64(), Some(sent), "{st}");
    assert_eq!(st["ttft"]["count"].as_u64(), Some(sent), "{st}");
}

/// A closed loop of two in flight, 15 requests: on two shards, one in flight each, 8
/// requests on shard 0 and 7 on shard 1. Every shard notes the same `mode`; `sent` is
/// what its own `stop` saw last (asked every 20 ms, until the last response is in).
const NOTES: &str = r#"
fn describe() {
    #{ name: "shards-notes", description: "notes per shard", params: [
        #{ name: "seed", value: 3, help: "seed" } ] }
}
fn phases() {
    [#{ name: "two", arrival: #{ process: "closed", concurrency: 2 }, max_requests: 15 }]
}
fn next_request(phase, index) {
    note("mode", "closed");
    #{ prompt: synthetic_text(16), input_tokens: 16, max_tokens: 10, ignore_eos: true }
}
fn stop(snapshot) {
    note("sent", snapshot.sent);
    false
}
"#;

#[test]
fn merged_notes_keep_each_shards_and_combine_where_all_agree() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(tmp.path(), "notes.rhai", NOTES);
    // Requests of about 100 ms one after another: `stop` sees each shard's last send.
    let sim = SimProcess::start(&["--sim-profile", "fixed", "--sim-itl-ms", "10"]);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("s{i}"))).collect();
    run_shards(&scenario, &sim.url, &dirs, |i| {
        (vec!["--shard".into(), format!("{i}/2")], vec![])
    });
    let own: Vec<serde_json::Value> = dirs
        .iter()
        .map(|d| json(&d.join("result.json"))["scenario_result"].clone())
        .collect();
    assert_eq!(
        own,
        [
            serde_json::json!({"mode": "closed", "sent": 8}),
            serde_json::json!({"mode": "closed", "sent": 7})
        ]
    );

    let merged = tmp.path().join("merged");
    let mut args = vec!["merge".to_string(), "--output".into()];
    args.push(merged.display().to_string());
    args.extend(dir_args(&dirs));
    let out = runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let m = json(&merged.join("result.json"));
    // The run's notes: only what both shards said alike; each shard's notes as they were.
    assert_eq!(m["scenario_result"], serde_json::json!({"mode": "closed"}));
    for (i, own) in own.iter().enumerate() {
        assert_eq!(
            &m["shards"]["shards"][i]["scenario_result"], own,
            "shard {i}"
        );
    }
    let text = stdout(&out);
    let section = text
        .split("Scenario Result")
        .nth(1)
        .expect("a Scenario Result section");
    let line = |key: &str| {
        section
            .lines()
            .find(|l| l.starts_with(key))
            .map(str::split_whitespace)
    };
    assert_eq!(
        line("mode:").map(|w| w.last()),
        Some(Some("closed")),
        "{text}"
    );
    for (i, sent) in [(0, "8"), (1, "7")] {
        let key = format!("sent (shard {i}/2):");
        assert_eq!(line(&key).map(|w| w.last()), Some(Some(sent)), "{text}");
    }
    assert!(line("sent:").is_none(), "{text}");
    // Still result.json as the committed schema describes it.
    let schema = std::fs::read_to_string(crate::support::repo().join("schema/result.schema.json"));
    let schema: serde_json::Value = serde_json::from_str(&schema.expect("schema")).expect("JSON");
    let validator = jsonschema::validator_for(&schema).expect("a JSON Schema");
    let errors: Vec<String> = validator.iter_errors(&m).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn shard_flags_are_checked_in_one_line() {
    let scenario = crate::support::scenario("sweep.rhai");
    for (args, env, expected) in [
        (
            vec!["--shard", "4/4"],
            vec![],
            "--shard expects I/N with 0 <= I < N",
        ),
        (vec!["--shard", "0/2"], vec![], "--output DIR is required"),
        (
            vec![],
            vec![("JOB_COMPLETION_INDEX", "1")],
            "pass --shards N or set RUNNER_SHARDS",
        ),
        (
            vec!["--start-at", "soon"],
            vec![],
            "--start-at expects an RFC 3339 time",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
            .args([scenario.as_str(), "-q", "-p", "max_prompts=1"])
            .args(&args)
            .envs(env)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("runs");
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // --no-shard runs the whole scenario inside a job array.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            scenario.as_str(),
            "-q",
            "-p",
            "min_prompts=2",
            "-p",
            "max_prompts=2",
            "--no-shard",
        ])
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        crate::support::report_row(&stdout(&out), "Successful requests:"),
        Some(2)
    );
    // An adaptive scenario cannot be split.
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().display().to_string();
    let out = runner(&[
        &crate::support::scenario("multi_turn.rhai"),
        "--shard",
        "0/2",
        "--output",
        &dir,
    ]);
    assert!(
        stderr(&out).contains("cannot be split into shards"),
        "{}",
        stderr(&out)
    );
}

/// The manifests of deploy/kubernetes with their `${...}` placeholders filled in.
fn manifest(name: &str) -> String {
    let path = crate::support::repo().join("deploy/kubernetes").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .replace("${RUNNER_IMAGE}", "registry.example/runner:0.1.0")
        .replace("${START_AT}", "2026-11-21T18:00:00Z")
        .replace("${TARGET_URL}", "http://vllm-router:8000")
}

fn documents(name: &str) -> Vec<yaml_rust2::Yaml> {
    yaml_rust2::YamlLoader::load_from_str(&manifest(name))
        .unwrap_or_else(|e| panic!("{name} is not YAML: {e}"))
}

fn of_kind<'a>(docs: &'a [yaml_rust2::Yaml], kind: &str) -> &'a yaml_rust2::Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn strings(y: &yaml_rust2::Yaml) -> Vec<String> {
    y.as_vec()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// The Indexed Job runs N shards of one scenario into a shared volume, and the merge Job
/// reads exactly those N directories; the scenario in the ConfigMap is one the runner loads.
#[test]
fn kubernetes_manifests_describe_n_shards_and_one_merge() {
    let docs = documents("runner-shards.yaml");
    let job = of_kind(&docs, "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_i64().expect("completions");
    assert_eq!(spec["parallelism"].as_i64(), Some(n));
    assert_eq!(spec["backoffLimit"].as_i64(), Some(0));
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let container = &pod["containers"][0];
    let env = container["env"].as_vec().expect("env");
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no env {name}"))
    };
    assert_eq!(
        var("RUNNER_SHARDS")["value"].as_str(),
        Some(&*n.to_string())
    );
    assert_eq!(
        var("SHARD_INDEX")["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
    );
    let args = strings(&container["args"]);
    let after = |flag: &str| {
        let i = args.iter().position(|a| a == flag).expect(flag);
        args[i + 1].clone()
    };
    assert_eq!(args[0], "run");
    assert_eq!(after("--start-at"), "$(START_AT)");
    assert_eq!(after("--output"), "/results/shard-$(SHARD_INDEX)");
    // The scenario comes from the ConfigMap, read-only; results go to the shared claim.
    let mounts = container["volumeMounts"].as_vec().expect("mounts");
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| m["name"].as_str() == Some(name))
            .expect(name)
    };
    assert_eq!(mount("scenario")["readOnly"].as_bool(), Some(true));
    assert!(args[1].starts_with(mount("scenario")["mountPath"].as_str().unwrap()));
    assert_eq!(mount("results")["mountPath"].as_str(), Some("/results"));
    let volumes = pod["volumes"].as_vec().expect("volumes");
    let config_map = of_kind(&docs, "ConfigMap");
    let map_name = config_map["metadata"]["name"].as_str().unwrap();
    assert!(volumes
        .iter()
        .any(|v| v["configMap"]["name"].as_str() == Some(map_name)));
    let claim = of_kind(&docs, "PersistentVolumeClaim");
    let claim_name = claim["metadata"]["name"].as_str().unwrap();
    assert_eq!(strings(&claim["spec"]["accessModes"]), ["ReadWriteMany"]);

    // The merge Job lists every shard directory once, on the same claim.
    let merge_docs = documents("runner-merge.yaml");
    let merge = of_kind(&merge_docs, "Job");
    let merge_pod = &merge["spec"]["template"]["spec"];
    let merge_args = strings(&merge_pod["containers"][0]["args"]);
    assert_eq!(merge_args[0], "merge");
    let dirs: Vec<String> = (0..n).map(|i| format!("/results/shard-{i}")).collect();
    assert_eq!(merge_args[1..=n as usize], dirs[..]);
    assert_eq!(
        merge_pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str(),
        Some(claim_name)
    );

    // The bundled scenario loads and plans its phases.
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = tmp.path().join("scenario.rhai");
    std::fs::write(
        &script,
        config_map["data"]["scenario.rhai"]
            .as_str()
            .expect("scenario"),
    )
    .expect("write");
    let out = runner(&["verify", &script.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The manifests against the Kubernetes API schema (PyPI's kubernetes-validate, strict:
/// unknown fields fail), in a venv made once under cargo's test temp dir. Skipped with a
/// reason when Python cannot make one, unless RUNNER_REQUIRE_KUBE_VALIDATE=1.
#[test]
fn kubernetes_manifests_pass_the_api_schema() {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kubernetes-validate-1.34.1");
    let tool = work.join("bin/kubernetes-validate");
    if !tool.is_file() {
        let made = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&work)
            .status()
            .is_ok_and(|s| s.success())
            && std::process::Command::new(work.join("bin/python"))
                .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .arg("kubernetes-validate==1.34.1")
                .status()
                .is_ok_and(|s| s.success());
        if !made {
            let _ = std::fs::remove_dir_all(&work);
            assert!(
                std::env::var("RUNNER_REQUIRE_KUBE_VALIDATE").as_deref() != Ok("1"),
                "kubernetes-validate is required but cannot be installed"
            );
            eprintln!("SKIPPED: cannot install kubernetes-validate from PyPI into a venv");
            return;
        }
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let validate = |name: &str, text: &str| {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::process::Command::new(&tool)
            .args(["--strict", "-k", "1.34.0"])
            .arg(&path)
            .output()
            .expect("kubernetes-validate runs")
    };
    for name in ["runner-shards.yaml", "runner-merge.yaml"] {
        let out = validate(name, &manifest(name));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "{name}: {text}");
        assert!(text.contains("passed for resource job/"), "{name}: {text}");
    }
    // The check can fail: a misspelt field is refused.
    let bad = manifest("runner-shards.yaml").replace("parallelism:", "paralelism:");
    let out = validate("bad.yaml", &bad);
    assert!(!out.status.success(), "{}", stdout(&out));
}

/// Writes `edit` of `dir`'s shard.json back in its place.
fn edit_shard(dir: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("shard.json");
    let mut v = json(&path);
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string(&v).expect("JSON")).expect("write shard.json");
}

/// `runner merge` trusts no count of a shard: a tampered count (u64::MAX, which wrapped
/// the merged total to "Successful requests: 9") is refused naming the shard, the phase
/// and the count; shards of other runner versions merge with one warning naming both; a
/// shard.json past its size bound is refused unread, naming its size and the bound.
#[test]
fn tampered_other_version_or_huge_shards_are_one_line() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(tmp.path(), "open.rhai", OPEN_LOOP);
    let sim = SimProcess::start(&["--sim-profile", "zero"]);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("s{i}"))).collect();
    run_shards(&scenario, &sim.url, &dirs, |i| {
        (
            vec![
                "--shard".into(),
                format!("{i}/2"),
                "-p".into(),
                "requests=20".into(),
            ],
            vec![],
        )
    });
    let mut args = vec!["merge".to_string()];
    args.extend(dir_args(&dirs));
    let merge = || runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let original = std::fs::read(dirs[1].join("shard.json")).expect("shard.json");

    edit_shard(&dirs[1], |v| {
        v["phases"][0]["state"]["completed"] = u64::MAX.into()
    });
    let out = merge();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        err,
        format!(
            "error: {} (shard 1/2), phase poisson: `completed` + `failed` + `cancelled` is 18446744073709551615, but the `lateness` histogram holds 10 requests\n",
            dirs[1].display()
        )
    );
    // Counts whose own sum overflows.
    edit_shard(&dirs[1], |v| v["phases"][0]["state"]["failed"] = 1.into());
    let err = stderr(&merge());
    assert!(
        err.contains("(shard 1/2), phase poisson: `completed` (18446744073709551615) + `failed` (1) + `cancelled` (0) overflow a 64-bit count"),
        "{err}"
    );

    std::fs::write(dirs[1].join("shard.json"), &original).expect("restore");
    let version = json(&dirs[0].join("shard.json"))["header"]["runner_version"].clone();
    edit_shard(&dirs[1], |v| v["header"]["runner_version"] = "0.0.9".into());
    let out = merge();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "warning: shard 0/2 ({}) and shard 1/2 ({}) were written by different versions (runner {} and 0.0.9): their figures may not be measured alike\n",
            dirs[0].display(),
            dirs[1].display(),
            version.as_str().expect("a version")
        )
    );

    // 300 MiB on the file system's word, nothing written: refused before it is read.
    let huge = dirs[1].join("shard.json");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(300 << 20))
        .expect("a sparse file");
    let out = merge();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {} is 314572800 bytes (300 MiB): a shard.json may be at most 268435456 bytes (256 MiB)\n",
            huge.display()
        )
    );
}

/// Issue 58 item 5: a shard whose first requests hit a prefix its sibling shard put in
/// the server's cache says so, not "an earlier run"; the merged run, whose first requests
/// found the cache empty, warns about nothing.
#[test]
fn a_shard_warmed_by_its_sibling_says_so_and_the_merge_does_not_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(&[]);
    let script = crate::support::scenario("shared_prefix.rhai");
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("s{i}"))).collect();
    // One after the other: shard 1 finds the group's prefix shard 0 left in the cache.
    let mut warnings = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let shard = format!("{i}/2");
        let d = dir.display().to_string();
        let out = runner(&[
            &script,
            "--target",
            &sim.url,
            "-q",
            "--shard",
            &shard,
            "--output",
            &d,
            "-p",
            "groups=1",
            "-p",
            "requests_per_group=4",
            "-p",
            "input_tokens=256",
            "-p",
            "output_tokens=2",
            "-p",
            "concurrency=2",
        ]);
        assert!(out.status.success(), "shard {i}: {}", stderr(&out));
        warnings.push(stderr(&out));
    }
    assert!(!warnings[0].contains("prefix cache"), "{}", warnings[0]);
    let line = warnings[1]
        .lines()
        .find(|l| l.contains("prefix cache"))
        .unwrap_or_else(|| panic!("shard 1 names its warm cache: {}", warnings[1]));
    assert!(
        line.contains("sibling shard") && line.contains("shard 1/2"),
        "{line}"
    );
    assert!(
        !line.contains("a cache left warm by an earlier run"),
        "{line}"
    );
    let mut args = vec!["merge".to_string()];
    args.extend(dir_args(&dirs));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner(&args);
    assert!(out.status.success(), "merge failed: {}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains("could have filled yet"), "{all}");
}
