//! A twin of llama.cpp's server (issue 38's first acceptance line): `runner calibrate`
//! fits it from two load points, Poisson arrivals at 4 and at 10 requests a second (the
//! second above what 4 slots serve, so requests wait; run first and last, so a machine
//! that slows down over the run weighs on both sides alike), and replays three held-out
//! ones against it, closed loops of 2, 4 and 8 (above the slots), each closed-loop at its
//! concurrency. An open-loop rate keeps 1 to 4 streams decoding by turns, so the fit sees
//! every batch size, and llama.cpp's decode step is not a line in it (3.9 ms for 1
//! sequence, 6.7 for 2, 10.3 for 4 on the test model, on the machine that first measured
//! it): where the fit keeps a curve, the twin prices decode steps by it. Answers of 48 tokens to prompts of 16 to 64. The test asserts the
//! error bench-results/twin_llamacpp.sh measured over repeats, with the margin a busy
//! machine needs (see BOUNDS); the figures go to stderr for the CI log.

use std::io::Write;

use super::fixture::{engine, Options, Server};
use crate::support::{
    calibrate_recorded, exclusive, fixture, holdout_signed_pct, repo, runner, stderr,
};

/// The twin's held-out error on the recorded llama.cpp run (tests/fixtures/recorded/llamacpp,
/// the load points of the live test below, its README says how it was made), SIGNED in %
/// (+: the twin is slower), as `calibrate --virtual-time` measured it: the fit reads the
/// recorded chunks and the replay runs on the simulated clock, so the figure is the same on
/// any machine, and the gate is that figure ± [`RECORDED_MARGIN`]. Within the quiet
/// benchmark's spread (bench-results/twin_llamacpp.md: −18 to +30 % on one phase).
const RECORDED: [(&str, &str, f64); 12] = [
    ("c2", "mean_ttft_ms", 0.92),
    ("c2", "mean_tpot_ms", -1.97),
    ("c2", "median_tpot_ms", -6.85),
    ("c2", "median_e2el_ms", -1.95),
    ("c4", "mean_ttft_ms", 3.30),
    ("c4", "mean_tpot_ms", 1.17),
    ("c4", "median_tpot_ms", -4.42),
    ("c4", "median_e2el_ms", 2.09),
    ("c8", "mean_ttft_ms", -2.45),
    ("c8", "mean_tpot_ms", -0.23),
    ("c8", "median_tpot_ms", 0.05),
    ("c8", "median_e2el_ms", -2.29),
];
/// Points of % either side of a recorded figure: deterministic, so this is room for a
/// change of the fit or the simulator that moves a prediction a little, not for noise.
const RECORDED_MARGIN: f64 = 3.0;

/// Each held-out phase's error, %, at most. bench-results/twin_llamacpp.md (8 repeats on
/// this 2-core machine, quiet) saw at most 21.6 (median E2E), 30.5 (median TPOT), 28.2
/// (mean TPOT) and 16.4 (mean TTFT) on one phase; the median repeat 3.7 to 8.0. Beside
/// two busy loops and other tests the one-thread server ran the held-out phases at about
/// half speed and unevenly (a 2-sequence step of 19.7 ms in c2 where the fitted rates
/// gave 26.8): up to 37 % on a phase. The bounds leave room for that; a broken fit (a
/// prompt priced at 0, the slots missed) is off by 90 % and more.
const BOUNDS: [(&str, f64); 4] = [
    ("median_e2el_ms", 65.0),
    ("median_tpot_ms", 70.0),
    ("mean_tpot_ms", 70.0),
    ("mean_ttft_ms", 100.0),
];
/// The mean over the three held-out phases, %, at most: the quiet benchmark saw at most
/// 12.9 (median E2E), 14.6 and 13.1 (TPOT) and 10.8 (mean TTFT); the loaded run 27 to 33.
const MEAN_BOUNDS: [(&str, f64); 4] = [
    ("median_e2el_ms", 50.0),
    ("median_tpot_ms", 50.0),
    ("mean_tpot_ms", 50.0),
    ("mean_ttft_ms", 60.0),
];
const HELD_OUT: [&str; 3] = ["c2", "c4", "c8"];

#[test]
fn a_twin_fitted_at_two_load_points_predicts_three_held_out_ones() {
    let _quiet = exclusive();
    let Some(engine) = engine() else { return };
    let options = Options {
        cache_ram_mib: Some(0),
        threads: Some(1),
        ..Options::default()
    };
    let server = Server::start_with(&engine, options);
    let dir = tempfile::tempdir().expect("temp dir");
    let run = dir.path().join("run").display().to_string();
    let tokenizer = engine.tokenizer.display().to_string();
    let o = runner(&[
        &fixture("calibration.rhai"),
        "-p",
        "load=r4,c2,c4,c8,r10",
        "-p",
        "requests=24",
        "-p",
        "output_tokens=48",
        "-p",
        "min_prompt=16",
        "-p",
        "max_prompt=64",
        "--target",
        &server.url,
        "--tokenizer",
        &tokenizer,
        "--output",
        &run,
    ]);
    assert!(o.status.success(), "{}\n{}", stderr(&o), server.log_tail());
    drop(server);
    let twin = dir.path().join("twin.toml");
    let mut args = vec!["calibrate", &run, "--out"];
    let twin_arg = twin.display().to_string();
    args.push(&twin_arg);
    for phase in HELD_OUT {
        args.extend(["--holdout", phase]);
    }
    let o = runner(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&twin).expect("twin.toml");
    let file: toml::Value = toml::from_str(&text).expect("toml");
    assert_eq!(file["engine"]["max_seqs"].as_integer(), Some(4), "{text}");
    let sources = file["sources"]["prefill_us_per_token"]
        .as_str()
        .unwrap_or("");
    assert!(sources.contains("prompt_ms"), "{text}");
    check_decode_curve(&file, &text);
    check_errors(&file, &text);
}

/// The recorded run's twin (fitted from r4 and r10, c2, c4 and c8 replayed in virtual time)
/// predicts each held-out figure within [`RECORDED_MARGIN`] of what it measured, either
/// way; it keeps a decode curve (on the recording's CPU the line parts from it by 9.9 %).
#[test]
fn a_twin_fitted_on_a_recorded_llamacpp_run_predicts_its_held_out_phases_as_benchmarked() {
    let run = repo().join("tests/fixtures/recorded/llamacpp");
    let (file, text) = calibrate_recorded(&run, &HELD_OUT);
    assert_eq!(file["engine"]["max_seqs"].as_integer(), Some(4), "{text}");
    assert!(file["engine"].get("decode_curve").is_some(), "{text}");
    let mut log = String::from("recorded llama.cpp run, held-out error % (signed):");
    for (phase, metric, want) in RECORDED {
        let got = holdout_signed_pct(&file, phase, metric);
        log += &format!(" {phase} {metric} {got:+.2};");
        assert!(
            (got - want).abs() <= RECORDED_MARGIN,
            "{phase} {metric}: {got:+.2} %, benchmarked {want:+.2} % ± {RECORDED_MARGIN}\n{text}"
        );
    }
    let _ = writeln!(std::io::stderr(), "{log}");
}

/// The decode step's curve, where the fit kept one: a knot at 1 sequence and one at the
/// 4 slots, and the share by which the line parts from it stated, over the 5 % that
/// keeps it. Whether it is kept depends on the CPU: on the machine that first measured
/// it (3.9, 6.7, 10.3 ms for 1, 2, 4 sequences) the line missed by 10 % and more, on
/// another (2.0, 3.4, 5.0, 7.2 ms) by 6 to 8 %, and in one fit of six by 5 % or less, which
/// keeps the line (servers/twin/curve.rs; its unit tests pin both choices); the held-out
/// error below is asserted either way.
fn check_decode_curve(file: &toml::Value, text: &str) {
    let Some(curve) = file["engine"].get("decode_curve") else {
        assert!(file["sources"].get("decode_curve").is_none(), "{text}");
        return;
    };
    let knots: Vec<i64> = curve
        .as_array()
        .map(|k| k.iter().filter_map(|k| k["seqs"].as_integer()).collect())
        .unwrap_or_default();
    assert!(
        knots.len() >= 3 && knots.first() == Some(&1) && knots.last() == Some(&4),
        "{text}"
    );
    let source = file["sources"]["decode_curve"].as_str().unwrap_or("");
    let share: f64 = source
        .split("parts from it by ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no departure stated: {text}"));
    assert!(share >= 5.0, "{share} %: {text}");
}

/// Each held-out phase's error within [`BOUNDS`], their mean within [`MEAN_BOUNDS`].
fn check_errors(file: &toml::Value, text: &str) {
    let rows = file["holdout"].as_array().expect("holdout rows");
    let pct = |phase: &str, metric: &str| {
        rows.iter()
            .find(|r| r["phase"].as_str() == Some(phase) && r["metric"].as_str() == Some(metric))
            .and_then(|r| r["error_pct"].as_float())
            .unwrap_or_else(|| panic!("{phase} {metric} in {text}"))
    };
    let mut log = String::from("llama.cpp twin, held-out error %:");
    for (metric, bound) in BOUNDS {
        let errors: Vec<f64> = HELD_OUT.iter().map(|p| pct(p, metric)).collect();
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        log += &format!(" {metric} {errors:.1?} (mean {mean:.1});");
        for (phase, e) in HELD_OUT.iter().zip(&errors) {
            assert!(
                *e <= bound,
                "{phase} {metric}: {e:.1} % > {bound} %\n{text}"
            );
        }
        let mean_bound = MEAN_BOUNDS
            .iter()
            .find(|(m, _)| *m == metric)
            .map_or(0.0, |b| b.1);
        assert!(
            mean <= mean_bound,
            "{metric}: mean {mean:.1} % > {mean_bound} %\n{text}"
        );
    }
    let _ = writeln!(std::io::stderr(), "{log}");
}
