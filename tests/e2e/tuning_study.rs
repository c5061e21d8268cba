//! `scenarios/tuning_study.rhai` and `runner compare --headline`: GPUStack's A/B table on
//! the simulator, baseline against tuned (more `max_num_seqs`): one row per profile with
//! both results' total TPS and mean TPOT and the change in %, and the tuned engine faster
//! on the saturated Throughput profile, as the engine model implies (more sequences per
//! step share its fixed cost). Small counts and a fast engine keep it to a few seconds.

use std::path::Path;

use crate::support::{runner, scenario, stderr, stdout, table_row as row};

/// The study at 2 % of the reference's counts and 20 × its rates, on an engine whose steps
/// cost a third of a millisecond, with `max_num_seqs` seqs; its result.json's path.
fn study(dir: &Path, name: &str, max_num_seqs: u32) -> String {
    let out = dir.join(name);
    let what_if =
        format!("max_num_seqs={max_num_seqs},decode_step_ms=0.3,decode_us_per_seq=10,prefill_us_per_token=0.5");
    let o = runner(&[
        &scenario("tuning_study.rhai"),
        "-p",
        "scale=0.02",
        "-p",
        "rate_scale=20",
        "--sim",
        &what_if,
        "--output",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    out.join("result.json").display().to_string()
}

#[test]
fn the_tuning_study_prints_the_four_profiles_baseline_against_tuned() {
    let dir = tempfile::tempdir().expect("dir");
    let baseline = study(dir.path(), "baseline", 4);
    let tuned = study(dir.path(), "tuned", 16);
    let o = runner(&["compare", &baseline, &tuned, "--headline"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let head = table.lines().next().unwrap_or_default();
    for column in [
        "baseline Total TPS",
        "baseline Mean TPOT (ms)",
        "tuned Total TPS",
        "tuned Mean TPOT (ms)",
    ] {
        assert!(head.contains(column), "{column}:\n{table}");
    }
    for profile in ["ShareGPT", "Throughput", "Long Context", "Generation Heavy"] {
        // baseline TPS, TPOT; tuned TPS, change, TPOT, change.
        let cells = row(&table, profile);
        assert_eq!(cells.len(), 6, "{profile}:\n{table}");
        let number = |i: usize| {
            cells[i]
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("{table}"))
        };
        assert!(
            number(0) > 0.0 && number(2) > 0.0 && number(4) > 0.0,
            "{table}"
        );
        assert!(
            cells[3].ends_with('%') && cells[5].ends_with('%'),
            "{table}"
        );
    }
    // 20 Throughput requests on 4 slots against 16: each step's fixed 0.3 ms is shared by
    // four times the sequences.
    let cells = row(&table, "Throughput");
    let tps = |i: usize| cells[i].parse::<f64>().unwrap_or(0.0);
    assert!(tps(2) > 1.3 * tps(0), "tuned must be faster:\n{table}");
    assert!(cells[3].starts_with('+'), "{table}");
}
