//! `--repeat N`: the 95 % interval of the mean TTFT over five runs of the simulator holds
//! the TTFT the simulator really gave (its own send log, not the nominal delay, which a
//! loaded machine's late timers overshoot), and `runner compare` of two series calls a
//! 10 % TTFT difference significant and a 0.1 % one not.
//!
//! The simulator's TTFT varies from request to request (`--sim-ttft-jitter-ms 40`: 80 to
//! 120 ms, by a hash of each body), as a real server's does: a TTFT exact to the
//! microsecond leaves the runs no spread but the client's own tens of microseconds, and
//! a 0.1 % difference would then be real and detectable. The jitter's spread over 32
//! requests (about 2 ms in a run's mean) is far above what two busy loops beside the test
//! move (a few tenths of a ms), and far below a 10 ms difference; both series of a
//! comparison send the same requests (same base seed), so they differ by the configured
//! TTFT alone.

use std::path::Path;

use serde_json::Value;

use crate::support::{runner, scenario, stderr, stdout};

/// A five-run series of 32 requests against the `fixed` simulator with TTFT `ttft_ms`
/// plus up to 40 ms of jitter; its series result.json.
fn series(dir: &Path, ttft_ms: &str, extra: &[&str]) -> Value {
    let out_dir = dir.display().to_string();
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=32".into(),
        "-p".into(),
        "output_tokens=4".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--sim-ttft-ms".into(),
        ttft_ms.into(),
        "--sim-ttft-jitter-ms".into(),
        "40".into(),
        "--sim-itl-ms".into(),
        "1".into(),
        "--repeat".into(),
        "5".into(),
        "--output".into(),
        out_dir,
        "-q".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(
        stdout(&out).contains("Repeated runs"),
        "the table follows the last report: {}",
        stdout(&out)
    );
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    serde_json::from_str(&text).expect("JSON")
}

/// The figure `key` of the series' only phase.
fn figure<'a>(series: &'a Value, key: &str) -> &'a Value {
    series["phases"][0]["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {series}"))
}

/// The server's mean first-chunk time of one run (its send log, the run's own requests:
/// the pre-run test request left out), ms after each request's arrival.
fn server_mean_ttft(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).expect("send log");
    let firsts: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            !v["request_id"]
                .as_str()
                .unwrap_or("")
                .ends_with("preflight")
        })
        .filter_map(|v| v["chunk_ms"][0].as_f64())
        .collect();
    assert_eq!(firsts.len(), 32, "{}", log.display());
    firsts.iter().sum::<f64>() / firsts.len() as f64
}

#[test]
fn five_runs_give_a_ttft_interval_that_holds_the_servers_own_ttft() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("series");
    let log = dir.path().join("send.jsonl");
    let s = series(&out, "80", &["--sim-send-log", &log.display().to_string()]);
    let runs = s["series"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 5);
    let mut seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds[0], 42, "the first run keeps the scenario's seed");
    seeds.dedup();
    assert_eq!(seeds.len(), 5, "a fresh seed per run: {runs:?}");
    let servers: Vec<f64> = (1..=5)
        .map(|r| {
            assert!(out.join(format!("run-{r}/result.json")).exists());
            server_mean_ttft(&dir.path().join(format!("send-run-{r}.jsonl")))
        })
        .collect();
    let truth = servers.iter().sum::<f64>() / 5.0;
    let ttft = figure(&s, "mean_ttft_ms");
    let (low, high) = (
        ttft["ci_low"].as_f64().unwrap(),
        ttft["ci_high"].as_f64().unwrap(),
    );
    eprintln!(
        "mean TTFT over 5 runs: {:.3} ms, 95% CI [{low:.3}, {high:.3}]; server's own {truth:.3} ms (runs {servers:.3?}); nominal 100",
        ttft["mean"].as_f64().unwrap()
    );
    assert!(
        low <= truth && truth <= high,
        "the interval [{low}, {high}] misses the server's mean TTFT {truth}"
    );
    assert!(high - low < 10.0, "a usable interval: [{low}, {high}]");
    crate::schema::assert_valid(&crate::schema::validator(), "series result.json", &s);
}

/// `runner compare A B`'s row of `label`, split into its cells.
fn compare_row(a: &Path, b: &Path, label: &str) -> (String, Vec<String>) {
    let out = runner(&[
        "compare",
        &a.join("result.json").display().to_string(),
        &b.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} row: {text}"));
    let cells = row.split_whitespace().map(str::to_string).collect();
    (text, cells)
}

#[test]
fn compare_calls_a_10_percent_ttft_difference_significant_and_a_0_1_percent_one_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (base, slower, close) = (
        dir.path().join("base"),
        dir.path().join("slower"),
        dir.path().join("close"),
    );
    series(&base, "80", &[]); // mean TTFT 100 ms
    series(&slower, "90", &[]); // 110 ms: 10 % more
    series(&close, "80.1", &[]); // 100.1 ms: 0.1 % more
    let (text, cells) = compare_row(&base, &slower.join("result.json"), "Mean TTFT");
    eprintln!("{text}");
    assert!(
        cells.join(" ").contains("yes (p"),
        "10 % is significant: {cells:?}"
    );
    assert!(text.contains("Welch's t-test"), "{text}");
    let (text, cells) = compare_row(&base, &close.join("result.json"), "Mean TTFT");
    eprintln!("{text}");
    assert!(cells.join(" ").contains("no (p"), "0.1 % is not: {cells:?}");
    let (text, cells) = compare_row(&base, &close.join("run-1/result.json"), "Mean TTFT");
    assert!(
        text.contains("No significance can be given: run-1 is a single run"),
        "{text}"
    );
    assert!(!cells.join(" ").contains("(p"), "{cells:?}");
}

#[test]
fn bounds_and_a_failing_run_end_the_series_in_one_line() {
    let file = scenario("throughput.rhai");
    for (n, says) in [("1", "from 2 to 100"), ("101", "at most 100 runs")] {
        let out = runner(&[&file, "--repeat", n]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
    let out = runner(&[&file, "--same-seed"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Run 1 fails its threshold: the series ends there, with the run's exit code.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = runner(&[
        &file,
        "-p",
        "requests=4",
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "5",
        "--threshold",
        "p99_ttft_ms<1",
        "--repeat",
        "3",
        "--output",
        &dir.path().display().to_string(),
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(99), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("run 1 of 3 ended with exit code 99, which ends the series"),
        "{err}"
    );
    assert!(!dir.path().join("run-2").exists());
    assert!(!dir.path().join("result.json").exists(), "no summary");
}
