//! Mistakes that used to pass silently each get one clear line: a misspelled snapshot
//! field, a misspelled hook, two seeds, a phase with no end against a real server, a
//! scenario that sends nothing, and a closed loop of no request.

use std::path::Path;

use crate::fault_server::{Fault, FaultServer};
use crate::support::{runner, stderr};

/// A Rhai scenario in `dir` from its phases and extra functions.
fn script(dir: &Path, phases: &str, extra: &str) -> String {
    let text = format!(
        r#"
fn describe() {{
    #{{ name: "mistake", description: "A scenario with a mistake in it.",
       params: [ #{{ name: "seed", value: 1, help: "seed" }} ] }}
}}
fn phases() {{ {phases} }}
fn next_request(phase, index) {{
    if index >= 20 {{ return (); }}
    #{{ prompt: "req 0", max_tokens: 2, input_tokens: 2 }}
}}
{extra}
"#
    );
    let path = dir.join("mistake.rhai");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const CLOSED_10: &str =
    r#"[#{ name: "main", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 10 }]"#;

fn error_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("error:")).collect()
}

#[test]
fn a_misspelled_snapshot_field_is_an_error_naming_it_and_the_fields() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), CLOSED_10, "fn stop(s) { s.complted >= 3 }");
    let out = runner(&[&s]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("no field `complted`"), "{err}");
    assert!(
        lines[0].contains("completed") && lines[0].contains("in_flight"),
        "{err}"
    );
    assert!(lines[0].contains("`stop`"), "{err}");
}

#[test]
fn a_misspelled_hook_is_a_warning_with_the_right_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), CLOSED_10, "fn stp(s) { s.completed >= 3 }");
    let out = runner(&[&s]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning:")
            && err.contains("`fn stp` is never called")
            && err.contains("did you mean `fn stop(snapshot)`"),
        "{err}"
    );
}

#[test]
fn two_seeds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), CLOSED_10, "");
    let out = runner(&[&s, "--seed", "1", "-p", "seed=2"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(error_lines(&err).len(), 1, "{err}");
    assert!(err.contains("--seed 1 and -p seed=2"), "{err}");
}

#[test]
fn a_phase_without_an_end_is_refused_against_a_real_server() {
    let server = FaultServer::start(|_| Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let endless = r#"[#{ name: "endless", arrival: #{ process: "closed", concurrency: 1 } }]"#;
    let s = script(dir.path(), endless, "");
    let out = runner(&[&s, "--target", &server.url]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(error_lines(&err).len(), 1, "{err}");
    assert!(
        err.contains("phase `endless` has no max_requests, no max_duration and no sessions")
            && err.contains("--unbounded"),
        "{err}"
    );
    assert!(server.seen.lock().unwrap().indices.is_empty(), "it sent");
    // A stop function is a bound of its own: it runs, and stops itself after 3 requests.
    let stop = "fn stop(s) { s.sent >= 3 }";
    let s = script(dir.path(), endless, stop);
    let out = runner(&[&s, "--target", &server.url]);
    assert!(out.status.success(), "{}", stderr(&out));
    // --unbounded runs it: here it ends when its requests run out (20).
    let s = script(dir.path(), endless, "");
    let out = runner(&[&s, "--target", &server.url, "--unbounded"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_scenario_that_sends_nothing_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let none =
        r#"[#{ name: "main", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 0 }]"#;
    let s = script(dir.path(), none, "");
    let out = runner(&[&s]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("nothing was sent"), "{err}");
    assert!(!err.contains("see the failure counts"), "{err}");
}

#[test]
fn a_scenario_failing_mid_run_reports_what_finished_then_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let path = dir.path().join("fails.rhai");
    std::fs::write(
        &path,
        r#"
fn describe() { #{ name: "fails", description: "Throws at its fifth answer." } }
fn phases() {
    this.answers = 0;
    [#{ name: "main", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 10 }]
}
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 2 } }
fn on_response(outcome) {
    this.answers += 1;
    if this.answers == 5 { throw "no sixth request"; }
}
"#,
    )
    .unwrap();
    let out = runner(&[
        &path.display().to_string(),
        "--output",
        &out_dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("no sixth request"), "{err}");
    // The report of what was sent before it, on stdout and on disk.
    let text = crate::support::stdout(&out);
    assert!(text.contains("Successful requests:"), "{text}");
    assert!(out_dir.join("result.json").exists());
    let records = std::fs::read_to_string(out_dir.join("requests.jsonl")).unwrap();
    assert!(records.lines().count() >= 5, "{records}");
}

/// Numbers beyond any clock, from a flag or a parameter, end with one line, never a panic
/// in a seconds-to-Duration conversion (scenario answers of 1e300 are in fuzz.rs).
#[test]
fn huge_numbers_are_refused_in_one_line() {
    let poisson = crate::support::scenario("poisson_duration.rhai");
    let throughput = crate::support::scenario("throughput.rhai");
    let cases: [&[&str]; 6] = [
        &[&throughput, "--request-timeout", "1e300s"],
        &[&throughput, "--drain-timeout", "1e20s"],
        &[
            &throughput,
            "--first-token-timeout",
            "18446744073709551615s",
        ],
        &[&throughput, "--start-at", "1e300"],
        &[&poisson, "-p", "duration=1e300"],
        &[&poisson, "-p", "duration=1e300s"],
    ];
    for args in cases {
        let out = runner(args);
        let err = stderr(&out);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{args:?}: {err}");
        assert_eq!(error_lines(&err).len(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A closed loop of less than one request is refused with the message a Wasm component
/// gets for `closed(0)` (the rule is `scenario::validate`'s, shared by both languages),
/// never rounded up to one.
#[test]
fn a_closed_loop_of_no_request_is_refused_not_rounded_up() {
    let dir = tempfile::tempdir().unwrap();
    for width in ["0", "0.3"] {
        let phases = format!(
            r#"[#{{ name: "main", arrival: #{{ process: "closed", concurrency: {width} }}, max_requests: 3 }}]"#
        );
        let s = script(dir.path(), &phases, "");
        let out = runner(&[&s, "--sim-profile", "zero"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{width}: {err}");
        let lines = error_lines(&err);
        assert_eq!(lines.len(), 1, "{width}: {err}");
        assert!(
            lines[0].contains("`phases` returned an invalid value")
                && lines[0].contains("a closed loop needs at least 1 request in flight"),
            "{width}: {err}"
        );
    }
}
