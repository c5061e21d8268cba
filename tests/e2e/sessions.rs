//! Sessions (`session_step`) end to end: the bundled agentic scenarios on the simulator,
//! whose tool calls the scenarios answer; the same request stream on every run and from
//! shards; the session-affinity header as the server received it; and waits scheduled by
//! the host from the end of the answer before them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::fault_server::{Fault, FaultServer};
use crate::shards::{json, write_scenario};
use crate::support::{records_in, runner, scenario, stderr, stdout, SimProcess};

/// agentic_coding made small: 6 sessions of 3 to 6 turns, tools answering in 50-300 ms.
const CODING: [&str; 20] = [
    "-p",
    "sessions=6",
    "-p",
    "rate=5",
    "-p",
    "turns_min=3",
    "-p",
    "turns_max=6",
    "-p",
    "tool_latency_min=0.05",
    "-p",
    "tool_latency_max=0.3",
    "-p",
    "system_tokens=500",
    "-p",
    "repo_tokens=1000",
    "-p",
    "result_tokens_max=300",
    "-p",
    "output_tokens=32",
];

/// Runs `args` with `--output DIR`; the result.json and the records.
fn run_in(dir: &Path, args: &[&str]) -> (serde_json::Value, Vec<serde_json::Value>) {
    let out_dir = dir.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--output", &out_dir, "-q"]);
    let out = runner(&all);
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    (json(&dir.join("result.json")), records_in(dir))
}

fn digest(result: &serde_json::Value) -> String {
    result["runner"]["request_digest"]
        .as_str()
        .expect("a request digest")
        .to_string()
}

/// Records by session id, each session's in turn order.
fn by_session(records: &[serde_json::Value]) -> HashMap<String, Vec<&serde_json::Value>> {
    let mut sessions: HashMap<String, Vec<&serde_json::Value>> = HashMap::new();
    for r in records {
        let id = r["session"]
            .as_str()
            .expect("every request has its session");
        sessions.entry(id.to_string()).or_default().push(r);
    }
    for turns in sessions.values_mut() {
        turns.sort_by_key(|r| r["turn"].as_u64());
    }
    sessions
}

#[test]
fn agentic_coding_answers_the_simulators_tool_calls_with_the_same_stream_every_run() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut args = vec![
        scenario("agentic_coding.rhai"),
        "--api".into(),
        "chat".into(),
    ];
    args.extend(CODING.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (first, records) = run_in(&tmp.path().join("a"), &args);
    let (second, _) = run_in(&tmp.path().join("b"), &args);
    assert_eq!(digest(&first), digest(&second), "two runs, one stream");

    let sessions = by_session(&records);
    assert_eq!(sessions.len(), 6, "every session ran");
    for (id, turns) in &sessions {
        assert!(
            (3..=6).contains(&turns.len()),
            "session {id}: {} turns",
            turns.len()
        );
        for (i, r) in turns.iter().enumerate() {
            assert!(r.get("error").is_none(), "session {id} turn {i}: {r}");
            assert_eq!(r["turn"], i as u64, "session {id}");
            let last = i + 1 == turns.len();
            // Every turn but the last demands a tool call, and the simulator makes one.
            assert_eq!(
                r["tool_calls"].as_u64().unwrap_or(0),
                u64::from(!last),
                "session {id} turn {i}"
            );
            if !last {
                assert!(r["tool_call_tokens"].as_u64().unwrap_or(0) > 0);
                assert!(r["first_tool_call_ns"].as_u64().is_some());
            }
            // After the first turn each waits for the tool results the scenario gave.
            assert_eq!(
                r["tool_wait"].as_bool().unwrap_or(false),
                i > 0,
                "session {id} turn {i}"
            );
        }
        // The context grows by the answer and the tool results.
        let inputs: Vec<u64> = turns
            .iter()
            .map(|r| r["input_tokens"].as_u64().unwrap())
            .collect();
        assert!(
            inputs.windows(2).all(|w| w[1] > w[0]),
            "session {id}: {inputs:?}"
        );
    }
}

#[test]
fn a_sessions_next_request_leaves_no_sooner_than_its_wait_after_the_last_answer() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut args = vec![
        scenario("agentic_coding.rhai"),
        "--api".into(),
        "chat".into(),
    ];
    args.extend(CODING.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, records) = run_in(tmp.path(), &args);
    for (id, turns) in by_session(&records) {
        for pair in turns.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            let wait = after["wait_ns"].as_u64().expect("a wait");
            // The tool latency this scenario draws: 50 to 300 ms.
            assert!((50_000_000..=300_000_000).contains(&wait), "{wait}");
            let ended = before["end_ns"].as_u64().unwrap();
            let scheduled = after["scheduled_ns"].as_u64().unwrap();
            let sent = after["sent_ns"].as_u64().unwrap();
            // Scheduled from the end of the answer (its last chunk's arrival may precede
            // the end of the stream by the [DONE] event): never before it plus the wait.
            assert!(
                scheduled + 5_000_000 >= ended + wait,
                "session {id}: {scheduled} < {ended} + {wait}"
            );
            assert!(sent >= scheduled, "session {id}: sent before its time");
        }
    }
}

#[test]
fn agent_fanout_joins_every_child_before_its_synthesis() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (result, records) = run_in(
        tmp.path(),
        &[
            &scenario("agent_fanout.rhai"),
            "--api",
            "chat",
            "-p",
            "tool_latency_max=0.3",
        ],
    );
    assert_eq!(result["failed"], 0);
    // Children join in the order they were opened, not the order they ended: one stream.
    let (again, _) = run_in(
        &tmp.path().join("again"),
        &[
            &scenario("agent_fanout.rhai"),
            "--api",
            "chat",
            "-p",
            "tool_latency_max=0.3",
        ],
    );
    assert_eq!(digest(&again), digest(&result));
    let sessions = by_session(&records);
    let planners: Vec<&String> = sessions.keys().filter(|id| !id.contains('/')).collect();
    assert_eq!(planners.len(), 4);
    for planner in planners {
        let own = &sessions[planner];
        assert_eq!(
            own.len(),
            2,
            "planner {planner}: the plan and the synthesis"
        );
        let children: Vec<&Vec<&serde_json::Value>> = sessions
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("{planner}/worker-")))
            .map(|(_, turns)| turns)
            .collect();
        assert!(
            (4..=8).contains(&children.len()),
            "planner {planner}: {} workers",
            children.len()
        );
        let plan_end = own[0]["end_ns"].as_u64().unwrap();
        let last_child_end = children
            .iter()
            .flat_map(|turns| turns.iter().map(|r| r["end_ns"].as_u64().unwrap()))
            .max()
            .unwrap();
        for turns in &children {
            assert!(
                turns[0]["sent_ns"].as_u64().unwrap() >= plan_end,
                "a worker starts after the plan"
            );
            assert!((1..=3).contains(&turns.len()));
        }
        assert!(
            own[1]["scheduled_ns"].as_u64().unwrap() + 5_000_000 >= last_child_end,
            "the synthesis waits for the last worker"
        );
    }
}

fn shard_dirs(root: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| root.join(format!("shard-{i}"))).collect()
}

#[test]
fn four_shards_of_agentic_coding_merge_to_the_single_runs_digest_and_counts() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&[]);
    let base: Vec<String> = [
        scenario("agentic_coding.rhai"),
        "--target".into(),
        sim.url.clone(),
        "--api".into(),
        "chat".into(),
    ]
    .into_iter()
    .chain(CODING.iter().map(|s| s.to_string()))
    .collect();
    let base: Vec<&str> = base.iter().map(String::as_str).collect();
    let (single, _) = run_in(&tmp.path().join("single"), &base);
    let dirs = shard_dirs(tmp.path(), 4);
    let children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
                .args(&base)
                .args(["--shard", &format!("{i}/4"), "-q", "--output"])
                .arg(dir)
                .env_remove("JOB_COMPLETION_INDEX")
                .env_remove("SLURM_ARRAY_TASK_ID")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a shard starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("shard output");
        assert!(
            out.status.success(),
            "shard {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Whole sessions per shard: no session's requests in two shards.
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (i, dir) in dirs.iter().enumerate() {
        for r in records_in(dir) {
            let id = r["session"].as_str().unwrap().to_string();
            assert_eq!(
                *owner.entry(id.clone()).or_insert(i),
                i,
                "session {id} split"
            );
        }
    }
    let merged = tmp.path().join("merged");
    let mut args = vec![
        "merge".to_string(),
        "--output".into(),
        merged.display().to_string(),
    ];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let out = runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let m = json(&merged.join("result.json"));
    assert_eq!(digest(&m), digest(&single));
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(m[key], single[key], "{key}");
    }
    eprintln!(
        "sessions: 4 shards merged = single run: {} requests, digest {}",
        m["completed"],
        digest(&m)
    );
}

/// Sessions of text prompts (so the fault server answers them), three turns each; the
/// first child of session 0 shows that a child is a session of its own.
const AFFINITY: &str = r#"
fn describe() { #{ name: "affinity" } }
fn phases() { [#{ name: "p", sessions: 5, arrival: #{ process: "closed", concurrency: 3 } }] }
fn session_step(s) {
    if s.id == "0" && s.step == 1 { return #{ fan_out: ["child"] }; }
    if s.step >= 3 { return (); }
    #{ request: #{ prompt: `turn ${s.step} of ${s.id}`, max_tokens: 3 }, after: 0.01 }
}
"#;

#[test]
fn every_request_of_a_session_carries_its_own_affinity_header() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(tmp.path(), "affinity.rhai", AFFINITY);
    let server = FaultServer::start(|_| Fault::None);
    let (_, records) = run_in(
        &tmp.path().join("out"),
        &[
            &script,
            "--target",
            &server.url,
            "--session-header",
            "x-route-key",
        ],
    );
    let seen = server.seen.lock().unwrap();
    let mut value_of: HashMap<String, String> = HashMap::new();
    for r in &records {
        let index = r["index"].as_u64().unwrap();
        let headers = seen
            .headers
            .get(&index)
            .unwrap_or_else(|| panic!("request {index} reached the server"));
        let value = headers
            .get("x-route-key")
            .expect("the affinity header")
            .clone();
        let session = r["session"].as_str().unwrap().to_string();
        let kept = value_of
            .entry(session.clone())
            .or_insert_with(|| value.clone());
        assert_eq!(
            *kept, value,
            "session {session}: one value for all its requests"
        );
    }
    assert_eq!(value_of.len(), 6, "five roots and one child: {value_of:?}");
    let distinct: HashSet<&String> = value_of.values().collect();
    assert_eq!(
        distinct.len(),
        value_of.len(),
        "no two sessions share a value: {value_of:?}"
    );
    // Without the flag, no such header.
    drop(seen);
    let plain = FaultServer::start(|_| Fault::None);
    let (_, records) = run_in(
        &tmp.path().join("plain"),
        &[&script, "--target", &plain.url],
    );
    let seen = plain.seen.lock().unwrap();
    for r in &records {
        let headers = &seen.headers[&r["index"].as_u64().unwrap()];
        assert!(!headers.contains_key("x-session-id") && !headers.contains_key("x-route-key"));
    }
}

#[test]
fn a_session_phase_refuses_max_requests_and_a_bad_step_in_one_line() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            AFFINITY.replace("sessions: 5,", "sessions: 5, max_requests: 3,"),
            "leave out `max_requests`",
        ),
        (
            AFFINITY.replace("after: 0.01", "after: -1.0"),
            "`after` must be a finite number of seconds >= 0",
        ),
        (
            AFFINITY.replace(r#"fan_out: ["child"]"#, r#"fan_out: ["a/b"]"#),
            "without `/`",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let script = write_scenario(tmp.path(), &format!("bad{i}.rhai"), text);
        let out = runner(&[&script, "-q"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(expected), "{expected}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{err}"
        );
    }
}

#[test]
fn the_readmes_agent_loop_is_complete_in_under_40_lines_and_runs() {
    let readme = std::fs::read_to_string(crate::support::repo().join("README.md")).expect("README");
    let section = readme
        .split("## Agentic sessions")
        .nth(1)
        .expect("an agentic section");
    let block = section
        .split("```rhai\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a rhai block");
    assert!(
        block.lines().count() < 40,
        "{} lines",
        block.lines().count()
    );
    // The same script, made quick: 3 sessions, tools answering in 50-600 ms.
    let quick = block
        .replace("sessions: 20", "sessions: 3")
        .replace("lo: 0.5, hi: 5.0", "lo: 0.05, hi: 0.6");
    assert_ne!(quick, block, "the README's numbers moved: update this test");
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(tmp.path(), "agent.rhai", &quick);
    let (result, records) = run_in(&tmp.path().join("out"), &[&script, "--api", "chat"]);
    assert_eq!(result["failed"], 0);
    assert_eq!(records.len(), 30, "3 sessions of 10 turns");
    let tool_turns = records.iter().filter(|r| r["tool_calls"] == 1).count();
    assert_eq!(tool_turns, 30, "every turn demanded a tool call");
}

/// Sessions, then a phase of plain requests: the scenario defines no `on_response`, so
/// the outcomes that reach it outside its sessions (the plain phase's, a session's that
/// ended after its phase) are dropped, not handed to a hook it does not have.
const SESSIONS_THEN_PLAIN: &str = r#"
fn describe() { #{ name: "sessions-then-plain" } }
fn phases() {
    [#{ name: "sessions", sessions: 3, arrival: #{ process: "closed", concurrency: 3 } },
     #{ name: "plain", max_requests: 5 }]
}
fn next_request(phase, index) { #{ prompt: "x", max_tokens: 4 } }
fn session_step(s) {
    if s.step >= 2 { return (); }
    #{ request: #{ prompt: `turn ${s.step}`, max_tokens: 4 }, after: 0.01 }
}
"#;

#[test]
fn a_phase_without_sessions_after_one_with_them_runs_without_on_response() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(tmp.path(), "mixed.rhai", SESSIONS_THEN_PLAIN);
    let (_, records) = run_in(&tmp.path().join("out"), &[&script]);
    let per_phase = |p: u64| records.iter().filter(|r| r["phase"] == p).count();
    assert_eq!((per_phase(0), per_phase(1)), (6, 5));
    assert!(records.iter().all(|r| r.get("error").is_none()));
}

/// `runner merge` checks each shard's session figures against its own requests.jsonl and
/// refuses a session two shards claim: a shard.json giving a session u64::MAX requests
/// (once shown as "Max requests per session: 18446744073709551615"), and a shard claiming
/// another's session with its records (once merged, doubling that session's requests),
/// are each one line naming the shard, the phase, and the counts or the session.
#[test]
fn merge_refuses_session_counts_its_records_do_not_hold_and_claimed_sessions() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&["--sim-profile", "zero"]);
    let mut base: Vec<String> = vec![
        scenario("agentic_coding.rhai"),
        "--target".into(),
        sim.url.clone(),
        "--api".into(),
        "chat".into(),
    ];
    base.extend(CODING.iter().map(|s| s.to_string()));
    let dirs = shard_dirs(tmp.path(), 2);
    for (i, dir) in dirs.iter().enumerate() {
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        let shard = format!("{i}/2");
        args.extend(["--shard", &shard]);
        run_in(dir, &args);
    }
    let mut args = vec!["merge".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let merge = || runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(merge().status.success(), "{}", stderr(&merge()));
    let shard_json = |i: usize| dirs[i].join("shard.json");
    let original = std::fs::read(shard_json(1)).expect("shard.json");
    let (one, zero) = (json(&shard_json(1)), json(&shard_json(0)));
    let p = (0..one["phases"].as_array().unwrap().len())
        .find(|&p| one["phases"][p]["state"]["sessions"]["requests"].as_u64() > Some(0))
        .expect("a phase of sessions");
    let phase = one["phases"][p]["info"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let write = |v: &serde_json::Value| {
        std::fs::write(shard_json(1), serde_json::to_string(v).unwrap()).unwrap()
    };

    let mut forged = one.clone();
    forged["phases"][p]["state"]["sessions"]["sessions"][0]["requests"] = u64::MAX.into();
    write(&forged);
    let out = merge();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let requests = forged["phases"][p]["state"]["sessions"]["requests"].clone();
    assert_eq!(
        err,
        format!(
            "error: {} (shard 1/2), phase {phase}: shard.json counts {requests} session requests (18446744073709551615 in its sessions, 0 past their cap), its requests.jsonl {requests}\n",
            dirs[1].display()
        ),
    );

    // Shard 1 claims shard 0's first session: its totals in shard.json and its records in
    // requests.jsonl, consistent with each other.
    std::fs::write(shard_json(1), &original).unwrap();
    let theirs = zero["phases"][p]["state"]["sessions"]["sessions"][0].clone();
    let stolen = theirs["session"].as_str().unwrap().to_string();
    let mut claimed = one.clone();
    let sessions = &mut claimed["phases"][p]["state"]["sessions"];
    sessions["sessions"]
        .as_array_mut()
        .unwrap()
        .push(theirs.clone());
    let requests = sessions["requests"].as_u64().unwrap() + theirs["requests"].as_u64().unwrap();
    sessions["requests"] = requests.into();
    write(&claimed);
    let records: String = std::fs::read_to_string(dirs[0].join("requests.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"] == stolen)
        .map(|l| format!("{l}\n"))
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dirs[1].join("requests.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut file, records.as_bytes()).unwrap();
    let out = merge();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: {} (shard 1/2), phase {phase}: session `{stolen}` is also in shard 0/2 ({}): a session runs whole on one shard\n",
            dirs[1].display(),
            dirs[0].display()
        )
    );
}
