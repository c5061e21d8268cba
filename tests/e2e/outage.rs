//! The target dies mid-run and comes back: requests fail while it is down, later ones
//! succeed, and every request is accounted for exactly once.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

fn start_sim(port: u16) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            "sim",
            "--port",
            &port.to_string(),
            "--sim-profile",
            "fixed",
            "--sim-ttft-ms",
            "5",
            "--sim-itl-ms",
            "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim starts");
    wait_until("the simulator to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    child
}

/// What requests.jsonl says of a run.
struct Outcome {
    /// Every record's request index, in file order.
    indices: Vec<u64>,
    /// Failed requests by error kind.
    kinds: BTreeMap<String, u64>,
    /// Requests that succeeded with an index above the last failed one.
    successes_after_last_failure: u64,
}

impl Outcome {
    fn read(records: &std::path::Path) -> Outcome {
        let all: Vec<serde_json::Value> = std::fs::read_to_string(records)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
        let mut last_failure = 0;
        for r in &all {
            if let Some(kind) = r["error"]["kind"].as_str() {
                *kinds.entry(kind.to_string()).or_default() += 1;
                last_failure = last_failure.max(r["index"].as_u64().unwrap());
            }
        }
        let successes_after_last_failure = all
            .iter()
            .filter(|r| r["error"].is_null() && r["index"].as_u64().unwrap() > last_failure)
            .count() as u64;
        Outcome {
            indices: all.iter().map(|r| r["index"].as_u64().unwrap()).collect(),
            kinds,
            successes_after_last_failure,
        }
    }
}

/// Each failure kind has its own row in the report, with its count.
fn check_failure_rows(text: &str, kinds: &BTreeMap<String, u64>) {
    for (kind, n) in kinds {
        // A dead target refuses connections; requests in flight when it died lose theirs.
        let label = match kind.as_str() {
            "connect" => "connect failed",
            "disconnect" => "connection lost",
            "stream_cut" => "stream cut",
            other => panic!("unexpected failure kind {other}: {text}"),
        };
        assert_eq!(
            report_row(text, &format!("Failed ({label}):")),
            Some(*n),
            "{text}"
        );
    }
}

#[test]
fn the_target_dies_and_comes_back() {
    let _guard = exclusive();
    const REQUESTS: u64 = 400;
    let port = free_port();
    let mut sim = start_sim(port);
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("requests.jsonl");
    let target = format!("http://127.0.0.1:{port}");
    let out_dir = dir.path().display().to_string();
    let mut runner = spawn_runner(&[
        &fixture("faults.rhai"),
        "--target",
        &target,
        "-p",
        &format!("requests={REQUESTS}"),
        "-p",
        "rate=100",
        "-p",
        "max_tokens=4",
        "--output",
        &out_dir,
    ]);
    let pipes = Pipes::take(&mut runner);

    // Kill the target once a quarter of the run has finished...
    wait_until("the first records", Duration::from_secs(30), || {
        lines_in(&records) >= REQUESTS as usize / 4
    });
    sim.kill().expect("kill the simulator");
    sim.wait().unwrap();
    let at_kill = lines_in(&records);
    // ...leave it dead until requests have failed against it, then start it again on the
    // same port.
    let failures = || {
        std::fs::read_to_string(&records)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"error\""))
            .count()
    };
    wait_until("failures while down", Duration::from_secs(20), || {
        failures() >= 10
    });
    let mut sim = start_sim(port);
    let at_restart = lines_in(&records);
    let code = wait_exit(&mut runner, Duration::from_secs(60));
    let _ = sim.kill();
    let _ = sim.wait();
    let (text, err) = pipes.join();
    assert_eq!(code, Some(0), "{err}\n{text}");

    // Every request once, in the records and in the report.
    let outcome = Outcome::read(&records);
    let mut indices = outcome.indices.clone();
    indices.sort_unstable();
    assert_eq!(indices, (0..REQUESTS).collect::<Vec<_>>());
    let kinds = &outcome.kinds;
    let failed: u64 = kinds.values().sum();
    let ok = report_row(&text, "Successful requests:").unwrap();
    assert_eq!(
        report_row(&text, "Failed requests:"),
        Some(failed),
        "{text}"
    );
    assert_eq!(ok + failed, REQUESTS, "{text}");
    check_failure_rows(&text, kinds);
    assert!(
        kinds.get("connect").copied().unwrap_or(0) >= 10,
        "{kinds:?}"
    );
    let successes_after_last_failure = outcome.successes_after_last_failure;
    assert!(
        successes_after_last_failure > 0,
        "nothing succeeded after the restart"
    );
    eprintln!(
        "outage: {REQUESTS} requests, {ok} ok, {failed} failed {kinds:?}; killed after {at_kill} records, restarted after {at_restart}; {successes_after_last_failure} succeeded after the last failure"
    );
}
