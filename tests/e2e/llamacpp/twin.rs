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
use std::path::Path;

use super::fixture::{engine, Options, Server};
use crate::support::{
    calibrate_recorded, exclusive, holdout_signed_pct, records_in, repo, runner, scenario, stderr,
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

/// The live run's held-out error, SIGNED in % (+: the twin is slower), at most this far
/// either way, per phase (metric, bound) and on the mean over the three phases. The replay
/// runs in virtual time, so only the live run's own noise is in it, and that is large:
/// bench-results/twin_llamacpp.md (8 quiet repeats) saw −18 to +30.5 on one phase and at
/// most 14.6 on the mean; a loaded machine ran the held-out phases at about half speed and
/// unevenly (up to 37 % on a phase), and at a load average of 12 on 2 cores c2's median
/// TPOT read +119 (the server's steps between 7.5 and 28 ms from one phase to the next).
/// These bounds fail a broken fit (a prompt priced at 0, the slots missed: 90 % and more
/// off); the known-bad twins (45 % slow, halved prefill, no decode curve) are failed by
/// the recorded run's gate above, and the first two here by [`check_prompt_price`].
const BOUNDS: [(&str, f64); 4] = [
    ("median_e2el_ms", 65.0),
    ("median_tpot_ms", 70.0),
    ("mean_tpot_ms", 70.0),
    ("mean_ttft_ms", 90.0),
];
const MEAN_BOUNDS: [(&str, f64); 4] = [
    ("median_e2el_ms", 50.0),
    ("median_tpot_ms", 50.0),
    ("mean_tpot_ms", 50.0),
    ("mean_ttft_ms", 60.0),
];
/// The twin's price of the fitted phases' prompt steps over llama.cpp's own `prompt_ms` for
/// them: 0.87 (quiet), 0.85, 0.80 and 0.73 (load averages of 4, 12 and 13 on 2 cores). Below
/// 1, as the price counts no decoding sequence beside the prompt. Both sides come from the
/// same steps at the same time, so a busy machine moves them together far less than it
/// moves the phases apart: a twin 45 % slow reads 1.06 (0.73 × 1.45) and more, one with
/// half the prefill cost 0.44 and less.
const PROMPT_PRICE: std::ops::RangeInclusive<f64> = 0.6..=1.0;
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
        &scenario("calibration.rhai"),
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
    let mut args = vec!["calibrate", &run, "--virtual-time", "--out"];
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
    check_prompt_price(Path::new(&run), &file, &text);
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
/// keeps the line (servers/twin/curve.rs; its unit tests pin both choices). Whether a twin
/// that needed it lost it is the recorded run's gate to say (its fit keeps one, asserted):
/// a busy machine moves a live run's c2 TPOT by more than the curve does.
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

/// Each held-out phase's signed error within [`BOUNDS`], their mean within [`MEAN_BOUNDS`],
/// either way.
fn check_errors(file: &toml::Value, text: &str) {
    let mut log = String::from("llama.cpp twin, held-out error % (signed):");
    for ((metric, bound), (_, mean_bound)) in BOUNDS.into_iter().zip(MEAN_BOUNDS) {
        let errors: Vec<f64> = HELD_OUT
            .iter()
            .map(|p| holdout_signed_pct(file, p, metric))
            .collect();
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        log += &format!(" {metric} {errors:+.1?} (mean {mean:+.1});");
        for (phase, e) in HELD_OUT.iter().zip(&errors) {
            assert!(
                e.abs() <= bound,
                "{phase} {metric}: {e:+.1} %, beyond ± {bound} %\n{text}"
            );
        }
        assert!(
            mean.abs() <= mean_bound,
            "{metric}: mean {mean:+.1} %, beyond ± {mean_bound} %\n{text}"
        );
    }
    let _ = writeln!(std::io::stderr(), "{log}");
}

/// The twin's price of the fitted phases' prompt steps (`decode_step_ms` +
/// `prefill_us_per_token` × the prompt) against llama.cpp's own `prompt_ms` for the same
/// requests (requests.jsonl's server_timings), within [`PROMPT_PRICE`].
fn check_prompt_price(run: &Path, file: &toml::Value, text: &str) {
    let engine = &file["engine"];
    let param = |k: &str| engine[k].as_float().expect(k);
    let (step_ms, per_token_us) = (param("decode_step_ms"), param("prefill_us_per_token"));
    let (mut real, mut priced) = (0.0, 0.0);
    for record in records_in(run) {
        // The fitted phases: r4 and r10, the first and the last.
        if !matches!(record["phase"].as_u64(), Some(0 | 4)) {
            continue;
        }
        let timings = &record["server_timings"];
        let (Some(ms), Some(n)) = (timings["prompt_ms"].as_f64(), timings["prompt_n"].as_f64())
        else {
            continue;
        };
        real += ms;
        priced += step_ms + per_token_us * n / 1000.0;
    }
    let ratio = priced / real;
    let _ = writeln!(
        std::io::stderr(),
        "llama.cpp twin: prompt steps priced at {ratio:.3} of the server's prompt_ms"
    );
    assert!(PROMPT_PRICE.contains(&ratio), "{ratio:.3}\n{text}");
}
