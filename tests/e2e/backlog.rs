//! Records are built after their responses, on threads of their own (counting the tokens
//! of a long answer without whitespace takes seconds): the benchmark's duration ends with
//! its last response, never with the counting, and Ctrl-C does not wait for it.

use std::time::{Duration, Instant};

use crate::fault_server::{Fault, FaultServer};
use crate::support::*;

/// `n` answers of one long word each, all at once.
fn huge_words(n: usize, out_dir: &str) -> Vec<String> {
    [
        fixture("faults.rhai"),
        "-p".into(),
        format!("requests={n}"),
        "-p".into(),
        format!("concurrency={n}"),
        "--output".into(),
        out_dir.into(),
    ]
    .to_vec()
}

#[test]
fn the_duration_ends_with_the_last_response_not_with_the_counting() {
    let _quiet = exclusive();
    // 16 answers of a 48 KiB word: the counting (under a second of a quiet core, more
    // beside other work: the builders run at nice 19) lasts well past the last response,
    // yet stays bounded on a busy machine, where the whole run must finish.
    let server = FaultServer::start(|_| Fault::HugeWord(1));
    let dir = tempfile::tempdir().unwrap();
    let mut args = huge_words(16, &dir.path().display().to_string());
    args.extend(["--target".to_string(), server.url.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = runner(&args);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = records_in(dir.path());
    assert_eq!(records.len(), 16);
    assert!(records.iter().all(|r| r["error"].is_null()), "{records:?}");
    let last_end_ns = records
        .iter()
        .map(|r| r["end_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.json")).unwrap())
            .unwrap();
    let duration_s = num(&result, "duration");
    let off_ms = (duration_s * 1e3 - last_end_ns as f64 / 1e6).abs();
    eprintln!(
        "16 words of 48 KiB: last response ended at {:.3} s, duration {duration_s:.3} s ({off_ms:.1} ms apart), run took {took:?}",
        last_end_ns as f64 / 1e9
    );
    assert!(
        off_ms < 50.0,
        "duration {duration_s} s, last response ended at {last_end_ns} ns"
    );
}

#[test]
fn ctrl_c_while_records_are_counted_exits_within_5_s() {
    let _quiet = exclusive();
    // 16 answers of a 3 MB word: still being counted when the signal comes, on any machine.
    let server = FaultServer::start(|_| Fault::HugeWord(64));
    let dir = tempfile::tempdir().unwrap();
    let mut args = huge_words(16, &dir.path().display().to_string());
    args.extend(["--target".to_string(), server.url.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_runner(&args);
    let pipes = Pipes::take(&mut child);
    wait_until("16 answers sent", Duration::from_secs(60), || {
        server.seen.lock().unwrap().indices.len() >= 16
    });
    // Time for the client to read them: the run now only counts tokens.
    std::thread::sleep(Duration::from_millis(500));
    let signalled = Instant::now();
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let code = wait_exit(&mut child, Duration::from_secs(300));
    let took = signalled.elapsed();
    let (text, err) = pipes.join();
    eprintln!("Ctrl-C while counting: exit {code:?} {took:?} after the signal");
    assert_eq!(code, Some(130), "{err}\n{text}");
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after the signal\n{err}"
    );
    // What was built is whole, and the report counts only that.
    let records = records_in(dir.path());
    // (A phase left with no record has no table of results.)
    let ok = report_row(&text, "Successful requests:").unwrap_or(0);
    assert_eq!(records.len() as u64, ok, "{text}\n{err}");
    if records.len() < 16 {
        let left = format!("warning: {} finished requests", 16 - records.len());
        assert!(err.contains(&left), "{err}");
    }
}
