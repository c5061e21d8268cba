//! What a session's `s` holds, and how far a session may run: README.md's table of `s`
//! per kind of step checked against what the engine hands the README's own fan-out
//! example; the runaway of a scenario that tests `s.joined != ()` (true on every step)
//! ended by the bound with a warning first; and, in virtual time, a session's long wait
//! taken as one jump of the clock, an absurd one refused in one line.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::shards::{json, write_scenario};
use crate::support::{records_in, repo, runner, spawn_runner, stderr, wait_exit, Pipes};

/// The "Agentic sessions" section of README.md.
fn sessions_section() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let section = readme
        .split("## Agentic sessions")
        .nth(1)
        .expect("an agentic section");
    section.split("\n## ").next().unwrap_or(section).to_string()
}

/// The README's fan-out example: the section's Rhai block that fans out and joins.
fn readme_fan_out() -> String {
    sessions_section()
        .split("```rhai\n")
        .skip(1)
        .filter_map(|b| b.split("\n```").next())
        .find(|b| b.contains("fan_out") && b.contains("\"join\""))
        .expect("a fan-out example in Rhai")
        .to_string()
}

/// The README's table of `s`: field -> (start, answer, join) cells.
fn readme_table() -> BTreeMap<String, [String; 3]> {
    let section = sessions_section();
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in section.lines() {
        if line.starts_with("| `s.` |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|---") {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect();
        assert_eq!(cells.len(), 4, "a row of the table of `s`: {line}");
        let field = cells[0].trim_matches('`').to_string();
        rows.insert(
            field,
            [cells[1].clone(), cells[2].clone(), cells[3].clone()],
        );
    }
    assert!(!rows.is_empty(), "README.md has a table of `s`");
    rows
}

/// The example, its `session_step` wrapped by a probe that logs what `s` holds.
fn probed(example: &str) -> String {
    let renamed = example.replace("fn session_step(s)", "fn readme_step(s)");
    assert_ne!(renamed, example, "the example defines session_step(s)");
    renamed
        + r#"
fn session_step(s) {
    let keys = s.keys();
    keys.sort();
    log(`probe kind=${s.kind} keys=${keys} step=${s.step} last=${type_of(s.last)} joined=${s.joined.len()}`);
    readme_step(s)
}
"#
}

/// What the probe saw of one kind of step.
#[derive(Default)]
struct Seen {
    keys: BTreeSet<String>,
    steps: BTreeSet<u64>,
    last: BTreeSet<String>,
    joined: BTreeSet<u64>,
}

/// The probe's lines, by kind.
fn seen_by_kind(err: &str) -> BTreeMap<String, Seen> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for line in err.lines().filter_map(|l| l.split("probe ").nth(1)) {
        let field = |name: &str| {
            let start = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
            let rest = &line[start..];
            let end = match name {
                "keys" => rest.find(']').map(|e| e + 1),
                _ => rest.find(' '),
            };
            rest[..end.unwrap_or(rest.len())].to_string()
        };
        let s = seen.entry(field("kind")).or_default();
        let keys = field("keys");
        s.keys.extend(
            keys.trim_matches(['[', ']'])
                .split(", ")
                .map(|k| k.trim_matches('"').to_string()),
        );
        s.steps.insert(field("step").parse().expect("a step"));
        s.last.insert(field("last"));
        s.joined.insert(field("joined").parse().expect("a count"));
    }
    seen
}

#[test]
fn the_readmes_table_of_s_is_what_its_fan_out_example_gets_at_each_step() {
    let table = readme_table();
    let example = readme_fan_out();
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(tmp.path(), "fan_out.rhai", &probed(&example));
    let out_dir = tmp.path().join("out");
    let out = runner(&[&script, "--output", &out_dir.display().to_string()]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let seen = seen_by_kind(&err);
    let kinds = ["start", "answer", "join"];
    assert_eq!(
        seen.keys().map(String::as_str).collect::<Vec<_>>(),
        ["answer", "join", "start"],
        "every kind of step came: {err}"
    );
    // The table's fields are the state's keys, at every kind of step.
    let fields: BTreeSet<String> = table.keys().cloned().collect();
    for (i, kind) in kinds.iter().enumerate() {
        let s = &seen[*kind];
        assert_eq!(s.keys, fields, "{kind}: the table's fields");
        assert_eq!(table["kind"][i], format!("`\"{kind}\"`"), "the kind row");
        // `()` in the table: `()` on every such step; anything else: never `()`.
        let unit = table["last"][i] == "`()`";
        let lasts: Vec<&String> = s.last.iter().collect();
        match unit {
            true => assert_eq!(lasts, ["()"], "{kind}: last"),
            false => assert!(!s.last.contains("()"), "{kind}: last {lasts:?}"),
        }
        let empty = table["joined"][i] == "`[]`";
        match empty {
            true => assert_eq!(s.joined, BTreeSet::from([0]), "{kind}: joined"),
            false => assert!(!s.joined.contains(&0), "{kind}: joined {:?}", s.joined),
        }
        let first = table["step"][i] == "`0`";
        match first {
            true => assert_eq!(s.steps, BTreeSet::from([0]), "{kind}: step"),
            false => assert!(!s.steps.contains(&0), "{kind}: step {:?}", s.steps),
        }
    }
    // And the example does what it says: two plans, three workers each, a synthesis.
    let records = records_in(&out_dir);
    assert_eq!(records.len(), 2 * (1 + 3 + 1), "{err}");
    assert!(records.iter().all(|r| r.get("error").is_none()));
    let workers = records
        .iter()
        .filter(|r| {
            r["session"]
                .as_str()
                .is_some_and(|s| s.contains("/worker-"))
        })
        .count();
    assert_eq!(workers, 6);
    assert_eq!(seen["join"].joined, BTreeSet::from([3]));
}

/// The README's example with the natural mistake of issue 58: a join told by
/// `s.joined != ()`, true on every step, so each plan's answer is "merged" for ever.
fn runaway() -> String {
    let example = readme_fan_out();
    let mistaken = example.replace(r#"s.kind == "join""#, "s.joined != ()");
    assert_ne!(
        mistaken, example,
        "the README's join test moved: update this test"
    );
    mistaken
}

#[test]
fn a_session_that_never_ends_is_warned_of_then_stopped_at_the_bound() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(tmp.path(), "runaway.rhai", &runaway());
    // The default bound, in virtual time (2,000 requests of simulated time).
    let out_dir = tmp.path().join("default");
    let mut child = spawn_runner(&[
        &script,
        "--virtual-time",
        "--output",
        &out_dir.display().to_string(),
    ]);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let (_, err) = pipes.join();
    assert_eq!(code, Some(1), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("warning: session"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {err}");
    assert!(
        warnings[0].contains("has taken 100 steps") && warnings[0].contains("1000"),
        "{err}"
    );
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "one line: {err}");
    assert!(
        errors[0].contains("reached 1000 steps") && errors[0].contains("--max-steps-per-session"),
        "{err}"
    );
    // What it measured is kept: every request of the runaway session is recorded.
    let records = records_in(&out_dir);
    let per_session = |id: &str| records.iter().filter(|r| r["session"] == id).count();
    assert!(
        (990..=1000).contains(&per_session("0")),
        "{}",
        per_session("0")
    );
    eprintln!("runaway: {}\n{}", warnings[0], errors[0]);

    // Overridden: 20 steps, in real time.
    let out = runner(&[&script, "-q", "--max-steps-per-session", "20"]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("reached 20 steps"), "{err}");
    assert!(err.contains("has taken 2 steps"), "{err}");
}

/// One session, two requests 100,000 s apart (about 28 hours).
const LONG_WAIT: &str = r#"
fn describe() { #{ name: "long-wait" } }
fn phases() { [#{ name: "p", sessions: 1, arrival: #{ process: "closed", concurrency: 1 } }] }
fn session_step(s) {
    if s.step >= 2 { return (); }
    #{ request: #{ prompt: "x", max_tokens: 2 }, after: if s.step == 1 { WAIT } else { 0.0 } }
}
"#;

#[test]
fn a_sessions_long_wait_in_virtual_time_is_a_jump_and_an_absurd_one_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = write_scenario(
        tmp.path(),
        "long.rhai",
        &LONG_WAIT.replace("WAIT", "100000.0"),
    );
    let out_dir = tmp.path().join("out");
    let started = Instant::now();
    let mut child = spawn_runner(&[
        &script,
        "--virtual-time",
        "-q",
        "--output",
        &out_dir.display().to_string(),
    ]);
    let pipes = Pipes::take(&mut child);
    // Polled every 2 ms of simulated time, the wait took 250 s of wall time and more.
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let wall = started.elapsed();
    let (_, err) = pipes.join();
    assert_eq!(code, Some(0), "{err}");
    assert!(wall < Duration::from_secs(15), "{wall:?} of wall time");
    let result = json(&out_dir.join("result.json"));
    let duration = result["duration"].as_f64().expect("a duration");
    assert!(duration >= 100_000.0, "{duration} s simulated");
    eprintln!("a 100,000 s wait in virtual time: {wall:?} of wall time");

    let script = write_scenario(
        tmp.path(),
        "absurd.rhai",
        &LONG_WAIT.replace("WAIT", "1e18"),
    );
    let mut child = spawn_runner(&[&script, "--virtual-time", "-q"]);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let (_, err) = pipes.join();
    assert_eq!(code, Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("`after` of 1e18 s is too long"), "{err}");
    eprintln!("a 1e18 s wait: {}", errors[0]);
}
