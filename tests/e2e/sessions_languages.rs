//! The agentic scenarios' twins: `agentic_coding` and `agent_fanout` written in Rust with
//! the SDK (scenarios/wasm), and `agentic_coding` in Python and JavaScript (languages.rs
//! builds and runs those with the arguments and the check here), send the request stream
//! of their Rhai original on the built-in simulator, which answers with tool calls: the
//! same request digest in result.json. Sessions draw from their own random streams and
//! the digest keys a session's request by its asked wait, so the digest does not depend
//! on how the answers interleave. tests/guests/session_probe takes a component's fan-out
//! and join, and the steps the host's rules refuse, through the Wasm boundary.

use crate::support::{run_ok, runner, scenario, stderr};
use crate::wasm::component;

/// agentic_coding made small: 4 sessions of 2 to 4 turns, tools answering within 50 ms,
/// short texts, so a debug runner with an interpreter-sized guest finishes in seconds.
pub(crate) const AGENTIC_ARGS: [&str; 30] = [
    "--api",
    "chat",
    "-p",
    "sessions=4",
    "-p",
    "rate=50",
    "-p",
    "system_tokens=60",
    "-p",
    "repo_tokens=120",
    "-p",
    "task_tokens=12",
    "-p",
    "turns_min=2",
    "-p",
    "turns_max=4",
    "-p",
    "output_tokens=6",
    "-p",
    "tool_latency_min=0.01",
    "-p",
    "tool_latency_max=0.05",
    "-p",
    "result_tokens_min=5",
    "-p",
    "result_tokens_max=40",
    "-p",
    "think_time=0.01",
    "--seed",
    "7",
];

/// agent_fanout made small: 2 planners of 3 to 4 sub-agents each, of 1 to 2 turns. The
/// synthesis lists the children in `joined` order, the order they were opened (never the
/// order they ended, which the answers' timing decides), so the stream is one.
const FANOUT_ARGS: [&str; 28] = [
    "--api",
    "chat",
    "-p",
    "planners=2",
    "-p",
    "rate=50",
    "-p",
    "task_tokens=20",
    "-p",
    "plan_tokens=6",
    "-p",
    "workers_min=3",
    "-p",
    "workers_max=4",
    "-p",
    "worker_turns_max=2",
    "-p",
    "worker_tokens=6",
    "-p",
    "tool_latency_min=0.01",
    "-p",
    "tool_latency_max=0.05",
    "-p",
    "result_tokens=10",
    "-p",
    "synthesis_tokens=6",
    "--seed",
    "11",
];

fn request_digest(v: &serde_json::Value) -> &str {
    v["runner"]["request_digest"]
        .as_str()
        .expect("result.json has the request digest")
}

/// Both runs sent the same request stream, all of it answered, with the same tokens in.
pub(crate) fn assert_same_sessions(rhai: &serde_json::Value, twin: &serde_json::Value) {
    assert_eq!(
        request_digest(rhai),
        request_digest(twin),
        "the request streams differ"
    );
    assert_eq!(twin["failed"], 0, "{twin}");
    assert!(twin["completed"].as_u64() > Some(0), "{twin}");
    for key in ["completed", "total_input_tokens", "total_output_tokens"] {
        assert_eq!(rhai[key], twin[key], "{key}");
    }
}

/// Runs the Rhai original `name` and the Rust twin with `args`; both results.
fn run_rust_twin(name: &str, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let rhai = scenario(&format!("{name}.rhai"));
    let (_, a) = run_ok(&[&[rhai.as_str()][..], args].concat());
    let (_, b) = run_ok(&[&[component(name).as_str()][..], args].concat());
    assert_same_sessions(&a, &b);
    (a, b)
}

#[test]
fn the_sdk_twin_of_agentic_coding_sends_the_same_sessions_as_the_rhai_original() {
    let (_, b) = run_rust_twin("agentic_coding", &AGENTIC_ARGS);
    // 4 sessions of 2 to 4 turns each.
    let completed = b["completed"].as_u64().unwrap();
    assert!((8..=16).contains(&completed), "{completed} requests");
    // Another seed gives another stream, so the digest is not vacuous.
    let wasm = component("agentic_coding");
    let n = AGENTIC_ARGS.len();
    let other = [&[wasm.as_str()][..], &AGENTIC_ARGS[..n - 1], &["8"]].concat();
    let (_, c) = run_ok(&other);
    assert_ne!(request_digest(&b), request_digest(&c));
}

#[test]
fn the_sdk_twin_of_agent_fanout_sends_the_same_sessions_as_the_rhai_original() {
    let (_, b) = run_rust_twin("agent_fanout", &FANOUT_ARGS);
    // Each planner: a plan, 3 to 4 sub-agents of 1 to 2 turns, a synthesis.
    let completed = b["completed"].as_u64().unwrap();
    assert!(
        (2 * 5..=2 * 10).contains(&completed),
        "{completed} requests"
    );
}

#[test]
fn a_components_sessions_fan_out_and_join_through_the_wasm_boundary() {
    let (_, r) = run_ok(&[&component("session_probe"), "--api", "chat"]);
    let notes = &r["scenario_result"];
    // Two roots, each joined once with its own two children, whose requests each came
    // back with the simulator's tool call.
    assert_eq!(notes["joins"], 2, "{notes}");
    assert_eq!(notes["joined_children"], 4, "{notes}");
    assert_eq!(notes["tool_calls"], 4, "{notes}");
    assert_eq!(
        (r["completed"].as_u64(), r["failed"].as_u64()),
        (Some(4), Some(0))
    );
}

#[test]
fn a_step_the_rules_refuse_ends_the_run_with_one_line_naming_the_rule() {
    let probe = component("session_probe");
    for (attack, rule) in [
        (
            "nan_after",
            "`after` must be a finite number of seconds >= 0, got NaN",
        ),
        (
            "negative_after",
            "`after` must be a finite number of seconds >= 0, got -1",
        ),
        (
            "slash",
            "child name `a/b` must be 1 to 64 bytes without `/`",
        ),
        (
            "empty_name",
            "child name `` must be 1 to 64 bytes without `/`",
        ),
        ("twice", "child name `a` is given twice"),
        ("too_many", "a fan-out opens 1 to 64 children, got 65"),
        ("no_children", "a fan-out opens 1 to 64 children, got 0"),
        ("at", "leave out `at` and `delay`"),
        (
            "tool_json",
            "`tools[0].parameters-json` must be the text of a JSON object",
        ),
    ] {
        let out = runner(&[&probe, "--api", "chat", "-p", &format!("attack={attack}")]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{attack}: {err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{attack}: {err}");
        assert!(
            errors[0].contains("`session-step` returned an invalid value")
                && errors[0].contains(rule),
            "{attack}: {err}"
        );
        assert!(!err.contains("panicked"), "{attack}: {err}");
    }
}
