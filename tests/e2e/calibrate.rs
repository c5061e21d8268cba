//! `runner calibrate`: a twin fitted from runs against the built-in simulator with a known
//! profile recovers that profile's parameters within 5 %, states its error on a held-out
//! phase, refuses one load point with the run that would do, a run against the twin
//! names the twin and the runs it came from, and `--twin` replays a run against it.

use std::path::Path;

use crate::schema::{assert_valid, validator};
use crate::support::{
    calibrate_recorded, exclusive, holdout_signed_pct, repo, runner, scenario, stderr, stdout,
};

/// The recorded run of the known profile (tests/fixtures/recorded/sim: the load points of
/// `load_points`, its README says how it was made), fitted from c2 and c16 with c4 held
/// out and replayed in virtual time: the fit's parameters (% from the profile) and the
/// held-out error (signed, +: the twin is slower), the same on any machine. The gate is
/// each figure ± [`RECORDED_MARGIN`] points.
const RECORDED: [(&str, f64); 6] = [
    ("prefill_us_per_token", -0.15),
    ("decode_step_ms", 0.10),
    ("decode_us_per_seq", -0.43),
    ("c4 mean_ttft_ms", 4.21),
    ("c4 median_tpot_ms", -4.97),
    ("c4 median_e2el_ms", 0.11),
];
const RECORDED_MARGIN: f64 = 3.0;

/// The known engine: (flag, twin.toml key, value). A sequence costs 1 ms of a step, so the
/// steps of 2 and of 8 sequences differ by 6 ms: at 200 µs (1.2 ms) a loaded machine's
/// timer slack, a tenth of a millisecond, read the slope 9 % low (181.5 against 200).
const PROFILE: [(&str, &str, f64); 4] = [
    ("--sim-prefill-us-per-token", "prefill_us_per_token", 30.0),
    ("--sim-decode-step-ms", "decode_step_ms", 8.0),
    ("--sim-decode-us-per-seq", "decode_us_per_seq", 1000.0),
    ("--sim-max-seqs", "max_seqs", 8.0),
];

/// 64 requests a phase: the closed loops of equal answers run in lockstep, and the mean
/// TTFT of the held-out c4 depends on how each batch of 4 prompts splits over steps, which
/// a busy machine's send lag decides. Over its 8 batches of 32 requests, the twin's error
/// on it read 0.7-11.9 % in 8 runs beside four busy loops; over 16 batches, 1.5-4.7 %
/// (bench-results/twin_under_load.md).
const REQUESTS: &str = "requests=64";

fn load_points(dir: &Path) -> String {
    let out = dir.join("run").display().to_string();
    let mut args = vec![
        scenario("calibration.rhai"),
        "-p".into(),
        "concurrency=2,16,4".into(),
        "-p".into(),
        REQUESTS.into(),
        "-p".into(),
        "output_tokens=16".into(),
        "--output".into(),
        out.clone(),
    ];
    for (flag, _, v) in PROFILE {
        args.extend([flag.to_string(), v.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

/// One run of three load points serves every check (CI time is short).
#[test]
fn a_twin_recovers_a_known_profile_states_its_error_and_is_named_by_runs_against_it() {
    // The fit reads step times off the simulator's chunks, which a busy machine delays by
    // a little: the profile's per-sequence cost is large enough for that to stay within
    // 5 % (see PROFILE), and no other exclusive test runs beside it.
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("dir");
    let run = load_points(dir.path());
    refuses_one_load_point(&run, dir.path());
    let twin = dir.path().join("twin.toml").display().to_string();
    recovers_the_profile(&run, &twin);
    names_the_twin(&run, &twin, dir.path());
    replays_the_run_against_the_twin(&run, &twin);
}

/// The twin of the recorded run recovers the profile and predicts the held-out c4 within
/// [`RECORDED_MARGIN`] points of what the benchmark measured on that run, either way (the
/// replay bug, c4 replayed at its recorded sends: −3.06 %, 7.3 points off).
#[test]
fn a_twin_fitted_on_a_recorded_run_recovers_the_profile_and_its_held_out_error() {
    let run = repo().join("tests/fixtures/recorded/sim");
    let (file, text) = calibrate_recorded(&run, &["c4"]);
    assert_eq!(file["engine"]["max_seqs"].as_integer(), Some(8), "{text}");
    for (figure, want) in RECORDED {
        let got = match figure.split_once(' ') {
            Some((phase, metric)) => holdout_signed_pct(&file, phase, metric),
            None => {
                let (_, _, truth) = PROFILE.iter().find(|p| p.1 == figure).expect(figure);
                let fitted = file["engine"][figure].as_float().expect(figure);
                (fitted - truth) / truth * 100.0
            }
        };
        assert!(
            (got - want).abs() <= RECORDED_MARGIN,
            "{figure}: {got:+.2} %, benchmarked {want:+.2} % ± {RECORDED_MARGIN}\n{text}"
        );
    }
}

/// `--twin FILE` fits nothing and sets each of the run's phases against the twin, saying
/// where they part most.
fn replays_the_run_against_the_twin(run: &str, twin: &str) {
    let o = runner(&["calibrate", run, "--twin", twin]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let (table, parting) = out
        .split_once("where they part most:")
        .expect("parting lines");
    let phases: Vec<&str> = parting
        .lines()
        .filter_map(|l| l.trim().split_once(':').map(|(p, _)| p))
        .collect();
    assert_eq!(phases, ["c2", "c16", "c4"], "{out}");
    // The twin of the engine that served the run parts from it by little on any phase.
    for line in table.lines().filter(|l| l.contains("median_e2el_ms")) {
        let pct: f64 = line
            .split_whitespace()
            .last()
            .and_then(|p| p.parse().ok())
            .expect(line);
        assert!(pct < 10.0, "{out}");
    }
}

fn recovers_the_profile(run: &str, twin: &str) {
    let o = runner(&[
        "calibrate",
        run,
        "--holdout",
        "c4",
        "--virtual-time",
        "--out",
        twin,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(twin).expect("twin.toml");
    let file: toml::Value = toml::from_str(&text).expect("toml");
    for (_, key, want) in PROFILE {
        let got = file["engine"][key]
            .as_float()
            .or_else(|| file["engine"][key].as_integer().map(|i| i as f64))
            .expect(key);
        assert!(
            (got - want).abs() <= 0.05 * want,
            "{key}: fitted {got}, profile {want}\n{text}"
        );
    }
    assert!(file["sources"]["decode_us_per_seq"].as_str().is_some());
    assert_eq!(file["runs"][0]["phases"].as_array().map(Vec::len), Some(2));
    // The held-out phase, replayed against the twin of the engine that served it.
    let holdout = file["holdout"].as_array().expect("holdout rows");
    let pct = |metric: &str| {
        holdout
            .iter()
            .find(|r| r["metric"].as_str() == Some(metric))
            .and_then(|r| r["error_pct"].as_float())
            .unwrap_or_else(|| panic!("{metric} in {text}"))
    };
    assert!(pct("median_tpot_ms") < 10.0, "{text}");
    assert!(pct("median_e2el_ms") < 10.0, "{text}");
    // Replayed closed-loop at its concurrency, as it ran, on the simulated clock: the
    // prediction is the twin's model alone, and only the live run's own c4 moves (47.0 to
    // 49.6 ms beside four busy loops, 49.3 quiet; bench-results/twin_under_load.md), so
    // the bound is half issue 38's goal. The replay bug (closed loops replayed at their
    // recorded sends, which hold the engine's own waits: 14 % in real time) reads only
    // −3.1 % on the recorded run in virtual time, against +4.2 % right: the recorded gate
    // above fails it, this one does not (a mutation run passed it).
    let ttft = holdout_signed_pct(&file, "c4", "mean_ttft_ms");
    assert!(ttft.abs() < 10.0, "c4 mean TTFT {ttft:+.1} %\n{text}");
    assert!(stdout(&o).contains("held-out error"), "{}", stdout(&o));
}

/// A run against the twin (with an override) names it, its runs and its error.
fn names_the_twin(run: &str, twin: &str, dir: &Path) {
    let out = dir.join("against").display().to_string();
    let o = runner(&[
        &scenario("calibration.rhai"),
        "-p",
        "concurrency=4",
        "-p",
        "requests=8",
        "-p",
        "output_tokens=4",
        "--sim-profile",
        twin,
        "--sim-max-seqs",
        "2",
        "--output",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = stdout(&o);
    assert!(
        report.contains(&format!("twin {twin} fitted from {run}")),
        "{report}"
    );
    assert!(report.contains("worst held-out error"), "{report}");
    let text = std::fs::read_to_string(Path::new(&out).join("result.json")).expect("result");
    let result: serde_json::Value = serde_json::from_str(&text).expect("json");
    let named = &result["runner"]["twin"];
    assert_eq!(named["file"].as_str(), Some(twin), "{named}");
    assert_eq!(named["runs"][0]["path"].as_str(), Some(run), "{named}");
    let error = named["error"].as_str().unwrap_or_default();
    assert!(error.contains("mean_ttft_ms"), "{named}");
    assert_valid(&validator(), "a run against a twin", &result);
}

/// Fitting from one load point (the others held out) is one line naming the run that would do.
fn refuses_one_load_point(run: &str, dir: &Path) {
    let twin = dir.join("refused.toml");
    let o = runner(&[
        "calibrate",
        run,
        "--holdout",
        "c16",
        "--holdout",
        "c4",
        "--out",
        &twin.display().to_string(),
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("decode_us_per_seq") && err.contains("second load point"),
        "{err}"
    );
    assert!(!twin.exists());
    let o = runner(&["calibrate", run, "--holdout", "c3"]);
    assert!(stderr(&o).contains("--holdout c3"), "{}", stderr(&o));
}
