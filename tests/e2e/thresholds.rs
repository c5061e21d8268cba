//! CI thresholds: checked at the end, listed in every report, exit code 99 when one fails.

use crate::support::*;

fn run_with(extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().display().to_string();
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=20".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--output".into(),
        o,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    (runner(&refs), dir)
}

fn result(dir: &tempfile::TempDir) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.json")).unwrap()).unwrap()
}

#[test]
fn thresholds_that_hold_exit_zero_and_are_listed() {
    let (out, dir) = run_with(&[
        "--threshold",
        "p99_ttft_ms<5000",
        "--threshold",
        "error_rate<0.01",
        "--threshold",
        "p95_e2el_ms < 60000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |t: &str| {
        text.lines()
            .find(|l| l.starts_with(t))
            .unwrap_or_else(|| panic!("`{t}` not listed:\n{text}"))
            .to_string()
    };
    let json = result(&dir);
    let p99 = num(&json, "p99_ttft_ms");
    assert_eq!(
        line("p99_ttft_ms<5000"),
        format!(
            "{:<40} {:<10} pass",
            "p99_ttft_ms<5000",
            format!("{p99:.2}")
        )
    );
    assert!(line("error_rate<0.01").contains(" 0.00 "));
    // A percentile the report did not ask for is computed for its threshold.
    assert!(json.get("p95_e2el_ms").is_some());
    let list = json["thresholds"]
        .as_array()
        .expect("thresholds in result.json");
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["threshold"], "p99_ttft_ms<5000");
    assert_eq!(list[0]["pass"], true);
    assert_eq!(list[0]["value"].as_f64(), Some(p99));
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("Thresholds: <span class=\"pass\">all passed</span>"));
    let txt = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
    assert!(txt.contains("p95_e2el_ms<60000"));
}

#[test]
fn a_failing_threshold_exits_99_naming_it_and_its_value() {
    let (out, dir) = run_with(&[
        "--threshold",
        "p99_ttft_ms<1",
        "--threshold",
        "error_rate<0.01",
    ]);
    assert_eq!(out.status.code(), Some(99), "{}", stderr(&out));
    let json = result(&dir);
    let p99 = num(&json, "p99_ttft_ms");
    let err = stderr(&out);
    assert_eq!(
        err.trim_end(),
        format!("error: 1 of 2 thresholds failed: p99_ttft_ms<1 ({p99:.2})")
    );
    assert!(
        stdout(&out).contains(&format!(
            "{:<40} {:<10} FAIL",
            "p99_ttft_ms<1",
            format!("{p99:.2}")
        )),
        "{}",
        stdout(&out)
    );
    assert_eq!(json["thresholds"][0]["pass"], false);
    assert_eq!(json["thresholds"][1]["pass"], true);
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("1 of 2 failed"));
}

#[test]
fn a_scenario_declares_its_own_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let script = |thresholds: &str| {
        format!(
            r#"fn describe() {{ #{{ name: "gated", params: [], thresholds: {thresholds} }} }}
fn phases() {{ [#{{ name: "main", arrival: #{{ process: "burst" }}, max_requests: 5 }}] }}
fn next_request(phase, index) {{ #{{ prompt: synthetic_text(16), max_tokens: 8, ignore_eos: true }} }}
"#
        )
    };
    let path = dir.path().join("gated.rhai");
    let p = path.display().to_string();
    std::fs::write(&path, script(r#"["completed==5", "mean_ttft_ms<0.001"]"#)).unwrap();
    let out = runner(&[&p, "--sim-profile", "fixed", "--threshold", "failed==0"]);
    assert_eq!(out.status.code(), Some(99), "{}", stderr(&out));
    assert!(stderr(&out).contains("1 of 3 thresholds failed: mean_ttft_ms<0.001 ("));
    let text = stdout(&out);
    assert!(
        text.contains("failed==0") && text.contains("completed==5"),
        "{text}"
    );

    std::fs::write(&path, script(r#"["p99_ttft_ms<500"]"#)).unwrap();
    let out = runner(&[&p, "--sim-profile", "zero"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    std::fs::write(&path, script(r#"["latency<3"]"#)).unwrap();
    let out = runner(&[&p, "--sim-profile", "zero"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "error: {p}: threshold `latency<3`: unknown metric `latency`"
        )),
        "{err}"
    );
}

#[test]
fn a_malformed_threshold_is_a_usage_error() {
    let out = runner(&[&scenario("throughput.rhai"), "--threshold", "p99_ttft<500"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown metric `p99_ttft`"), "{err}");
    let out = runner(&[&scenario("throughput.rhai"), "--threshold", "p99_ttft_ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("expected METRIC OP VALUE"));
}
