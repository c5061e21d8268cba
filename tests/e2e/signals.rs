//! Ctrl-C, SIGTERM and SIGHUP: the runner stops sending, drains briefly, prints the report
//! of what finished, keeps every record, and exits 130, whatever it was waiting for (a send
//! far ahead, a long scenario call, the pre-run checks); a second Ctrl-C exits at once.

use std::time::Duration;

use crate::fault_server::{Fault, FaultServer};
use crate::support::*;

const EXIT_INTERRUPTED: i32 = 130;

fn send(child: &std::process::Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill failed");
}

/// A long open-loop run against the built-in simulator, every request about 100 ms.
fn long_run(out_dir: &str, extra: &[&str]) -> std::process::Child {
    let mut args = vec![
        fixture("faults.rhai"),
        "-p".into(),
        "requests=3000".into(),
        "-p".into(),
        "rate=50".into(),
        "-p".into(),
        "max_tokens=10".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--sim-ttft-ms".into(),
        "10".into(),
        "--sim-itl-ms".into(),
        "10".into(),
        "--output".into(),
        out_dir.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn_runner(&args)
}

fn interrupted_run_keeps_everything(signal: libc::c_int) {
    let _guard = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("requests.jsonl");
    let mut child = long_run(&dir.path().display().to_string(), &[]);
    let pipes = Pipes::take(&mut child);
    wait_until("records", Duration::from_secs(30), || {
        lines_in(&records) >= 40
    });
    send(&child, signal);
    let code = wait_exit(&mut child, Duration::from_secs(30));
    let (text, err) = pipes.join();
    assert_eq!(code, Some(EXIT_INTERRUPTED), "{err}\n{text}");
    assert!(
        err.contains("interrupted: finishing in-flight requests"),
        "{err}"
    );
    assert!(
        text.contains("============ Serving Benchmark Result ============")
            && text.contains("Phase ended: interrupted."),
        "{text}"
    );
    let ok = report_row(&text, "Successful requests:").unwrap();
    let failed = report_row(&text, "Failed requests:").unwrap();
    let lines = std::fs::read_to_string(&records).unwrap();
    let mut indices: Vec<u64> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(indices.len() as u64, ok + failed, "{text}");
    assert!(ok >= 40 && ok + failed < 3000, "{text}");
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(
        indices.len() as u64,
        ok + failed,
        "a request recorded twice"
    );
    // The saved result agrees with the console.
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.json")).unwrap())
            .unwrap();
    assert_eq!(num(&result, "completed") as u64, ok);
    eprintln!(
        "signal {signal}: exit {code:?}, report {ok} ok + {failed} failed, requests.jsonl {} lines",
        indices.len()
    );
}

#[test]
fn ctrl_c_prints_the_report_and_keeps_every_record() {
    interrupted_run_keeps_everything(libc::SIGINT);
}

#[test]
fn sigterm_is_an_interrupt_too() {
    interrupted_run_keeps_everything(libc::SIGTERM);
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("requests.jsonl");
    // Every 4th request hangs for a minute, so the drain after the first Ctrl-C has work
    // that would keep it waiting its full 5 s.
    let mut child = long_run(
        &dir.path().display().to_string(),
        &["--sim-slow-every", "4", "--sim-slow-ms", "60000"],
    );
    let pipes = Pipes::take(&mut child);
    wait_until("records", Duration::from_secs(30), || {
        lines_in(&records) >= 20
    });
    send(&child, libc::SIGINT);
    let lines = pipes.err_lines.clone();
    wait_until("the first interrupt", Duration::from_secs(10), || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("interrupted"))
    });
    let before = lines_in(&records);
    send(&child, libc::SIGINT);
    let code = wait_exit(&mut child, Duration::from_secs(30));
    let (text, err) = pipes.join();
    assert_eq!(code, Some(EXIT_INTERRUPTED), "{err}\n{text}");
    // It quit without waiting for the drain: no report.
    assert!(!text.contains("Serving Benchmark Result"), "{text}");
    // What was written stays, whole.
    let kept = std::fs::read_to_string(&records).unwrap();
    assert!(kept.lines().count() >= before);
    for l in kept.lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("a whole record");
    }
}

/// Ctrl-C while a slow scenario is still filling its queue ahead of the first send: the
/// run does not wait for it (up to a minute) but stops and reports at once.
#[test]
fn ctrl_c_before_the_first_send_stops_at_once() {
    let _guard = exclusive();
    let mut child = spawn_runner(&[&fixture("slow_generator.rhai"), "--sim-profile", "zero"]);
    let pipes = Pipes::take(&mut child);
    let lines = pipes.err_lines.clone();
    // By then the pre-run checks passed and the phase is priming.
    std::thread::sleep(Duration::from_millis(1500));
    send(&child, libc::SIGINT);
    wait_until("the interrupt", Duration::from_secs(10), || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("interrupted"))
    });
    let code = wait_exit(&mut child, Duration::from_secs(20));
    let (text, err) = pipes.join();
    assert_eq!(code, Some(EXIT_INTERRUPTED), "{err}\n{text}");
    assert!(text.contains("Phase ended: interrupted."), "{text}");
}

/// Starts `runner ARGS…` against the fault-injecting server and, once `ready` holds for its
/// stderr lines (or after `after`), interrupts it with `signal`; asserts it exits 130
/// within 6 s of the signal, having printed the report of what finished. Returns its
/// stdout and stderr.
fn interrupted_within_6s(
    args: &[&str],
    signal: libc::c_int,
    ready: impl Fn(&[String]) -> bool,
) -> (String, String) {
    let mut child = spawn_runner(args);
    let pipes = Pipes::take(&mut child);
    let lines = pipes.err_lines.clone();
    wait_until("the state to interrupt", Duration::from_secs(60), || {
        ready(&lines.lock().unwrap())
    });
    let signalled = std::time::Instant::now();
    send(&child, signal);
    let code = wait_exit(&mut child, Duration::from_secs(30));
    let took = signalled.elapsed();
    let (text, err) = pipes.join();
    assert_eq!(code, Some(EXIT_INTERRUPTED), "{err}\n{text}");
    assert!(
        took < Duration::from_secs(6),
        "exited {took:?} after the signal"
    );
    eprintln!("{args:?}: exit 130 {took:?} after signal {signal}");
    (text, err)
}

/// The report says the phase was interrupted and counts `ok` successes.
fn assert_interrupted_report(text: &str, ok: u64) {
    assert!(text.contains("Phase ended: interrupted."), "{text}");
    assert_eq!(report_row(text, "Successful requests:"), Some(ok), "{text}");
}

/// A signal while the next send is far ahead (a custom gap of 1e9 s, `at: 1e15`, a
/// constant 0.05 req/s, a gap of 1000 s): the wait ends at once, nothing more is sent,
/// and the run reports the one request that finished.
#[test]
fn a_signal_during_a_far_future_wait_stops_at_once() {
    let _guard = exclusive();
    let server = FaultServer::start(|_| Fault::None);
    let cases: [(&str, &str, libc::c_int); 4] = [
        ("gap", "1e9", libc::SIGINT),
        ("at", "1e15", libc::SIGINT),
        ("rate", "20", libc::SIGTERM),
        ("gap", "1000", libc::SIGHUP),
    ];
    for (how, wait, signal) in cases {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("requests.jsonl");
        let out = dir.path().display().to_string();
        let (how_p, wait_p) = (format!("how={how}"), format!("wait={wait}"));
        let args = [
            &fixture("far_send.rhai"),
            "--target",
            &server.url,
            "--model",
            "fault-model",
            "-p",
            &how_p,
            "-p",
            &wait_p,
            "--output",
            &out,
        ];
        let (text, _) = interrupted_within_6s(&args, signal, |_| lines_in(&records) >= 1);
        assert_interrupted_report(&text, 1);
        assert!(dir.path().join("result.json").exists());
    }
    // Each run sent its first request only.
    assert_eq!(server.seen.lock().unwrap().indices, vec![0, 0, 0, 0]);
}

/// A signal while the scenario is inside one long call (generating a request): the run
/// does not wait for the call to return, but reports what finished and exits.
#[test]
fn a_signal_during_a_long_scenario_call_stops_at_once() {
    let _guard = exclusive();
    let server = FaultServer::start(|_| Fault::None);
    let args = [
        &fixture("slow_call.rhai"),
        "--target",
        &server.url,
        "--model",
        "fault-model",
    ];
    let (text, err) = interrupted_within_6s(&args, libc::SIGINT, |lines| {
        lines.iter().any(|l| l.contains("long call"))
    });
    // The call lasts about 20 s of tokenizer work, cut at 10 s by the per-call limit, and
    // the run exits within 6 s of the signal: so it ended by the signal, without waiting
    // for the call to return, and not by the call failing at a limit. (6M turns of a
    // plain loop, 30M of the 50M operations, were under a second on a quiet machine: the
    // call returned before the run's 1 s grace for records was over.)
    assert!(!err.contains("call done"), "{err}");
    assert!(
        !err.contains("operations") && !err.contains("time limit") && !err.contains("error"),
        "{err}"
    );
    assert!(text.contains("Phase ended: interrupted."), "{text}");
    // Request 300 was never generated: nothing after the call was sent.
    let ok = report_row(&text, "Successful requests:").unwrap();
    let failed = report_row(&text, "Failed requests:").unwrap();
    assert!(ok > 0 && ok + failed <= 300, "{text}");
}

/// The long call of the test above, made short (300 turns, about a second) and left
/// alone, returns within the per-call limits and logs "call done", and the run
/// completes: the line the test above looks for is written when a call does return.
#[test]
fn the_long_scenario_call_ends_by_itself() {
    let _guard = exclusive();
    let server = FaultServer::start(|_| Fault::None);
    let args = [
        &fixture("slow_call.rhai"),
        "--target",
        &server.url,
        "--model",
        "fault-model",
        "-p",
        "requests=301",
        "-p",
        "turns=300",
    ];
    let mut child = spawn_runner(&args);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let (text, err) = pipes.join();
    assert_eq!(code, Some(0), "{err}\n{text}");
    assert!(
        err.contains("long call") && err.contains("call done"),
        "{err}"
    );
    assert!(!err.contains("operations"), "{err}");
    assert_eq!(
        report_row(&text, "Successful requests:"),
        Some(301),
        "{text}"
    );
}

/// A signal during the pre-run checks (the target accepts the connection and never
/// answers): exit 130 at once, with one line on stderr, rather than death by the signal.
#[test]
fn a_signal_during_the_pre_run_checks_exits_130() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accepts and holds connections for 30 s, answering nothing.
    listener.set_nonblocking(true).unwrap();
    let _holder = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut held = Vec::new();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok((stream, _)) = listener.accept() {
                held.push(stream);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let mut child = spawn_runner(&[&fixture("faults.rhai"), "--target", &url]);
    let pipes = Pipes::take(&mut child);
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = std::time::Instant::now();
    send(&child, libc::SIGINT);
    let code = wait_exit(&mut child, Duration::from_secs(30));
    let took = signalled.elapsed();
    let (text, err) = pipes.join();
    assert_eq!(code, Some(EXIT_INTERRUPTED), "{err}\n{text}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert!(err.contains("interrupted"), "{err}");
}
