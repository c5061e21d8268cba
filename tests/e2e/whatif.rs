//! `--sim KEY=VALUE`, a what-if on the simulator's batching engine: two replicas double the
//! concurrency the server admits (with either router), every report of such a run names
//! the overrides, and a mistake is one line before anything is sent.

use crate::schema::{assert_valid, validator};
use crate::support::{run_records, runner, scenario, stderr};

/// Four requests at once on engines of two slots each, long enough (40 tokens) that a
/// request that waited for a slot gets its first token only after another one ended.
fn four_at_once(what_if: &str) -> (String, serde_json::Value, Vec<serde_json::Value>) {
    run_records(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=4",
        "-p",
        "max_concurrency=4",
        "-p",
        "input_tokens=64",
        "-p",
        "output_tokens=40",
        "--sim",
        what_if,
    ])
}

/// The requests whose first token came after some request had ended: those that waited
/// for a free slot (a structural fact of the run, not a timing threshold).
fn waited(records: &[serde_json::Value]) -> usize {
    let at = |r: &serde_json::Value, k: &str| r[k].as_u64().expect(k);
    let first_end = records
        .iter()
        .map(|r| at(r, "end_ns"))
        .min()
        .expect("records");
    let first_token = |r: &serde_json::Value| r["chunks"][0]["t_ns"].as_u64().expect("a chunk");
    records
        .iter()
        .filter(|r| first_token(r) > first_end)
        .count()
}

#[test]
fn two_replicas_admit_twice_the_requests_and_the_reports_say_it_is_a_what_if() {
    let (_, _, one) = four_at_once("max_num_seqs=2");
    assert_eq!(one.len(), 4);
    assert_eq!(waited(&one), 2, "one engine of 2 slots: two of four wait");
    for router in ["round-robin", "least-loaded"] {
        let (report, result, two) =
            four_at_once(&format!("max_num_seqs=2,replicas=2,router={router}"));
        assert_eq!(two.len(), 4);
        assert_eq!(waited(&two), 0, "{router}: 2 × 2 slots, nobody waits");
        let named = format!("what-if max_num_seqs=2,replicas=2,router={router}");
        assert!(report.contains(&named), "{report}");
        let overrides = &result["runner"]["sim_overrides"];
        assert_eq!(overrides["replicas"].as_str(), Some("2"), "{overrides}");
        assert_eq!(overrides["router"].as_str(), Some(router), "{overrides}");
        assert_valid(&validator(), "a what-if run", &result);
    }
}

#[test]
fn a_bad_override_is_one_line_naming_the_key_before_anything_is_sent() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("run");
    for (what_if, needle) in [
        ("max_seqs=4", "max_num_seqs, max_num_batched_tokens"),
        ("replicas=0", "from 1 to 256"),
        ("router=random", "round-robin, least-loaded"),
        (
            "max_num_seqs=64,max_num_batched_tokens=32",
            "max_num_seqs, 64",
        ),
    ] {
        let o = runner(&[
            &scenario("throughput.rhai"),
            "-p",
            "requests=2",
            "--sim",
            what_if,
            "--output",
            &out.display().to_string(),
        ]);
        assert!(!o.status.success(), "{what_if}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{what_if}: {err}");
        assert!(
            !out.join("requests.jsonl").exists(),
            "{what_if}: nothing is sent"
        );
    }
    let o = runner(&[
        &scenario("throughput.rhai"),
        "--sim-profile",
        "fixed",
        "--sim",
        "replicas=2",
    ]);
    let err = stderr(&o);
    assert!(
        !o.status.success() && err.contains("--sim replicas=2"),
        "{err}"
    );
}
