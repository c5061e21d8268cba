//! An `--output` directory belongs to one run at a time, and holds only that run's files:
//! a second run naming it while the first writes is refused with one line (the first
//! finishes whole), and a later run leaves nothing of an earlier one's behind.

use std::time::Duration;

use crate::shards::write_scenario;
use crate::support::{records_in, runner, spawn_runner, stderr, wait_exit, wait_until};

/// Two phases of a few requests each, the first slow enough (the `fixed` profile's
/// 50 ms TTFT, one at a time) for a second run to start while it goes on.
const TWO_PHASES: &str = r#"
fn describe() { #{ name: "two-phases", description: "two closed-loop phases" } }
fn phases() {
    [#{ name: "first", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 60 },
     #{ name: "second", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 2 }]
}
fn next_request(phase, index) { #{ prompt: "hello", max_tokens: 4, ignore_eos: true } }
"#;

const ONE_PHASE: &str = r#"
fn describe() { #{ name: "one-phase", description: "one phase" } }
fn phases() { [#{ name: "only", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 3 }] }
fn next_request(phase, index) { #{ prompt: "hello", max_tokens: 4, ignore_eos: true } }
"#;

#[test]
fn a_second_run_into_the_same_output_is_refused_and_the_first_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path(), "two.rhai", TWO_PHASES);
    let out = tmp.path().join("out");
    let out_arg = out.display().to_string();
    let args = ["--sim-profile", "fixed", "-q", "--output", &out_arg];
    let mut first = spawn_runner(&[&[scenario.as_str()][..], &args].concat());
    let records = out.join("requests.jsonl");
    wait_until(
        "the first run's first record",
        Duration::from_secs(60),
        || records.metadata().is_ok_and(|m| m.len() > 0),
    );
    let second = runner(&[&[scenario.as_str()][..], &args].concat());
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("in use by another runner"), "{err}");
    assert!(err.contains(&out_arg), "{err}");

    let code = wait_exit(&mut first, Duration::from_secs(120));
    assert_eq!(code, Some(0), "the first run ends as if alone");
    assert_eq!(records_in(&out).len(), 62, "every record of the first run");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap())
            .expect("the first run's result.json");
    assert!(result.is_object());
}

#[test]
fn a_later_run_leaves_nothing_of_an_earlier_one() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_arg = out.display().to_string();
    let two = write_scenario(tmp.path(), "two.rhai", TWO_PHASES);
    let one = write_scenario(tmp.path(), "one.rhai", ONE_PHASE);
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("mine.txt"), "the user's own").unwrap();
    for (scenario, phases_files) in [(&two, true), (&one, false)] {
        let run = runner(&[
            scenario,
            "--sim-profile",
            "zero",
            "-q",
            "--output",
            &out_arg,
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        for name in ["phases.md", "phases.csv"] {
            assert_eq!(out.join(name).exists(), phases_files, "{scenario}: {name}");
        }
    }
    assert_eq!(records_in(&out).len(), 3, "only the later run's records");
    assert!(
        out.join("mine.txt").exists(),
        "a file the runner did not write is kept"
    );
}

/// A scenario's tag is text from outside: in requests.csv it must not be a formula a
/// spreadsheet runs, and no output file may carry its ESC, BEL or RLO raw.
const HOSTILE_TAG: &str = r#"
fn describe() { #{ name: "hostile-tag", description: "a tag that is a formula" } }
fn phases() { [#{ name: "only", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 2 }] }
fn next_request(phase, index) {
    #{ prompt: "hello", max_tokens: 2, ignore_eos: true,
       tag: "=HYPERLINK(\"http://127.0.0.1/x\",\"open\")\u001b[2J\u0007\u202e" }
}
"#;

#[test]
fn a_tag_is_never_a_formula_nor_raw_control_characters_in_the_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path(), "tag.rhai", HOSTILE_TAG);
    let out = tmp.path().join("out");
    let out_arg = out.display().to_string();
    let run = runner(&[
        &scenario,
        "--sim-profile",
        "zero",
        "-q",
        "--output",
        &out_arg,
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for row in rows {
        let tag = row.split(',').nth(3).expect("the tag column");
        assert!(tag.starts_with("\"'=HYPERLINK"), "{row}");
    }
    for name in ["requests.csv", "report.html", "report.txt", "report.md"] {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(!text.contains(raw), "{name} holds {raw:?}");
        }
    }
}
