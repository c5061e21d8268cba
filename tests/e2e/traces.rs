//! Production traces: `runner trace analyze` on each bundled sample, its figures checked
//! against what this file computes from the sample on its own (and against a hand-computed
//! tiny trace), its refusals, and the trace scenarios (azure_replay, bailian_sessions) run
//! briefly on the simulator.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{repo, run_records, runner, scenario, stderr, stdout};

fn sample(name: &str) -> PathBuf {
    repo().join("scenarios/data").join(name)
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the sample")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// `runner trace analyze FILE ARGS… --json`, and the same in text.
fn analyze(file: &Path, args: &[&str]) -> (Value, String) {
    let file = file.display().to_string();
    let mut all = vec!["trace", "analyze", file.as_str()];
    all.extend(args);
    let text = runner(&all);
    assert!(text.status.success(), "{}", stderr(&text));
    all.push("--json");
    let json = runner(&all);
    assert!(json.status.success(), "{}", stderr(&json));
    (
        serde_json::from_str(&stdout(&json)).expect("--json prints JSON"),
        stdout(&text),
    )
}

/// Prefix-cache hits of `requests` on an LRU cache of `capacity` blocks, kept here as a
/// plain list, most recent last (the runner keeps stamps in a map and a tree).
fn lru_hits(requests: &[Vec<u64>], capacity: Option<usize>) -> u64 {
    let mut cache: Vec<u64> = Vec::new();
    let mut hits = 0;
    for ids in requests {
        for id in ids {
            if !cache.contains(id) {
                break;
            }
            hits += 1;
        }
        for id in ids {
            cache.retain(|c| c != id);
            cache.push(*id);
            if capacity.is_some_and(|c| cache.len() > c) {
                cache.remove(0);
            }
        }
    }
    hits
}

fn hash_ids(lines: &[Value]) -> Vec<Vec<u64>> {
    let mut rows: Vec<(f64, Vec<u64>)> = lines
        .iter()
        .map(|l| {
            let ids = l["hash_ids"].as_array().expect("hash_ids");
            (
                l["timestamp"].as_f64().expect("timestamp"),
                ids.iter().map(|i| i.as_u64().unwrap()).collect(),
            )
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.into_iter().map(|(_, ids)| ids).collect()
}

/// Checks the hit rates the runner printed at `sizes` (0: unlimited) against `lru_hits`.
fn check_hit_rates(json: &Value, text: &str, requests: &[Vec<u64>], sizes: &[usize]) {
    let blocks: u64 = requests.iter().map(|r| r.len() as u64).sum();
    let rates = json["prefix"]["hit_rates"].as_array().expect("hit_rates");
    assert_eq!(rates.len(), sizes.len());
    for (rate, &size) in rates.iter().zip(sizes) {
        let hits = lru_hits(requests, (size > 0).then_some(size));
        assert_eq!(rate["hits"].as_u64(), Some(hits), "cache {size}: {rate}");
        assert_eq!(rate["blocks"].as_u64(), Some(blocks));
        let shown = format!(
            "{:.2} % ({hits} of {blocks} blocks)",
            hits as f64 / blocks as f64 * 100.0
        );
        assert!(text.contains(&shown), "no `{shown}` in\n{text}");
    }
}

/// Sessions of a Bailian trace as the analyzer documents them: a chat continues its
/// parent's session when its turn is above 1 and the parent has no continuation yet;
/// otherwise a chat under a known parent is a child chat. (count, children, turns per
/// session)
fn bailian_sessions(lines: &[Value]) -> (usize, usize, Vec<u64>) {
    let mut sorted: Vec<&Value> = lines.iter().collect();
    sorted.sort_by(|a, b| {
        let t = |v: &Value| v["timestamp"].as_f64().unwrap();
        t(a).total_cmp(&t(b))
    });
    let mut session_of: HashMap<i64, usize> = HashMap::new();
    let mut continued: HashSet<i64> = HashSet::new();
    let mut turns: Vec<u64> = Vec::new();
    let mut children = 0;
    for l in sorted {
        let id = l["chat_id"].as_i64().unwrap();
        let parent = l["parent_chat_id"].as_i64().unwrap();
        let turn = l["turn"].as_u64().unwrap();
        let s = match session_of.get(&parent) {
            Some(&s) if turn > 1 && continued.insert(parent) => s,
            known => {
                children += usize::from(known.is_some());
                turns.push(0);
                turns.len() - 1
            }
        };
        turns[s] += 1;
        session_of.insert(id, s);
    }
    (turns.len(), children, turns)
}

#[test]
fn analyze_bailian_sample_sessions_turns_and_hit_rates() {
    let file = sample("bailian_sample.jsonl");
    let lines = json_lines(&file);
    let (json, text) = analyze(&file, &["--cache-blocks", "0", "1000", "300"]);
    assert_eq!(json["format"], "bailian");
    assert_eq!(json["requests"].as_u64(), Some(lines.len() as u64));
    let (count, children, turns) = bailian_sessions(&lines);
    let s = &json["sessions"];
    assert_eq!(s["count"].as_u64(), Some(count as u64), "{s}");
    assert_eq!(s["child_chats"].as_u64(), Some(children as u64), "{s}");
    assert!(
        children > 0 && count > children,
        "the sample has child chats: {s}"
    );
    let max = *turns.iter().max().unwrap();
    let mean = turns.iter().sum::<u64>() as f64 / turns.len() as f64;
    assert_eq!(s["turns_max"].as_u64(), Some(max));
    assert!((s["turns_mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!(
        text.contains(&format!(
            "{count} ({} root, {children} child chats)",
            count - children
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("mean {mean:.2}, max {max}")),
        "{text}"
    );
    check_hit_rates(&json, &text, &hash_ids(&lines), &[0, 1000, 300]);
}

#[test]
fn analyze_mooncake_sample_hit_rates_without_sessions() {
    let file = sample("mooncake_sample.jsonl");
    let lines = json_lines(&file);
    let (json, text) = analyze(&file, &["--cache-blocks", "0", "100", "20"]);
    assert_eq!(json["format"], "mooncake");
    assert_eq!(json["requests"].as_u64(), Some(lines.len() as u64));
    assert_eq!(json["sessions"], Value::Null);
    assert!(text.contains("Mooncake JSONL has no session ids"), "{text}");
    assert_eq!(json["prefix"]["block_tokens"].as_u64(), Some(512));
    let requests = hash_ids(&lines);
    let distinct: HashSet<u64> = requests.iter().flatten().copied().collect();
    assert_eq!(
        json["prefix"]["distinct"].as_u64(),
        Some(distinct.len() as u64)
    );
    check_hit_rates(&json, &text, &requests, &[0, 100, 20]);
    // Timestamps are milliseconds: the span is the last line's over 1000.
    let last = lines.last().unwrap()["timestamp"].as_f64().unwrap();
    let first = lines[0]["timestamp"].as_f64().unwrap();
    assert!((json["span_s"].as_f64().unwrap() - (last - first) / 1000.0).abs() < 1e-9);
}

#[test]
fn analyze_azure_sample_has_no_hash_ids() {
    let file = sample("azure_conv_sample.csv");
    let rows = std::fs::read_to_string(&file).unwrap();
    let rows: Vec<Vec<&str>> = rows
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let (json, text) = analyze(&file, &[]);
    assert_eq!(json["format"], "azure");
    assert_eq!(json["requests"].as_u64(), Some(rows.len() as u64));
    let context: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert_eq!(json["input_tokens"]["total"].as_u64(), Some(context));
    assert_eq!(json["prefix"], Value::Null);
    assert!(text.contains("no hash ids: prefix reuse unknown"), "{text}");
    assert!(text.contains("Azure CSV has no session ids"), "{text}");
}

/// The fixture is the analyzer's unit-test example as a Bailian trace: chats 1 (root,
/// ids 1 2 3), 2 (turn 2 of 1: 1 2 4), 3 (a root: 1 2 3 5) and 4 (a child chat of 2:
/// 1 2 4 3). On 4 blocks of LRU the leading hits are 0, 2, 3 and 2 (4 was evicted by 5):
/// 7 of 14 blocks; unlimited, 4 hits all four: 9 of 14. Sessions: {1, 2}, {3}, {4}.
#[test]
fn analyze_tiny_trace_matches_the_hand_computed_hit_rate() {
    let file = repo().join("tests/fixtures/traces/tiny_bailian.jsonl");
    let (json, text) = analyze(&file, &["--cache-blocks", "4", "0"]);
    assert!(text.contains("50.00 % (7 of 14 blocks)"), "{text}");
    assert!(text.contains("64.29 % (9 of 14 blocks)"), "{text}");
    assert!(text.contains("3 (2 root, 1 child chats)"), "{text}");
    assert!(text.contains("mean 1.33, max 2"), "{text}");
    assert_eq!(json["prefix"]["hit_rates"][0]["rate"].as_f64(), Some(0.5));
    assert_eq!(json["prefix"]["distinct"].as_u64(), Some(5));
}

#[test]
fn bad_traces_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, expected: &str| {
        let path = dir.path().join(name);
        let out = runner(&["trace", "analyze", &path.display().to_string()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{}{expected}", path.display())),
            "{err}"
        );
    };
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 1}\n",
    )
    .unwrap();
    check(
        "bad.jsonl",
        ":2: field `input_length`: expected a non-negative integer",
    );
    std::fs::write(
        dir.path().join("bad.csv"),
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\nyesterday,1,2\n",
    )
    .unwrap();
    check("bad.csv", ":3: field `TIMESTAMP`: expected a time like");
    let long = format!(
        "{{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [{}1]}}\n",
        "1, ".repeat(2 << 20)
    );
    std::fs::write(dir.path().join("long.jsonl"), long).unwrap();
    check("long.jsonl", ":1: the line is ");
    // Sparse: over the limit on the file system's word, nothing written.
    let huge = std::fs::File::create(dir.path().join("huge.jsonl")).unwrap();
    huge.set_len((1 << 30) + 1).unwrap();
    check(
        "huge.jsonl",
        " is 1073741825 bytes (1024 MiB): a trace may be at most",
    );
}

#[test]
fn azure_replay_sends_each_row_with_its_lengths() {
    let (_, _, records) = run_records(&[
        &scenario("azure_replay.rhai"),
        "-p",
        "requests=10",
        "-p",
        "time_scale=0.05",
    ]);
    let rows = std::fs::read_to_string(sample("azure_conv_sample.csv")).unwrap();
    let rows: Vec<Vec<&str>> = rows
        .lines()
        .skip(1)
        .take(10)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(records.len(), 10);
    for (r, row) in records.iter().zip(&rows) {
        assert_eq!(
            r["input_tokens"].as_u64(),
            Some(row[1].parse().unwrap()),
            "{row:?}"
        );
        assert_eq!(
            r["output_tokens"].as_u64(),
            Some(row[2].parse().unwrap()),
            "{row:?}"
        );
    }
    // The sample's third row is 0.2862700 s after its first: 14.3135 ms at time_scale 0.05
    // (within a microsecond: the script holds times as seconds since 1970 in an f64).
    let at = records[2]["scheduled_ns"].as_f64().unwrap();
    assert!((at - 14_313_500.0).abs() < 1_000.0, "{at}");
}

#[test]
fn bailian_sessions_replays_turns_and_child_chats() {
    let lines = json_lines(&sample("bailian_sample.jsonl"));
    let sessions = 12;
    // The chats the first 12 root sessions reach, children included.
    let known: HashSet<i64> = lines
        .iter()
        .map(|l| l["chat_id"].as_i64().unwrap())
        .collect();
    let roots: Vec<i64> = lines
        .iter()
        .filter(|l| !known.contains(&l["parent_chat_id"].as_i64().unwrap()))
        .map(|l| l["chat_id"].as_i64().unwrap())
        .take(sessions)
        .collect();
    let mut reached: HashSet<i64> = roots.iter().copied().collect();
    for l in &lines {
        if reached.contains(&l["parent_chat_id"].as_i64().unwrap()) {
            reached.insert(l["chat_id"].as_i64().unwrap());
        }
    }
    let children = lines
        .iter()
        .filter(|l| reached.contains(&l["chat_id"].as_i64().unwrap()))
        .filter(|l| l["turn"] == 1 && l["parent_chat_id"] != -1)
        .count();
    assert!(
        children > 0,
        "the first {sessions} sessions open a child chat"
    );
    let (_, _, records) = run_records(&[
        &scenario("bailian_sessions.rhai"),
        "--api",
        "chat",
        "-p",
        &format!("sessions={sessions}"),
        "-p",
        "time_scale=0.01",
        "-p",
        "output_tokens=4",
    ]);
    assert_eq!(records.len(), reached.len());
    let child_sessions: HashSet<&str> = records
        .iter()
        .filter_map(|r| r["session"].as_str())
        .filter(|s| s.contains('/'))
        .collect();
    assert_eq!(child_sessions.len(), children, "{child_sessions:?}");
}

/// A Bailian line of chat `id` under `parent` at turn `turn`.
fn bailian_line(id: i64, parent: i64, turn: u64, at_s: f64) -> String {
    format!(
        "{{\"chat_id\": {id}, \"parent_chat_id\": {parent}, \"timestamp\": {at_s}, \"input_length\": 20, \"output_length\": 2, \"type\": \"text\", \"turn\": {turn}, \"hash_ids\": [{id}, {}]}}\n",
        id + 1_000_000
    )
}

/// `trace analyze` and the bailian_sessions replay refuse the same trace, at the same line
/// and with the same words: `analyzer` after `PATH:LINE: field `F`: `, `replay` after
/// `trace line LINE: field "F": `.
fn both_refuse(dir: &Path, name: &str, text: &str, line: usize, field: &str, what: &str) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let shown = path.display().to_string();
    let out = runner(&["trace", "analyze", &shown]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{shown}:{line}: field `{field}`: {what}")),
        "{err}"
    );
    let data = dir.display().to_string();
    let started = std::time::Instant::now();
    let out = runner(&[
        &scenario("bailian_sessions.rhai"),
        "--data-dir",
        &data,
        "-p",
        &format!("trace={shown}"),
        "-p",
        "time_scale=0.001",
        "-p",
        "output_tokens=1",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "the replay ran {name}: {err}");
    assert!(
        err.contains(&format!("trace line {line}: field \"{field}\": {what}")),
        "{err}"
    );
    // Refused while reading the trace, before any request: not after a minute of replay.
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

#[test]
fn the_analyzer_and_the_replay_refuse_the_same_chats_at_the_same_line() {
    let dir = tempfile::tempdir().unwrap();
    let own_parent = [bailian_line(1, -1, 1, 0.0), bailian_line(5, 5, 1, 0.5)].concat();
    both_refuse(
        dir.path(),
        "own_parent.jsonl",
        &own_parent,
        2,
        "parent_chat_id",
        "chat 5 is its own parent: give a root -1",
    );
    let twice = [
        bailian_line(1, -1, 1, 0.0),
        bailian_line(2, 1, 2, 0.5),
        bailian_line(1, -1, 1, 1.0),
    ]
    .concat();
    both_refuse(
        dir.path(),
        "twice.jsonl",
        &twice,
        3,
        "chat_id",
        "chat 1 is given twice (first on line 1): each chat id must be unique",
    );
    // 1,999 children of one chat (the hostile case): the 65th, on line 66, is one too many.
    let mut wide = bailian_line(1, -1, 1, 0.0);
    for i in 0..1999 {
        wide += &bailian_line(10 + i, 1, 1, 0.001 * i as f64);
    }
    both_refuse(
        dir.path(),
        "wide.jsonl",
        &wide,
        66,
        "parent_chat_id",
        "chat 1 (line 1) would open more than 64 child chats: a replay opens at most 64 at once",
    );
    // 64 children and a continuation are one fan-out and one next turn: both take them.
    let mut full = [bailian_line(1, -1, 1, 0.0), bailian_line(2, 1, 2, 0.5)].concat();
    for i in 0..64 {
        full += &bailian_line(10 + i, 1, 1, 0.001 * i as f64);
    }
    let path = dir.path().join("full.jsonl");
    std::fs::write(&path, full).unwrap();
    let (json, _) = analyze(&path, &[]);
    assert_eq!(json["sessions"]["child_chats"], 64, "{json}");
    let data = dir.path().display().to_string();
    let (_, _, records) = run_records(&[
        &scenario("bailian_sessions.rhai"),
        "--api",
        "chat",
        "--data-dir",
        &data,
        "-p",
        &format!("trace={}", path.display()),
        "-p",
        "time_scale=0.001",
        "-p",
        "output_tokens=1",
    ]);
    assert_eq!(records.len(), 66);
}

/// A Bailian trace of `chats` lines: root chats, each followed by its second turn, every
/// chat 32 blocks long (the sample's size).
fn big_bailian_trace(path: &Path, chats: usize) {
    let mut text = String::new();
    for i in 0..chats {
        let (parent, turn) = if i % 2 == 0 {
            (-1, 1)
        } else {
            (i as i64 - 1, 2)
        };
        let ids: Vec<String> = (0..32).map(|k| (i * 32 + k).to_string()).collect();
        text.push_str(&format!(
            "{{\"chat_id\": {i}, \"parent_chat_id\": {parent}, \"timestamp\": {}.5, \"input_length\": 512, \"output_length\": 8, \"type\": \"text\", \"turn\": {turn}, \"hash_ids\": [{}]}}\n",
            i,
            ids.join(", ")
        ));
    }
    std::fs::write(path, text).expect("the trace");
}

/// A 50,000-line trace loads within `phases`' 60 s (it did not when each insertion into
/// the script's map of chats walked the whole map: Rhai's size check), and its first two
/// sessions replay, two turns each.
#[test]
fn bailian_sessions_loads_a_50000_line_trace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("big.jsonl");
    big_bailian_trace(&trace, 50_000);
    let data_dir = dir.path().display().to_string();
    let (_, _, records) = run_records(&[
        &scenario("bailian_sessions.rhai"),
        "--data-dir",
        &data_dir,
        "-p",
        &format!("trace={}", trace.display()),
        "-p",
        "sessions=2",
        "-p",
        "time_scale=0",
        "-p",
        "output_tokens=2",
    ]);
    assert_eq!(records.len(), 4, "two sessions of two turns");
}
