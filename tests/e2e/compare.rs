//! `runner compare`: two saved results of the throughput scenario, against two profiles
//! of the built-in simulator, compared metric by metric.

use std::path::{Path, PathBuf};

use crate::support::*;

/// Runs the throughput scenario (small) against a sim profile, saving into `dir/name/`.
fn save(dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    // Scraped often enough for the server's rows in a run of a second.
    let mut args = vec!["-p", "requests=40", "--server-metrics-interval", "100ms"];
    // A later `-p requests=` wins.
    args.extend(extra);
    save_run(dir, name, "throughput.rhai", &args)
}

/// Runs a bundled scenario with `extra`, saving into `dir/name/`.
fn save_run(dir: &Path, name: &str, bundled: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = dir.join(name);
    let o = out.display().to_string();
    let mut args = vec![scenario(bundled), "--output".into(), o, "--quiet".into()];
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
    let row = |label: &str| crate::support::table_row(&text, label);
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

    shown_values_explain_the_shown_change(&text);

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

/// The rows of a compare table: label, then A, B, change, change % and the verdict (cells
/// are set apart by two spaces or more; a label has single spaces only).
fn table_rows(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let numbers = cells.len() >= 5 && cells[1].parse::<f64>().is_ok();
            let percent = numbers && (cells[4].ends_with('%') || cells[4] == "n/a");
            percent.then(|| {
                (
                    cells[0].to_string(),
                    cells[1..].iter().map(|c| c.to_string()).collect(),
                )
            })
        })
        .collect()
}

/// The simulator's scrapes give server rows: "Server TTFT", not "Server server TTFT"; the
/// bucket-interpolated percentiles name no winner, the exact mean does.
fn server_rows_are_named_once_and_coarse_ones_name_no_winner(text: &str) {
    assert!(!text.contains("Server server"), "{text}");
    let rows = table_rows(text);
    let row = |label: &str| {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("no row `{label}`:\n{text}"))
    };
    for p in ["p50", "p99"] {
        let r = row(&format!("Server TTFT {p} ≈ (ms, from buckets)"));
        assert_eq!(r[4], "coarse: no winner", "{text}");
    }
    let mean = row("Server TTFT mean (ms)");
    assert!(mean[4].starts_with("↓ "), "{text}");
}

/// Every row shows its values with at least three significant digits (whole numbers as
/// they are), values that read alike have no change, and the change in percent is one
/// the shown values allow.
fn shown_values_explain_the_shown_change(text: &str) {
    let rows = table_rows(text);
    assert!(rows.len() > 20, "{text}");
    for (label, r) in rows {
        let num = |c: &str| c.trim_end_matches('%').parse::<f64>().unwrap();
        let (a, b, change) = (num(&r[0]), num(&r[1]), num(&r[2]));
        let decimals = r[0].split('.').nth(1).map_or(0, str::len);
        for v in [&r[0], &r[1]] {
            let digits = v.trim_start_matches(['-', '0', '.']).replace('.', "");
            let whole = !v.contains('.');
            assert!(
                whole || num(v) == 0.0 || digits.len() >= 3,
                "{label}: {v} has too few digits"
            );
        }
        assert_eq!(r[0] == r[1], change == 0.0, "{label}: {r:?}");
        if r[3] == "n/a" || a <= 0.0 {
            continue;
        }
        // The percent that values within half a shown unit of A and B can give.
        let half = 0.5 * 10f64.powi(-(decimals as i32));
        let lo = 100.0 * ((b - half) / (a + half) - 1.0);
        let hi = if a > half {
            100.0 * ((b + half) / (a - half) - 1.0)
        } else {
            f64::INFINITY
        };
        let pct = num(&r[3]);
        assert!(
            lo - 0.005 <= pct && pct <= hi + 0.005,
            "{label}: {r:?} ({lo} to {hi})"
        );
    }
}

#[test]
fn server_rows_show_their_digits_and_no_winner_from_buckets() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // The default profile models a server (KV cache, TTFT histogram); 30 req/s for two
    // seconds gives the scrapes every 100 ms something to count.
    let args = [
        "-p",
        "rate=30",
        "-p",
        "requests=60",
        "--sim-profile",
        "default",
    ];
    let (a, _) = save(dir.path(), "wide", &args);
    let mut narrow = args.to_vec();
    narrow.extend(["--sim-max-seqs", "8"]);
    let (b, _) = save(dir.path(), "narrow", &narrow);
    let out = runner(&[
        "compare",
        &a.display().to_string(),
        &b.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    server_rows_are_named_once_and_coarse_ones_name_no_winner(&text);
    shown_values_explain_the_shown_change(&text);
    assert!(text.contains("Server KV cache use mean"), "{text}");
}

#[test]
fn force_pairs_phases_whose_names_carry_a_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, ratio: &str| {
        let ratio = format!("prefix_ratio={ratio}");
        let args = [
            "--sim-profile",
            "zero",
            "-p",
            "groups=2",
            "-p",
            "requests_per_group=3",
            "-p",
            "input_tokens=64",
            "-p",
            "output_tokens=4",
            "-p",
            "rate=200",
            "-p",
            &ratio,
        ];
        save_run(dir.path(), name, "shared_prefix.rhai", &args).0
    };
    let (a, b) = (run("r75", "0.75"), run("r50", "0.5"));
    let (ap, bp) = (a.display().to_string(), b.display().to_string());
    // Other parameters: refused, as before.
    let out = runner(&["compare", &ap, &bp]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(prefix_ratio=0.75 vs 0.5)"),
        "{}",
        stderr(&out)
    );
    // Forced: the one phase of each pairs by position, and the output says so.
    let out = runner(&["compare", "--force", &ap, &bp]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("r50 vs r75: phases paired by position: their names differ only in numbers (parameters): `prefix 0.5` of r50 with `prefix 0.75` of r75"),
        "{text}"
    );
    assert!(
        text.contains("== r50 vs r75, phase prefix 0.5 vs prefix 0.75 =="),
        "{text}"
    );
    assert_eq!(text.matches("Summary: ").count(), 1, "{text}");
}

/// A `vllm bench serve --save-result` file (tests/fixtures/vllm: vLLM's keys, figures of
/// the reference run in ../shared/reference/vllm-poisson-20min.txt) is one phase: it
/// pairs with a result's only measured phase, either way round, on the metrics both have.
#[test]
fn a_vllm_result_pairs_with_the_only_measured_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, json) = save(dir.path(), "ours", &["--sim-profile", "zero"]);
    let vllm = repo().join("tests/fixtures/vllm/bench_serve_poisson.json");
    let (o, v) = (ours.display().to_string(), vllm.display().to_string());
    let out = runner(&["compare", &o, &v]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let phase = json["phase"].as_str().unwrap();
    assert!(
        text.contains(&format!("bench_serve_poisson vs result: bench_serve_poisson is a `vllm bench serve` result, one phase: paired with the only measured phase `{phase}` of result, on the metrics both have")),
        "{text}"
    );
    let rows = table_rows(&text);
    let row = |label: &str| {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("no row `{label}`:\n{text}"))
    };
    // The digits a cell shows depend on both sides of its row (0.835 beside 98.301,
    // 1.2 beside 98.30), so a cell is checked as the value it rounds, not as text.
    let vllm_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vllm).unwrap()).unwrap();
    let cases = [
        ("Mean TTFT (ms)", 1, num(&vllm_json, "mean_ttft_ms")),
        ("P99 E2EL (ms)", 1, num(&vllm_json, "p99_e2el_ms")),
        (
            "Output token throughput (tok/s)",
            0,
            num(&json, "output_throughput"),
        ),
    ];
    for (label, column, value) in cases {
        let cell = &row(label)[column];
        assert!(
            shows(cell, value),
            "`{label}` shows {cell}, not {value}:\n{text}"
        );
    }
    assert_eq!(text.matches("Summary: ").count(), 1, "{text}");
    // One warning: the workloads cannot be checked.
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no `runner` section"), "{err}");
    // The vLLM file as the baseline: the same pairing, the other way round.
    let back = runner(&["compare", &v, &o]);
    assert!(back.status.success(), "{}", stderr(&back));
    assert!(
        stdout(&back).contains(&format!("result vs bench_serve_poisson: bench_serve_poisson is a `vllm bench serve` result, one phase: paired with the only measured phase `{phase}` of result")),
        "{}",
        stdout(&back)
    );
}

/// Whether a printed cell is `value` rounded to the digits the cell shows.
fn shows(cell: &str, value: f64) -> bool {
    let Ok(printed) = cell.parse::<f64>() else {
        return false;
    };
    let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals as i32));
    (printed - value).abs() <= half_unit * (1.0 + 1e-9)
}

/// Results written by other runner or WIT versions: one warning line naming both; a
/// result file past the size bound: one error line naming it, its size and the bound,
/// without reading it.
#[test]
fn other_versions_warn_and_huge_files_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let (a, json) = save(dir.path(), "a", &["--sim-profile", "zero"]);
    let mut older = json.clone();
    older["runner"]["runner_version"] = "0.0.9".into();
    older["runner"]["wit_version"] = "0.2.0".into();
    let b = dir.path().join("older.json");
    std::fs::write(&b, serde_json::to_string(&older).unwrap()).unwrap();
    let (ap, bp) = (a.display().to_string(), b.display().to_string());
    let out = runner(&["compare", &ap, &bp]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (version, wit) = (
        &json["runner"]["runner_version"],
        &json["runner"]["wit_version"],
    );
    let (version, wit) = (version.as_str().unwrap(), wit.as_str().unwrap());
    assert_eq!(
        stderr(&out),
        format!("warning: result and older were written by different versions (runner {version} and 0.0.9, WIT {wit} and 0.2.0): their figures may not be measured alike\n")
    );

    // 65 MiB on the file system's word, nothing written: refused before a byte is read.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let out = runner(&["compare", &ap, &huge.display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {} is 68157440 bytes (65 MiB): a result file may be at most 67108864 bytes (64 MiB)\n",
            huge.display()
        )
    );
}
