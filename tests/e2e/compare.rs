//! `runner compare`: two saved results of the throughput scenario, against two profiles
//! of the built-in simulator, compared metric by metric.

use std::path::{Path, PathBuf};

use crate::support::*;

/// Runs the throughput scenario (small) against a sim profile, saving into `dir/name/`.
fn save(dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = dir.join(name);
    let o = out.display().to_string();
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=40".into(),
        "--output".into(),
        o,
        "--quiet".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = runner(&refs);
    assert!(run.status.success(), "{}", stderr(&run));
    let path = out.join("result.json");
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, json)
}

#[test]
fn compare_prints_a_table_and_the_gpustack_summary() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (a_path, a) = save(dir.path(), "default", &["--sim-profile", "default"]);
    let (b_path, b) = save(
        dir.path(),
        "fixed",
        &["--sim-profile", "fixed", "--sim-itl-ms", "5"],
    );
    let (ap, bp) = (a_path.display().to_string(), b_path.display().to_string());
    let out = runner(&["compare", &ap, &bp]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Same scenario, parameters and seed: no warning.
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));

    // The summary line, computed here from the two files.
    let (ta, tb) = (
        num(&a, "total_token_throughput"),
        num(&b, "total_token_throughput"),
    );
    let (pa, pb) = (num(&a, "mean_tpot_ms"), num(&b, "mean_tpot_ms"));
    let verb = if tb >= ta { "faster" } else { "slower" };
    let tps = format!(
        "`fixed` is {verb} by {:.2} tok/s ({:.2}%)",
        (tb - ta).abs(),
        100.0 * (tb - ta).abs() / ta
    );
    let tpot = if pb <= pa {
        format!(
            "reduced by {:.2} ms ({:.2}%)",
            pa - pb,
            100.0 * (pa - pb) / pa
        )
    } else {
        format!(
            "increased by {:.2} ms ({:.2}% slower)",
            pb - pa,
            100.0 * (pb - pa) / pa
        )
    };
    let summary = text
        .lines()
        .find(|l| l.starts_with("Summary: "))
        .unwrap_or_else(|| panic!("no summary line:\n{text}"));
    assert!(summary.contains(&tps), "{summary}\nexpected {tps}");
    assert!(
        summary.contains(&format!("Mean TPOT = {pb:.2} ms vs {pa:.2} ms, {tpot}")),
        "{summary}\nexpected {tpot}"
    );

    // A table row per metric: both values, change and change % as computed here.
    let row = |label: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row `{label}`:\n{text}"));
        line[label.len()..]
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let (oa, ob) = (num(&a, "output_throughput"), num(&b, "output_throughput"));
    let r = row("Output token throughput (tok/s)");
    assert_eq!(r[0], format!("{oa:.2}"));
    assert_eq!(r[1], format!("{ob:.2}"));
    assert_eq!(r[2], format!("{:+.2}", ob - oa));
    assert_eq!(r[3], format!("{:+.2}%", 100.0 * (ob - oa) / oa));
    assert_eq!(r[4], "↑");
    assert_eq!(r[5], if ob > oa { "fixed" } else { "default" });
    let r = row("Mean TTFT (ms)");
    let (fa, fb) = (num(&a, "mean_ttft_ms"), num(&b, "mean_ttft_ms"));
    assert_eq!(r[3], format!("{:+.2}%", 100.0 * (fb - fa) / fa));
    assert_eq!(r[4], "↓");
    for label in [
        "P99 TTFT (ms)",
        "Mean TPOT (ms)",
        "Median ITL (ms)",
        "P99 E2EL (ms)",
    ] {
        row(label);
    }

    // Markdown for pasting.
    let md = runner(&["compare", "--markdown", &ap, &bp]);
    assert!(md.status.success(), "{}", stderr(&md));
    let md = stdout(&md);
    assert!(
        md.contains("| metric | default | fixed | change | change % | better |"),
        "{md}"
    );
    assert!(md.contains(&format!(
        "| Output token throughput (tok/s) | {oa:.2} | {ob:.2} |"
    )));
    assert!(md.contains(&tps), "{md}");

    // A third result: each against the first.
    let c = dir.path().join("again.json");
    std::fs::copy(&b_path, &c).unwrap();
    let three = runner(&["compare", &ap, &bp, &c.display().to_string()]);
    assert!(three.status.success(), "{}", stderr(&three));
    assert_eq!(stdout(&three).matches("Summary: ").count(), 2);
}

#[test]
fn compare_refuses_different_workloads_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a_path, _) = save(dir.path(), "a", &["--sim-profile", "zero"]);
    let (b_path, _) = save(
        dir.path(),
        "b",
        &["--sim-profile", "zero", "-p", "output_tokens=16"],
    );
    let (ap, bp) = (a_path.display().to_string(), b_path.display().to_string());
    let out = runner(&["compare", &ap, &bp]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "error: a and b ran throughput with different parameters (output_tokens=128 vs 16)"
        ) && err.contains("--force"),
        "{err}"
    );
    let forced = runner(&["compare", "--force", &ap, &bp]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(
        stderr(&forced).starts_with("warning: a and b ran throughput with different parameters")
    );

    // Another seed: the same workload shape, other requests: a warning.
    let (c_path, _) = save(dir.path(), "c", &["--sim-profile", "zero", "--seed", "7"]);
    let seeded = runner(&["compare", &ap, &c_path.display().to_string()]);
    assert!(seeded.status.success(), "{}", stderr(&seeded));
    assert!(
        stderr(&seeded).contains("different seeds"),
        "{}",
        stderr(&seeded)
    );

    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"x\": 1}").unwrap();
    let bad = runner(&["compare", &ap, &junk.display().to_string()]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("is not a result file"),
        "{}",
        stderr(&bad)
    );
    let one = runner(&["compare", &ap]);
    assert_eq!(one.status.code(), Some(2));
}
