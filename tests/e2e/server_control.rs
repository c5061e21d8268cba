//! The server's control hooks: `--reset-prefix-cache run|phase` empties the prefix cache
//! (the simulator's own counters show it, and llama.cpp's `timings.cache_n`),
//! `--profile-phase NAME` starts and stops the server's profiler around that phase only
//! (the simulator's send log shows where), a phase can ask for both itself, and a server
//! without the routes is one warning line and a finished run. A server whose control
//! routes never answer holds the run only within each call's bound, said on stderr while
//! it is waited for, and a first Ctrl-C cuts the wait and still writes the report.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fault_server::{Fault, FaultServer, Route};
use crate::llamacpp::fixture::{engine, Options, Server};
use crate::support::{
    exclusive, run_ok, run_records, runner, scenario, spawn_runner, stderr, wait_exit, wait_until,
    Pipes, SimProcess,
};

/// Every phase sends the same `prompts` prompts twice each, one at a time: the second
/// sending of each finds its blocks cached, the first only if an earlier phase or run
/// left them there. The second phase can ask for a reset or the profiler itself.
const REPEAT: &str = r#"
fn describe() {
    #{
        name: "repeat_prompts",
        description: "the same prompts, each sent twice, in every phase",
        params: [
            #{ name: "phases", value: 2, help: "phases" },
            #{ name: "prompts", value: 4, help: "distinct prompts" },
            #{ name: "reset_second", value: false, help: "the second phase asks for a reset" },
            #{ name: "profile_second", value: false, help: "the second phase asks for the profiler" },
        ],
    }
}

fn prompt(g) {
    let s = "";
    for i in 0..160 { s += `prompt ${g} word ${i} `; }
    s
}

fn phases() {
    let out = [];
    for p in 0..param("phases") {
        let phase = #{
            name: `phase ${p}`,
            arrival: #{ process: "closed", concurrency: 1 },
            max_requests: 2 * param("prompts"),
        };
        if p == 1 {
            phase.reset_prefix_cache = param("reset_second");
            phase.profile = param("profile_second");
        }
        out.push(phase);
    }
    out
}

fn next_request(phase, index) {
    let n = param("prompts");
    if index >= 2 * n { return (); }
    #{ prompt: prompt(index % n), max_tokens: 4, ignore_eos: true }
}
"#;

/// The scenario written into `dir`.
fn repeat_scenario(dir: &Path) -> String {
    let path = dir.join("repeat_prompts.rhai");
    std::fs::write(&path, REPEAT).expect("write the scenario");
    path.display().to_string()
}

/// The server's prefix-cache hit rate of every phase of a result.
fn hit_rates(result: &Value) -> Vec<f64> {
    let phases = match result["phases"].as_array() {
        Some(phases) => phases.clone(),
        None => vec![result.clone()],
    };
    phases
        .iter()
        .map(|p| {
            p["runner"]["server_metrics"]["prefix_cache_hit_rate"]
                .as_f64()
                .unwrap_or_else(|| panic!("no prefix-cache hit rate in {}", p["runner"]))
        })
        .collect()
}

fn points(a: f64, b: f64) -> f64 {
    100.0 * (a - b).abs()
}

/// The warning lines of a run's stderr.
fn warnings(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("warning:")).collect()
}

/// shared_prefix.rhai against `url`, with `extra`: its result.
fn shared_prefix(url: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        scenario("shared_prefix.rhai"),
        "-q".into(),
        "--target".into(),
        url.into(),
        "--server-metrics-interval".into(),
        "100ms".into(),
    ];
    for p in [
        "groups=4",
        "requests_per_group=8",
        "input_tokens=1024",
        "output_tokens=8",
        "rate=20",
    ] {
        args.extend(["-p".into(), p.into()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok(&args).1
}

#[test]
fn a_reset_before_the_run_gives_a_second_run_the_first_runs_hit_rate() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&[]);
    let first = hit_rates(&shared_prefix(&sim.url, &[]))[0];
    // The same seed sends the same prompts: everything the first run cached hits.
    let again = hit_rates(&shared_prefix(&sim.url, &[]))[0];
    assert!(
        again > first + 0.2,
        "without a reset the second run hit {again}, the first {first}"
    );
    let reset = hit_rates(&shared_prefix(&sim.url, &["--reset-prefix-cache", "run"]))[0];
    assert!(
        points(reset, first) <= 5.0,
        "after a reset the run hit {reset}, the first {first}"
    );
    eprintln!("shared_prefix on one simulator: hit rate first run {first:.4}, second run without reset {again:.4}, third run with --reset-prefix-cache run {reset:.4}");
}

#[test]
fn a_reset_before_each_phase_gives_every_phase_the_first_phases_hit_rate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let rates = |extra: &[&str]| {
        let mut args = vec![repeat.as_str(), "-q", "--server-metrics-interval", "100ms"];
        args.extend(extra);
        hit_rates(&run_ok(&args).1)
    };
    let none = rates(&[]);
    assert!(none[1] > none[0] + 0.3, "without a reset: {none:?}");
    let once = rates(&["--reset-prefix-cache", "run"]);
    assert!(
        once[1] > once[0] + 0.3,
        "a reset before the run only: {once:?}"
    );
    for extra in [
        &["--reset-prefix-cache", "phase"][..],
        &["-p", "reset_second=true"][..],
    ] {
        let each = rates(extra);
        assert!(points(each[1], each[0]) <= 5.0, "{extra:?}: {each:?}");
        assert!(points(each[0], none[0]) <= 5.0, "{extra:?}: {each:?}");
    }
    eprintln!(
        "repeat_prompts hit rates per phase: no reset {none:?}, run {once:?}, phase {:?}",
        rates(&["--reset-prefix-cache", "phase"])
    );
}

/// The send log of a three-phase run that profiles its second phase: the lines of the
/// profiler's calls, and the phase of every stream between them.
fn profiled_run(extra: &[&str]) -> (Vec<Value>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let sim = SimProcess::logging(dir.path(), "sent", &[]);
    let mut args = vec![
        repeat.as_str(),
        "-q",
        "-p",
        "phases=3",
        "--target",
        &sim.url,
        "--request-id-prefix",
        "t-",
        "--server-metrics",
        "off",
    ];
    args.extend(extra);
    let out = runner(&args);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    (sim.lines(), err)
}

/// Which phase each send-log line belongs to (`None` for a control call), in order, with
/// the profiler's calls as `start` and `stop`.
fn timeline(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| match l["event"].as_str() {
            Some(event) => event.to_string(),
            None => {
                let id = l["request_id"].as_str().expect("a request id");
                let phase = id.trim_start_matches("t-").split('-').next();
                format!("phase {}", phase.expect("t-PHASE-INDEX"))
            }
        })
        .collect()
}

fn assert_second_phase_profiled(lines: &[Value]) {
    let order = timeline(lines);
    let at = |what: &str| order.iter().position(|o| o == what);
    let (start, stop) = (at("start_profile"), at("stop_profile"));
    let (Some(start), Some(stop)) = (start, stop) else {
        panic!("no start and stop of the profiler: {order:?}");
    };
    assert_eq!(order.iter().filter(|o| o.ends_with("_profile")).count(), 2);
    let between: Vec<&String> = order[start + 1..stop].iter().collect();
    assert_eq!(between.len(), 8, "{order:?}");
    assert!(between.iter().all(|o| *o == "phase 1"), "{order:?}");
    assert!(order[..start].iter().all(|o| o == "phase 0"), "{order:?}");
    assert!(
        order[stop + 1..].iter().all(|o| o == "phase 2"),
        "{order:?}"
    );
}

#[test]
fn the_profiler_runs_over_the_named_phase_only_and_a_name_no_phase_has_warns() {
    let (lines, err) = profiled_run(&["--profile-phase", "phase 1", "--profile-phase", "nope"]);
    assert_second_phase_profiled(&lines);
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].starts_with("warning: --profile-phase nope: no phase of this run"),
        "{err}"
    );
    assert!(warned[0].contains("`phase 2`"), "{err}");
}

#[test]
fn a_phase_asks_for_the_profiler_itself() {
    let (lines, err) = profiled_run(&["-p", "profile_second=true"]);
    assert_second_phase_profiled(&lines);
    assert!(warnings(&err).is_empty(), "{err}");
}

#[test]
fn a_server_without_the_routes_is_one_warning_each_and_the_run_finishes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    // The fault server answers every path with the same event stream.
    let bare = FaultServer::start(|_| Fault::None);
    let out = runner(&[
        &repeat,
        "-q",
        "-p",
        "phases=3",
        "--target",
        &bare.url,
        "--server-metrics",
        "off",
        "--reset-prefix-cache",
        "phase",
        "--profile-phase",
        "phase 1",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warned = warnings(&err);
    assert_eq!(
        warned.len(),
        2,
        "one line each for the reset and the profiler: {err}"
    );
    let root = bare.url.trim_end_matches("/v1");
    assert_eq!(
        warned[0],
        format!("warning: {root} answers POST /reset_prefix_cache with text/event-stream, not as a control route: its prefix cache is not reset")
    );
    assert_eq!(
        warned[1],
        format!("warning: {root} answers POST /start_profile with text/event-stream, not as a control route: its phases are not profiled")
    );
    assert_eq!(
        bare.seen.lock().unwrap().indices.len(),
        24,
        "every request was sent"
    );
}

/// The engine's `cache_n` of the first request a run sent to llama.cpp.
fn first_cache_n(server: &Server, tokenizer: &str, repeat: &str, extra: &[&str]) -> f64 {
    let mut args = vec![
        repeat,
        "-q",
        "-p",
        "phases=1",
        "-p",
        "prompts=2",
        "--target",
        &server.url,
        "--tokenizer",
        tokenizer,
    ];
    args.extend(extra);
    let (_, _, records) = run_records(&args);
    records[0]["server_timings"]["cache_n"]
        .as_f64()
        .unwrap_or_else(|| panic!("no server_timings.cache_n in {}", records[0]))
}

#[test]
fn a_reset_erases_llama_cpp_s_slots_and_its_first_request_computes_its_whole_prompt() {
    let _quiet = exclusive();
    let Some(engine) = engine() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let tokenizer = engine.tokenizer.display().to_string();
    let options = Options {
        slot_actions: true,
        cache_ram_mib: Some(0),
        ..Options::default()
    };
    let server = Server::start_with(&engine, options);
    let cold = first_cache_n(&server, &tokenizer, &repeat, &[]);
    let warm = first_cache_n(&server, &tokenizer, &repeat, &[]);
    let reset = first_cache_n(
        &server,
        &tokenizer,
        &repeat,
        &["--reset-prefix-cache", "run"],
    );
    eprintln!("llama.cpp cache_n of a run's first request: first run {cold}, second run {warm}, third run after --reset-prefix-cache run {reset}");
    assert_eq!(cold, 0.0);
    assert!(
        warm > 100.0,
        "the second run's first prompt was cached: {warm}"
    );
    assert_eq!(reset, 0.0, "{}", server.log_tail());
}

#[test]
fn llama_cpp_without_slot_save_path_is_one_warning_and_the_run_finishes() {
    let _quiet = exclusive();
    let Some(engine) = engine() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let server = Server::start(&engine);
    let out = runner(&[
        &repeat,
        "-q",
        "-p",
        "prompts=2",
        "--target",
        &server.url,
        "--tokenizer",
        &engine.tokenizer.display().to_string(),
        "--reset-prefix-cache",
        "phase",
        "--profile-phase",
        "phase 0",
        "--server-metrics",
        "off",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warned = warnings(&err);
    assert_eq!(warned.len(), 2, "{err}");
    assert!(
        warned[0].ends_with("is llama.cpp and refuses slot actions: start llama-server with --slot-save-path DIR: its prefix cache is not reset"),
        "{err}"
    );
    assert!(
        warned[1]
            .ends_with("is llama.cpp, which has no profiler route: its phases are not profiled"),
        "{err}"
    );
}

/// llama.cpp's host-memory prompt cache outlives an erase of its slots (measured: a
/// prompt it had moved there came back all but one token cached), and no route empties
/// it: a reset of a server started without `--cache-ram 0` says so.
#[test]
fn a_reset_of_llama_cpp_with_its_host_memory_cache_warns_that_it_stays() {
    let _quiet = exclusive();
    let Some(engine) = engine() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let options = Options {
        slot_actions: true,
        cache_ram_mib: None,
        ..Options::default()
    };
    let server = Server::start_with(&engine, options);
    let out = runner(&[
        &repeat,
        "-q",
        "-p",
        "phases=1",
        "-p",
        "prompts=2",
        "--target",
        &server.url,
        "--tokenizer",
        &engine.tokenizer.display().to_string(),
        "--reset-prefix-cache",
        "run",
        // A scrape that times out on a busy machine would be a warning of its own.
        "--server-metrics",
        "off",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    let root = server.url.trim_end_matches("/v1");
    assert!(
        warned[0].starts_with(&format!("warning: {root} is llama.cpp: its slots were erased, but not its host-memory prompt cache")),
        "{err}"
    );
}

/// The repeat scenario's one phase of four requests against `server`, its profiler asked
/// for, with `extra`; recorded in `out`.
fn control_args<'a>(
    repeat: &'a str,
    server: &'a str,
    out: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        repeat,
        "-p",
        "phases=1",
        "-p",
        "prompts=2",
        "--target",
        server,
        "--server-metrics",
        "off",
        "--profile-phase",
        "phase 0",
        "--output",
        out,
    ];
    args.extend(extra);
    args
}

/// The lines of `err` that start with `prefix` and hold `part`.
fn lines_with<'a>(err: &'a str, prefix: &str, part: &str) -> Vec<&'a str> {
    err.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(part))
        .collect()
}

/// A server whose engine questions, reset and profiler stop never answer: each is waited
/// for within its bound (2 s, 2 s, 5 s, 30 s; they were 30, 30, 30 and 120 s, silent), said
/// on stderr while it is waited for, and the run ends with its report and result.json.
#[test]
fn control_routes_that_never_answer_are_bounded_and_said() {
    let server = FaultServer::routed(
        |_| Fault::None,
        |path| match path {
            "/start_profile" => Some(Route::Done),
            "/props" | "/get_model_info" | "/reset_prefix_cache" | "/stop_profile" => {
                Some(Route::Hang)
            }
            _ => None,
        },
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let out = dir.path().join("out").display().to_string();
    let args = control_args(&repeat, &server.url, &out, &["--reset-prefix-cache", "run"]);
    let start = Instant::now();
    let mut child = spawn_runner(&args);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(90));
    let took = start.elapsed();
    let (text, err) = pipes.join();
    eprintln!("ended in {took:?}:\n{err}");
    assert_eq!(code, Some(0), "{err}");
    for route in [
        "GET /props",
        "GET /get_model_info",
        "POST /reset_prefix_cache",
        "POST /stop_profile",
    ] {
        let said = lines_with(&err, "note: waiting for ", &format!(" to answer {route} "));
        assert_eq!(said.len(), 1, "{route}: {err}");
    }
    let root = &server.url;
    assert_eq!(
        lines_with(&err, "warning: ", "no answer in"),
        [
            format!("warning: the prefix cache of {root} was not reset: POST /reset_prefix_cache: no answer in 5 s"),
            format!("warning: the profiler of {root} did not stop after phase `phase 0`: POST /stop_profile: no answer in 30 s"),
        ],
        "{err}"
    );
    assert!(text.contains("Serving Benchmark Result"), "{text}");
    assert!(Path::new(&out).join("result.json").is_file());
    assert!(took < Duration::from_secs(75), "{took:?}");
}

/// A `/stop_profile` that never answers, and a Ctrl-C while it is waited for: the run
/// gives the profiler 3 s more, then ends with its report and result.json (the first
/// Ctrl-C once did nothing for the 120 s of the call).
#[test]
fn a_first_ctrl_c_cuts_the_wait_for_a_profiler_that_never_stops() {
    let server = FaultServer::routed(
        |_| Fault::None,
        |path| match path {
            "/start_profile" => Some(Route::Done),
            "/stop_profile" => Some(Route::Hang),
            _ => None,
        },
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let repeat = repeat_scenario(dir.path());
    let out = dir.path().join("out").display().to_string();
    let mut child = spawn_runner(&control_args(&repeat, &server.url, &out, &[]));
    let pipes = Pipes::take(&mut child);
    let waiting = format!(
        "note: waiting for {} to answer POST /stop_profile",
        server.url
    );
    wait_until(
        "the wait for /stop_profile said",
        Duration::from_secs(60),
        || {
            let lines = pipes.err_lines.lock().unwrap();
            lines.iter().any(|l| l.starts_with(&waiting))
        },
    );
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let start = Instant::now();
    let code = wait_exit(&mut child, Duration::from_secs(20));
    let took = start.elapsed();
    let (text, err) = pipes.join();
    eprintln!("ended {took:?} after Ctrl-C, exit {code:?}:\n{err}");
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains(&format!(
            "warning: interrupted: the profiler of {} was not seen to stop after phase `phase 0`",
            server.url
        )),
        "{err}"
    );
    assert!(text.contains("Serving Benchmark Result"), "{text}");
    assert!(Path::new(&out).join("result.json").is_file());
    assert!(took < Duration::from_secs(12), "{took:?}");
}
