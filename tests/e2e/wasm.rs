//! Wasm component scenarios, end to end: real components built from source for
//! wasm32-wasip2 (the SDK examples in scenarios/wasm and the misbehaving probes in
//! tests/guests), run by the real binary against the built-in server.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::{exclusive, fixture, repo, run_ok, runner, scenario, stderr, stdout};

/// Builds both guest workspaces once per test process into target/wasm-guests, and
/// returns the directory holding the .wasm files.
fn guests() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Compiling takes both cores for a minute: keep the timing tests off them.
        let _quiet = exclusive();
        let target_dir = repo().join("target/wasm-guests");
        ensure_wasm_target();
        for manifest in ["scenarios/wasm/Cargo.toml", "tests/guests/Cargo.toml"] {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let out = Command::new(cargo)
                .args(["build", "--release", "--locked", "--target", "wasm32-wasip2"])
                .arg("--manifest-path")
                .arg(repo().join(manifest))
                .arg("--target-dir")
                .arg(&target_dir)
                .output()
                .expect("cargo starts");
            assert!(
                out.status.success(),
                "building the {manifest} components failed (is the target installed? `rustup target add wasm32-wasip2`):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        target_dir.join("wasm32-wasip2/release")
    })
}

/// Adds the wasm32-wasip2 target through rustup when it is missing, so that
/// `cargo test --workspace` is all a fresh clone needs.
fn ensure_wasm_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("wasm32-wasip2"))
        .unwrap_or(true);
    if !installed {
        let status = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "the wasm32-wasip2 target is missing and `rustup target add wasm32-wasip2` failed"
        );
    }
}

pub(crate) fn component(name: &str) -> String {
    guests().join(format!("{name}.wasm")).display().to_string()
}

/// A copy of the probe in a directory of its own, with a file in its `data/` folder, one
/// beside it and one just outside its directory.
fn probe_package() -> (tempfile::TempDir, String) {
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::write(root.path().join("outside.txt"), "outside secret").unwrap();
    let pkg = root.path().join("pkg");
    std::fs::create_dir_all(pkg.join("data")).unwrap();
    std::fs::copy(component("sandbox_probe"), pkg.join("sandbox_probe.wasm")).unwrap();
    std::fs::write(pkg.join("beside.txt"), "beside secret").unwrap();
    std::fs::write(pkg.join("data/inside.txt"), "hello from inside").unwrap();
    let path = pkg.join("sandbox_probe.wasm").display().to_string();
    (root, path)
}

#[test]
fn the_sdk_twin_of_long_context_sends_the_same_requests_as_the_rhai_original() {
    let args = [
        "-p",
        "requests=24",
        "-p",
        "input_tokens=1500",
        "-p",
        "output_tokens=8",
        "-p",
        "rate=400",
        "--seed",
        "1234",
    ];
    let (a, b) = run_twins("long_context", &args);
    assert_eq!(a["completed"], 24);
    assert_eq!(b["completed"], 24);
    assert_eq!(a["total_input_tokens"], b["total_input_tokens"]);
    assert_eq!(a["runner"]["scenario"], "long_context");
    assert_eq!(b["runner"]["scenario"], "long_context");
    assert_eq!(a["runner"]["params"], b["runner"]["params"]);
    assert!(a.get("phases").is_none() && b.get("phases").is_none());
    // Another seed gives another stream, so the digest is not vacuous.
    let wasm = component("long_context");
    let other = [&[wasm.as_str()][..], &args[..8], &["--seed", "99"]].concat();
    let (_, c) = run_ok(&other);
    assert_ne!(request_digest(&b), request_digest(&c));
}

/// The request digest of a saved result (one phase: under `runner`, several: top level).
fn request_digest(v: &serde_json::Value) -> String {
    v["runner"]["request_digest"]
        .as_str()
        .or_else(|| v["request_digest"].as_str())
        .expect("result.json has the request digest")
        .to_string()
}

/// Runs the Rhai scenario `name` and its SDK twin with the same arguments, asserts that
/// they sent the same request stream, and returns both results (Rhai first).
fn run_twins(name: &str, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    run_against_rhai(name, &component(name), args)
}

/// Runs the Rhai scenario `name` and the component `wasm` with the same arguments,
/// asserts that they sent the same request stream, and returns both results (Rhai first).
fn run_against_rhai(
    name: &str,
    wasm: &str,
    args: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let rhai = scenario(&format!("{name}.rhai"));
    let (_, a) = run_ok(&[&[rhai.as_str()][..], args].concat());
    let (_, b) = run_ok(&[&[wasm][..], args].concat());
    assert_eq!(
        request_digest(&a),
        request_digest(&b),
        "the request streams differ"
    );
    (a, b)
}

/// The multi-turn twins' arguments. One conversation: with several, which conversation's
/// turn gets the next index depends on the order the answers come back, in either
/// language. The seed is last, so a test can swap it.
const MULTI_TURN_ARGS: [&str; 16] = [
    "--api",
    "chat",
    "-p",
    "conversations=1",
    "-p",
    "turns=4",
    "-p",
    "input_tokens=30",
    "-p",
    "system_tokens=12",
    "-p",
    "output_tokens=6",
    "-p",
    "think_time=0",
    "--seed",
    "77",
];

/// The four turns of a multi-turn result: each turn's tag and mean prompt length.
fn turns(v: &serde_json::Value) -> Vec<(String, f64)> {
    v["runner"]["tags"]
        .as_array()
        .expect("per-turn table")
        .iter()
        .map(|t| {
            let tag = t["tag"].as_str().unwrap().to_string();
            (tag, t["mean_input_tokens"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn the_sdk_twin_of_multi_turn_sends_the_same_conversation_as_the_rhai_original() {
    let args = MULTI_TURN_ARGS;
    let (a, b) = run_twins("multi_turn", &args);
    assert_eq!(
        (a["completed"].as_u64(), b["completed"].as_u64()),
        (Some(4), Some(4))
    );
    // The same per-turn table: four turns, each prompt longer than the one before.
    assert_eq!(turns(&a), turns(&b));
    let names: Vec<String> = turns(&b).into_iter().map(|t| t.0).collect();
    assert_eq!(names, ["turn-1", "turn-2", "turn-3", "turn-4"]);
    let prompts: Vec<f64> = turns(&b).into_iter().map(|t| t.1).collect();
    assert!(
        prompts.windows(2).all(|w| w[1] > w[0] + 30.0),
        "{prompts:?}"
    );
    let wasm = component("multi_turn");
    let (_, c) = run_ok(&[&[wasm.as_str()][..], &args[..14], &["--seed", "78"]].concat());
    assert_ne!(request_digest(&b), request_digest(&c));
}

/// The SLO-search twins' arguments: SLOs nothing misses, so the search doubles 50 → 100
/// → 200 → 400 req/s (max_rate) and stops, and every twin runs the same four phases
/// whatever the timing.
const SLO_SEARCH_ARGS: [&str; 16] = [
    "--sim-profile",
    "zero",
    "-p",
    "ttft_slo_ms=100000",
    "-p",
    "tpot_slo_ms=100000",
    "-p",
    "start_rate=50",
    "-p",
    "max_rate=400",
    "-p",
    "phase_duration=0.2",
    "-p",
    "input_tokens=30",
    "-p",
    "output_tokens=4",
];

/// The request rate of each phase of an adaptive run.
fn phase_rates(v: &serde_json::Value) -> Vec<f64> {
    v["phases"]
        .as_array()
        .expect("one result per phase")
        .iter()
        .map(|p| p["request_rate"].as_f64().unwrap())
        .collect()
}

/// Both runs searched 50 → 400 req/s and found the same result.
fn assert_same_search(a: &serde_json::Value, b: &serde_json::Value) {
    assert_eq!(phase_rates(a), [50.0, 100.0, 200.0, 400.0]);
    assert_eq!(phase_rates(b), phase_rates(a));
    assert_eq!(a["scenario_result"], b["scenario_result"]);
    assert_eq!(b["scenario_result"]["max_rate_under_slo"], 400.0);
    assert_eq!(b["scenario_result"]["bracket_high"], "none");
}

#[test]
fn the_sdk_twin_of_slo_search_runs_the_same_search_as_the_rhai_original() {
    let (a, b) = run_twins("slo_search", &SLO_SEARCH_ARGS);
    assert_same_search(&a, &b);
}

/// A component built against an earlier interface version, kept as a binary in
/// tests/fixtures/wit-VERSION (never rebuilt).
fn earlier_version_component(version: &str, name: &str) -> String {
    repo()
        .join(format!("tests/fixtures/wit-{version}"))
        .join(format!("{name}.wasm"))
        .display()
        .to_string()
}

/// The multi-turn component built against `version` sends the Rhai original's
/// conversation, and `runner info` describes it.
fn assert_earlier_multi_turn(version: &str) {
    let wasm = earlier_version_component(version, "multi_turn");
    let (a, b) = run_against_rhai("multi_turn", &wasm, &MULTI_TURN_ARGS);
    assert_eq!(
        (a["completed"].as_u64(), b["completed"].as_u64()),
        (Some(4), Some(4))
    );
    // Its answers reached it through on-response: every turn carries the earlier ones.
    assert_eq!(turns(&a), turns(&b));
    // The runner names the version it implements, not the component's.
    assert_eq!(b["runner"]["wit_version"], "0.4.0");
    let info = runner(&["info", &wasm]);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(stdout(&info).contains("multi_turn"), "{}", stdout(&info));
}

#[test]
fn a_multi_turn_component_built_against_0_2_sends_the_same_conversation_as_the_rhai_original() {
    assert_earlier_multi_turn("0.2");
}

#[test]
fn an_slo_search_component_built_against_0_2_runs_the_same_search_as_the_rhai_original() {
    let wasm = earlier_version_component("0.2", "slo_search");
    let (a, b) = run_against_rhai("slo_search", &wasm, &SLO_SEARCH_ARGS);
    assert_same_search(&a, &b);
}

#[test]
fn a_multi_turn_component_built_against_0_3_sends_the_same_conversation_as_the_rhai_original() {
    assert_earlier_multi_turn("0.3");
}

#[test]
fn an_slo_search_component_built_against_0_3_runs_the_same_search_as_the_rhai_original() {
    let wasm = earlier_version_component("0.3", "slo_search");
    let (a, b) = run_against_rhai("slo_search", &wasm, &SLO_SEARCH_ARGS);
    assert_same_search(&a, &b);
}

#[test]
fn the_fields_of_0_3_flow_both_ways_through_a_component() {
    assert_outcome_probe(&component("outcome_probe"));
}

/// The probe as built against 0.3.0 (tests/fixtures/wit-0.3), linked through the frozen
/// 0.3 bindings: the same fields flow as through the probe built with today's SDK.
#[test]
fn the_fields_of_0_3_flow_both_ways_through_a_component_built_against_0_3() {
    assert_outcome_probe(&earlier_version_component("0.3", "outcome_probe"));
}

/// The outcome probe's notes: the 0.3 request fields went out and the 0.3 outcome,
/// snapshot and phase-summary fields came back.
fn assert_outcome_probe(probe: &str) {
    // Reasoning first (3 tokens of 8), every other request cancelled after 2 tokens, the
    // simulator's metrics scraped every 100 ms so the short phase has samples.
    let start = Instant::now();
    let (_, r) = run_ok(&[
        probe,
        "--api",
        "chat",
        "--sim-reasoning-tokens",
        "3",
        "--server-metrics-interval",
        "100ms",
    ]);
    let notes = &r["scenario_result"];
    assert_eq!(notes["answered"], 8, "{notes}");
    // The cancels it asked for, and only those, came back as cancelled.
    assert_eq!(notes["cancelled"], 4, "{notes}");
    assert_eq!(r["completed"], 4);
    // Each request read to the end reasoned for 3 tokens, then answered.
    assert_eq!(notes["reasoning_tokens"], 12, "{notes}");
    assert_eq!(notes["answer_after_first_token"], 4, "{notes}");
    // The simulator's metrics under vLLM's names, in the snapshot and the history.
    assert!(notes["snapshot_metrics"].as_i64() > Some(0), "{notes}");
    assert!(
        notes["history_running_max"].as_f64() >= Some(1.0),
        "{notes}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn info_lists_a_components_parameters() {
    let out = runner(&["info", &component("long_context")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "long_context",
        "input_tokens   32000",
        "rate           1.0",
        "seed           42",
    ] {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }
}

#[test]
fn on_response_feeds_each_answer_into_the_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let (_, result) = run_ok(&[
        &component("chat_turns"),
        "--api",
        "chat",
        "-p",
        "conversations=4",
        "-p",
        "turns=3",
        "-p",
        "system_tokens=32",
        "-p",
        "question_tokens=16",
        "-p",
        "output_tokens=20",
        "--output",
        &out_dir,
    ]);
    assert_eq!(result["completed"], 12, "4 conversations x 3 turns");
    let records = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    let mut by_turn: Vec<Vec<u64>> = vec![vec![]; 3];
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let turn: usize = r["tag"].as_str().unwrap()["turn-".len()..].parse().unwrap();
        by_turn[turn - 1].push(r["input_tokens"].as_u64().unwrap());
    }
    assert!(by_turn.iter().all(|t| t.len() == 4), "{by_turn:?}");
    // Each turn carries the earlier questions and the 20-token answers: the prompt
    // grows by at least the answer and the new question every turn.
    let min = |t: &Vec<u64>| *t.iter().min().unwrap();
    let max = |t: &Vec<u64>| *t.iter().max().unwrap();
    assert!(min(&by_turn[1]) >= max(&by_turn[0]) + 36, "{by_turn:?}");
    assert!(min(&by_turn[2]) >= max(&by_turn[1]) + 36, "{by_turn:?}");
}

#[test]
fn an_endless_loop_is_stopped_with_an_error_naming_the_function() {
    let (_dir, probe) = probe_package();
    let start = Instant::now();
    let out = runner(&[&probe, "-p", "attack=loop"]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("sandbox_probe.wasm")
            && err.contains("`next-request`")
            && err.contains("ran longer than 1.0 s and was stopped"),
        "{err}"
    );
    // Bounded, not a performance figure: the limit is 1 s, start-up adds about a second.
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn growing_memory_past_the_cap_fails_cleanly() {
    let (_dir, probe) = probe_package();
    let out = runner(&[&probe, "-p", "attack=memory"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("`next-request`") && err.contains("past the 1024 MiB cap"),
        "{err}"
    );
    assert!(
        !err.contains("panicked at") || err.contains("[sandbox_probe]"),
        "{err}"
    );
}

/// The one `error:` line of a run of the probe with `-p attack=ATTACK`, which must fail
/// with exit code 1.
fn probe_error(attack: &str) -> String {
    let (_dir, probe) = probe_package();
    let out = runner(&[&probe, "-p", &format!("attack={attack}")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let at = errors[0]
        .find("error in `")
        .expect("the error names the function");
    errors[0][at..].to_string()
}

/// A panic is quoted with its place, as the guest's compiler named it, and nothing of
/// the trap it ends in or of the hint to set RUST_BACKTRACE, which the sandbox (no
/// environment) would ignore.
#[test]
fn a_trap_is_an_error_that_quotes_the_guests_panic() {
    let source = std::fs::read_to_string(repo().join("tests/guests/sandbox_probe/src/lib.rs"))
        .expect("the probe's source");
    let (line, column) = source
        .lines()
        .enumerate()
        .find_map(|(i, l)| Some((i + 1, l.find("panic!(\"probe panicked")? + 1)))
        .expect("the probe's panic");
    let error = probe_error("panic");
    let wanted = format!("src/lib.rs:{line}:{column}: probe panicked on purpose at request 0");
    assert!(
        error.starts_with("error in `next-request`: the component panicked at ")
            && error.ends_with(&wanted),
        "{error}"
    );
    for bad in ["RUST_BACKTRACE", "unreachable", "thread '", " / "] {
        assert!(!error.contains(bad), "`{bad}` in {error}");
    }
}

/// An `Err` returned by the guest is the error line, as the guest wrote it.
#[test]
fn an_error_the_guest_returns_is_its_text() {
    assert_eq!(
        probe_error("err"),
        "error in `next-request`: probe refused request 0 on purpose"
    );
}

#[test]
fn paths_outside_the_package_are_refused_and_the_package_is_read_only() {
    let (_dir, probe) = probe_package();
    let out = runner(&[&probe, "-p", "attack=files"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("LEAKED"), "{err}");
    for attempt in [
        "std /etc/passwd: refused",
        "std /scenario/../../../../etc/passwd: refused",
        "std ../outside.txt: refused",
        "host ../outside.txt: refused",
        "host /etc/passwd: refused",
        "std beside: refused",
        "host beside: refused",
        "std write /scenario/data/written.txt: refused",
    ] {
        assert!(err.contains(attempt), "no `{attempt}` in:\n{err}");
    }
    // Its own files it can read, both ways.
    assert!(err.contains("std inside: hello from inside"), "{err}");
    assert!(err.contains("host inside: hello from inside"), "{err}");
}

#[test]
fn a_data_dir_grants_reading_through_the_host_call() {
    let (dir, probe) = probe_package();
    let granted = dir.path().display().to_string();
    let out = runner(&[&probe, "-p", "attack=files", "--data-dir", &granted]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    // `../outside.txt` resolves into the granted directory: readable now.
    assert!(
        err.contains("host ../outside.txt: LEAKED 14 bytes"),
        "{err}"
    );
    // The file beside the component is inside the granted directory too.
    assert!(err.contains("host beside: LEAKED"), "{err}");
}

#[test]
fn a_socket_is_refused_even_to_a_listening_loopback_port() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (_dir, probe) = probe_package();
    let out = runner(&[&probe, "-p", "attack=socket", "-p", &format!("port={port}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("socket 127.0.0.1: refused"), "{err}");
    assert!(
        listener.accept().is_err(),
        "the component reached the listener"
    );
}

#[test]
fn the_environment_is_empty_and_the_clock_is_fixed() {
    let (_dir, probe) = probe_package();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([&probe, "-p", "attack=env"])
        .env("RUNNER_TEST_SECRET", "do-not-leak")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("env: 0 variables []"), "{err}");
    assert!(err.contains("args: []"), "{err}");
    assert!(!err.contains("do-not-leak") && !err.contains("RUNNER_TEST_SECRET"));
    assert!(err.contains("clock: 0.000000 s since 1970"), "{err}");
}

#[test]
fn a_component_of_another_major_version_is_refused_naming_both() {
    let out = runner(&[&component("other_major")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bench:scenario@1.0.0") && err.contains("bench:scenario@0.3.0"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn a_core_module_is_refused_with_the_target_to_build_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    // The smallest core module: magic and version 1, no sections.
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"\0asm\x01\0\0\0")
        .unwrap();
    let out = runner(&[&path.display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("core WebAssembly module, not a component") && err.contains("wasm32-wasip2"),
        "{err}"
    );
}

#[test]
fn a_rhai_script_may_wait_for_a_response_too() {
    let start = Instant::now();
    let (_, result) = run_ok(&[&fixture("turns.rhai")]);
    assert_eq!(result["completed"], 6, "2 conversations x 3 turns");
    // Waiting ends with the last answer, not at a time-out.
    assert!(start.elapsed() < Duration::from_secs(20));
}
