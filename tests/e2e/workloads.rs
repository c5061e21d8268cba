//! The bundled workloads that shape more than arrivals and lengths (multi_turn,
//! shared_prefix, trace_replay, bursty), each run briefly against the built-in simulator,
//! and, where what matters is what the server received, against a small recording server
//! of this file.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::support::{exclusive, num, run_ok, run_records, runner, scenario, stderr};

fn tag(r: &Value) -> &str {
    r["tag"].as_str().unwrap_or("")
}

fn ns(r: &Value, key: &str) -> f64 {
    r[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no `{key}` in {r}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// An OpenAI-compatible server that records every completion request body and answers
/// each with one streamed chunk ` answer-N` (N counting from 0), so a test can find what
/// the runner sent and which answer it carried on with.
struct Recorder {
    url: String,
    /// (request body, the answer given to it), in arrival order.
    seen: Arc<Mutex<Vec<(Value, String)>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        // The accept thread ends with the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let seen = seen2.clone();
                std::thread::spawn(move || serve(stream, seen));
            }
        });
        Recorder { url, seen }
    }

    /// The recorded bodies other than the runner's pre-run "Hello" request.
    fn bodies(&self) -> Vec<(Value, String)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _)| {
                b.get("prompt").and_then(|p| p.as_str()) != Some("Hello")
                    && b["messages"][0]["content"].as_str() != Some("Hello")
            })
            .cloned()
            .collect()
    }
}

fn serve(stream: TcpStream, seen: Arc<Mutex<Vec<(Value, String)>>>) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut start = String::new();
        if reader.read_line(&mut start).unwrap_or(0) == 0 {
            return;
        }
        let path = start.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (kind, payload) = if path.ends_with("/completions") {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let chat = body.get("messages").is_some();
            let answer = {
                let mut s = seen.lock().unwrap();
                let answer = format!(" answer-{}", s.len());
                s.push((body, answer.clone()));
                answer
            };
            let chunk = if chat {
                serde_json::json!({"choices": [{"index": 0, "delta": {"content": answer}}]})
            } else {
                serde_json::json!({"choices": [{"index": 0, "text": answer}]})
            };
            let usage = r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
            (
                "text/event-stream",
                format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n"),
            )
        } else if path.ends_with("/models") {
            (
                "application/json",
                r#"{"object":"list","data":[{"id":"rec","object":"model"}]}"#.to_string(),
            )
        } else {
            ("application/json", "{}".to_string())
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            payload.len()
        );
        if writer.write_all(head.as_bytes()).is_err()
            || writer.write_all(payload.as_bytes()).is_err()
        {
            return;
        }
    }
}

#[test]
fn info_documents_the_parameters_of_each_workload() {
    for (file, params) in [
        (
            "multi_turn.rhai",
            &["conversations", "turns", "think_time"][..],
        ),
        (
            "shared_prefix.rhai",
            &["groups", "requests_per_group", "prefix_ratio"][..],
        ),
        (
            "trace_replay.rhai",
            &["trace", "time_scale", "block_tokens"][..],
        ),
        (
            "bursty.rhai",
            &["burst_rate", "quiet_rate", "burst_mean_s", "quiet_mean_s"][..],
        ),
        (
            "slo_search.rhai",
            &[
                "ttft_slo_ms",
                "tpot_slo_ms",
                "start_rate",
                "tolerance",
                "max_phases",
            ][..],
        ),
    ] {
        let out = runner(&["info", &scenario(file)]);
        assert!(out.status.success(), "info {file}: {}", stderr(&out));
        let text = crate::support::stdout(&out);
        for p in params.iter().chain(&["seed"]) {
            assert!(text.contains(p), "`runner info {file}` lacks {p}:\n{text}");
        }
    }
}

#[test]
fn multi_turn_prompts_grow_by_turn_with_think_time() {
    let (stdout, result, records) = run_records(&[
        &scenario("multi_turn.rhai"),
        "--api",
        "chat",
        "-p",
        "conversations=3",
        "-p",
        "turns=3",
        "-p",
        "input_tokens=20",
        "-p",
        "output_tokens=8",
        "-p",
        "think_time=0.2",
    ]);
    assert_eq!(num(&result, "completed"), 9.0, "{result}");
    assert_eq!(records.len(), 9);
    let mut by_turn: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        by_turn.entry(tag(r).to_string()).or_default().push(r);
    }
    assert_eq!(
        by_turn.keys().cloned().collect::<Vec<_>>(),
        ["turn-1", "turn-2", "turn-3"]
    );
    // The per-tag table: one row per turn, the mean prompt growing by turn.
    let tags = result["runner"]["tags"].as_array().expect("runner.tags");
    let names: Vec<&str> = tags.iter().map(|t| t["tag"].as_str().unwrap()).collect();
    assert_eq!(names, ["turn-1", "turn-2", "turn-3"], "{result}");
    let prompts: Vec<f64> = tags.iter().map(|t| num(t, "mean_input_tokens")).collect();
    assert!(
        prompts.windows(2).all(|w| w[1] >= w[0] + 20.0),
        "{prompts:?}"
    );
    for t in tags {
        assert_eq!((num(t, "completed"), num(t, "failed")), (3.0, 0.0), "{t}");
        assert!(num(&t["ttft"], "p99_ms") > 0.0, "{t}");
    }
    let table = stdout
        .split("Per-tag Metrics")
        .nth(1)
        .expect("per-tag table in the report");
    let rows: Vec<&str> = table.lines().skip(1).take(4).collect();
    assert!(
        rows[0].starts_with("tag ") && rows[0].contains("mean_input_tokens"),
        "{table}"
    );
    for (row, turn) in rows[1..].iter().zip(["turn-1", "turn-2", "turn-3"]) {
        assert!(row.starts_with(turn), "{table}");
    }
    let mut last = 0.0;
    for (t, rs) in &by_turn {
        assert_eq!(rs.len(), 3, "{t}");
        let mean = rs.iter().map(|r| ns(r, "input_tokens")).sum::<f64>() / 3.0;
        // Each turn adds a 20-token question and the 8-token answer before it.
        assert!(mean >= last + 20.0, "{t}: mean prompt {mean} after {last}");
        last = mean;
        // Turn k waits k-1 answers (over 50 ms each) and k-1 think times of 200 ms.
        let k: f64 = t["turn-".len()..].parse().unwrap();
        for r in rs {
            let at = ns(r, "scheduled_ns") / 1e9;
            assert!(at >= 0.25 * (k - 1.0) - 1e-6, "{t} scheduled at {at} s");
            assert!(at < 0.5 * (k - 1.0) + 0.05, "{t} scheduled at {at} s");
        }
    }
}

#[test]
fn multi_turn_bodies_carry_the_whole_conversation() {
    let server = Recorder::start();
    let (_, result) = run_ok(&[
        &scenario("multi_turn.rhai"),
        "--target",
        &server.url,
        "--model",
        "rec",
        "--api",
        "chat",
        "-p",
        "conversations=2",
        "-p",
        "turns=4",
        "-p",
        "input_tokens=10",
        "-p",
        "output_tokens=2",
        "-p",
        "think_time=0",
    ]);
    assert_eq!(num(&result, "completed"), 8.0, "{result}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 8);
    let mut lengths = Vec::new();
    for (body, _) in &bodies {
        let messages = body["messages"].as_array().expect("chat messages");
        let n = messages.len();
        lengths.push(n);
        assert!(n % 2 == 1, "{body}");
        for (i, m) in messages.iter().enumerate() {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            assert_eq!(m["role"], role, "{body}");
        }
        if n == 1 {
            continue;
        }
        // The turn before: a request whose messages are all but the last two of these,
        // and whose answer is the assistant message here.
        let before = &messages[..n - 2];
        let answer = messages[n - 2]["content"].as_str().unwrap();
        assert!(
            bodies
                .iter()
                .any(|(b, a)| b["messages"].as_array().unwrap()[..] == *before && a == answer),
            "no earlier turn answered {answer:?} with {before:?}"
        );
    }
    lengths.sort();
    assert_eq!(lengths, [1, 1, 3, 3, 5, 5, 7, 7]);
}

#[test]
fn shared_prefix_groups_share_their_prefix_only() {
    let (_, result, records) = run_records(&[
        &scenario("shared_prefix.rhai"),
        "-p",
        "groups=3",
        "-p",
        "requests_per_group=4",
        "-p",
        "input_tokens=200",
        "-p",
        "prefix_ratio=0.5",
        "-p",
        "output_tokens=4",
        "-p",
        "rate=50",
    ]);
    assert_eq!(num(&result, "completed"), 12.0, "{result}");
    let mut groups: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &records {
        *groups.entry(tag(r)).or_default() += 1;
        let n = ns(r, "input_tokens");
        assert!((198.0..=203.0).contains(&n), "input_tokens {n}");
    }
    assert_eq!(
        groups,
        BTreeMap::from([("group-0", 4), ("group-1", 4), ("group-2", 4)])
    );

    // What the server got: pairs of prompts of one group share about half their text;
    // prompts of different groups share next to nothing.
    for (ratio, shared_pairs) in [("0.5", 3 * 6), ("0.0", 0)] {
        let server = Recorder::start();
        let ratio_arg = format!("prefix_ratio={ratio}");
        run_ok(&[
            &scenario("shared_prefix.rhai"),
            "--target",
            &server.url,
            "--model",
            "rec",
            "-p",
            "groups=3",
            "-p",
            "requests_per_group=4",
            "-p",
            "input_tokens=200",
            "-p",
            &ratio_arg,
            "-p",
            "rate=200",
        ]);
        let prompts: Vec<String> = server
            .bodies()
            .iter()
            .map(|(b, _)| b["prompt"].as_str().expect("text prompt").to_string())
            .collect();
        assert_eq!(prompts.len(), 12);
        let mut pairs = 0;
        for i in 0..prompts.len() {
            for j in i + 1..prompts.len() {
                let (a, b) = (prompts[i].as_bytes(), prompts[j].as_bytes());
                let common = a.iter().zip(b).take_while(|(x, y)| x == y).count() as f64;
                let share = common / a.len().min(b.len()) as f64;
                if share > 0.35 {
                    assert!(share < 0.65, "ratio {ratio}: a pair shares {share}");
                    pairs += 1;
                } else {
                    assert!(share < 0.1, "ratio {ratio}: a pair shares {share}");
                }
            }
        }
        assert_eq!(pairs, shared_pairs, "ratio {ratio}");
    }
}

#[test]
fn trace_replay_sends_at_the_scaled_trace_times() {
    let _one = exclusive();
    let scale = 0.05;
    let (_, result, records) = run_records(&[
        &scenario("trace_replay.rhai"),
        "-p",
        "requests=40",
        "-p",
        &format!("time_scale={scale}"),
        "-p",
        "output_tokens=4",
    ]);
    assert_eq!(num(&result, "completed"), 40.0, "{result}");
    let trace = std::fs::read_to_string(
        crate::support::repo().join("scenarios/data/mooncake_sample.jsonl"),
    )
    .expect("sample trace");
    let lines: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 200);
    let t0 = lines[0]["timestamp"].as_f64().unwrap();
    let mut late = Vec::new();
    for r in &records {
        let line = &lines[r["index"].as_u64().unwrap() as usize];
        let want_ms = (line["timestamp"].as_f64().unwrap() - t0) * scale;
        let got_ms = ns(r, "scheduled_ns") / 1e6;
        assert!(
            (got_ms - want_ms).abs() < 1.0,
            "scheduled {got_ms} ms, trace {want_ms} ms"
        );
        late.push((ns(r, "sent_ns") - ns(r, "scheduled_ns")) / 1e6);
        assert_eq!(r["input_tokens"], line["input_length"], "{r}");
        let blocks = line["hash_ids"].as_array().unwrap().len();
        assert_eq!(tag(r), format!("blocks-{blocks}"));
    }
    // Loose: a debug build on a shared machine; the report's p99 lateness is the figure.
    let worst = late.iter().cloned().fold(0.0, f64::max);
    assert!(
        median(late) < 10.0 && worst < 100.0,
        "send lateness up to {worst} ms"
    );
}

/// Every prompt of the bundled trace has exactly the trace's input_length as the run's
/// tokenizer counts it (requests.jsonl's `input_tokens`; the simulator counts the prompt it
/// received with the same tokenizer), with either built-in tokenizer. Blocks decoded side
/// by side used to count 1 to 3 tokens more on 74 of the 200 (o200k_base).
#[test]
fn trace_replay_prompts_have_exactly_the_traces_input_length() {
    let _one = exclusive();
    let trace = std::fs::read_to_string(
        crate::support::repo().join("scenarios/data/mooncake_sample.jsonl"),
    )
    .expect("sample trace");
    let lines: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for tokenizer in ["o200k_base", "cl100k_base"] {
        let (_, result, records) = run_records(&[
            &scenario("trace_replay.rhai"),
            "--tokenizer",
            tokenizer,
            "-p",
            "time_scale=0",
            "-p",
            "output_tokens=1",
            "--sim-profile",
            "zero",
            "-q",
        ]);
        assert_eq!(records.len(), lines.len(), "{result}");
        let wrong: Vec<String> = records
            .iter()
            .filter_map(|r| {
                let line = &lines[r["index"].as_u64().unwrap() as usize];
                (r["input_tokens"] != line["input_length"]).then(|| {
                    format!(
                        "#{}: {} for {}",
                        r["index"], r["input_tokens"], line["input_length"]
                    )
                })
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{tokenizer}: {} of {} prompts off the trace: {wrong:?}",
            wrong.len(),
            records.len()
        );
    }
}

#[test]
fn bursty_alternates_dense_bursts_and_quiet_spells_reproducibly() {
    let _one = exclusive();
    let args = [
        &scenario("bursty.rhai")[..],
        "-p",
        "requests=200",
        "-p",
        "burst_rate=300",
        "-p",
        "quiet_rate=10",
        "-p",
        "burst_mean_s=0.2",
        "-p",
        "quiet_mean_s=0.5",
        "-p",
        "input_tokens=16",
        "-p",
        "output_tokens=2",
    ];
    let (first, result, records) = run_records(&args);
    assert_eq!(num(&result, "completed"), 200.0, "{result}");
    let mut gaps: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for w in records.windows(2) {
        let gap = (ns(&w[1], "scheduled_ns") - ns(&w[0], "scheduled_ns")) / 1e6;
        gaps.entry(tag(&w[1])).or_default().push(gap);
    }
    let burst = gaps.get("burst").expect("burst requests").clone();
    let quiet = gaps.get("quiet").expect("quiet requests").clone();
    assert!(
        burst.len() > 100 && quiet.len() > 5,
        "{} {}",
        burst.len(),
        quiet.len()
    );
    let all: Vec<f64> = burst.iter().chain(&quiet).cloned().collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let sd = (all.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / all.len() as f64).sqrt();
    let (mb, mq) = (median(burst), median(quiet));
    // Burst gaps are exponential of mean 3.3 ms (median 2.3); quiet ones of 100 ms.
    assert!(
        mb < 5.0 && mq > 10.0 * mb,
        "median gaps: burst {mb} ms, quiet {mq} ms"
    );
    assert!(
        sd / mean > 1.5,
        "coefficient of variation {} (Poisson: 1)",
        sd / mean
    );

    // The same seed gives the same request stream.
    let digest = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("Request stream digest"))
            .map(str::to_string)
            .expect("digest line")
    };
    let (again, _) = run_ok(&args);
    assert_eq!(digest(&first), digest(&again));
}

/// The `default` simulator profile cut down so its capacity is exact: 2 sequences at once,
/// every engine step 10 ms whatever it holds (no per-sequence or per-prefill-token cost),
/// and requests of 10 output tokens. A request holds its slot for 10 steps (the step that
/// prefills its 20-token prompt also samples its first token, then 9 decode steps), so
/// each slot serves one request per 100 ms and the server finishes at most
/// 2 / (10 × 10 ms) = 20 req/s. Offered constant arrivals under 20 req/s never wait for a
/// slot beyond a step; above it the waiting queue grows by (rate − 20) requests a second,
/// so TTFT grows over the phase: the queue starts to grow at 20 req/s.
const KNEE_RATE: f64 = 20.0;
const KNEE_PROFILE: [&str; 8] = [
    "--sim-max-seqs",
    "2",
    "--sim-decode-step-ms",
    "10",
    "--sim-decode-us-per-seq",
    "0",
    "--sim-prefill-us-per-token",
    "0",
];

#[test]
fn slo_search_finds_the_rate_where_the_queue_starts_to_grow() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let mut args = vec![
        "run",
        &*scenario("slo_search.rhai"),
        "-p",
        "ttft_slo_ms=100",
        "-p",
        "tpot_slo_ms=50",
        "-p",
        "start_rate=5",
        "-p",
        "phase_duration=2",
        "-p",
        "input_tokens=20",
        "-p",
        "output_tokens=10",
        "--output",
        &out,
    ]
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    args.extend(KNEE_PROFILE.map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = runner(&args);
    let (text, log) = (crate::support::stdout(&output), stderr(&output));
    assert!(output.status.success(), "{log}\n{text}");
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.json")).unwrap())
            .unwrap();

    let phases = result["phases"].as_array().expect("one result per phase");
    assert!((2..=8).contains(&phases.len()), "{} phases", phases.len());
    let found = &result["scenario_result"];
    let rate = num(found, "max_rate_under_slo");
    let (low, high) = (num(found, "bracket_low"), num(found, "bracket_high"));
    assert!(
        (rate - KNEE_RATE).abs() <= 0.1 * KNEE_RATE,
        "found {rate} req/s, the knee is at {KNEE_RATE}: {found}"
    );
    assert!(low == rate && low < high && high <= 2.0 * low, "{found}");
    assert_eq!(num(found, "phases") as usize, phases.len(), "{found}");
    // The search ran phases on both sides of the knee: the bracket's upper end saturated
    // the server (fewer completions a second than offered: its queue grew).
    let at_high = phases
        .iter()
        .find(|p| num(p, "request_rate") == high)
        .expect("a phase at the bracket's upper end");
    assert!(
        num(at_high, "request_throughput") < 0.98 * high,
        "{at_high}"
    );
    // The answer is logged, and shown in the report.
    assert!(
        log.contains("highest rate meeting p99 TTFT <= 100"),
        "{log}"
    );
    let block = text.split("Scenario Result").nth(1).expect("result block");
    assert!(
        block.contains("max_rate_under_slo:") && block.contains("bracket_high:"),
        "{text}"
    );
    let md = std::fs::read_to_string(dir.path().join("phases.md")).unwrap();
    assert_eq!(md.lines().count(), 2 + phases.len(), "{md}");
}

/// A script whose phases all come from `next_phase`: `phases()` returns none, and each
/// history entry is checked in the script itself (a missing field or a wrong count throws,
/// which fails the run).
const ADAPTIVE_PROBE: &str = r#"
fn describe() { #{ name: "adaptive_probe", description: "next_phase probe", params: [] } }
fn phases() { [] }
fn next_request(phase, index) {
    #{ prompt: "hello there", max_tokens: 4, ignore_eos: true, tag: `kind-${index % 2}` }
}
fn next_phase(history) {
    let n = history.len();
    if n > 0 {
        let last = history[n - 1];
        for k in ["index", "name", "warmup", "rate", "concurrency", "duration", "completed",
                  "failed", "request_throughput", "output_throughput", "goodput", "ttft",
                  "tpot", "itl", "e2el"] {
            if !(k in last) { throw `history lacks ${k}`; }
        }
        if last.index != n - 1 || last.name != `step ${n}` { throw `wrong phase ${last.index}`; }
        if last.completed != 2 * n || last.failed != 0 { throw `completed ${last.completed}`; }
        if last.concurrency != 1 || last.rate != () { throw "wrong configuration"; }
        let t = last.ttft;
        if !(0.0 < t.p50 && t.p50 <= t.p90 && t.p90 <= t.p99 && t.mean > 0.0) { throw `ttft ${t}`; }
        if last.tpot.p99 <= 0.0 || last.e2el.p50 <= t.p50 { throw "tpot or e2el"; }
        note("last_p99_ttft_ms", last.ttft.p99);
    }
    if n == 3 { return "done"; }
    #{ name: `step ${n + 1}`, arrival: #{ process: "closed", concurrency: 1 }, max_requests: 2 * (n + 1) }
}
"#;

#[test]
fn next_phase_decides_each_phase_from_the_finished_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("adaptive_probe.rhai");
    std::fs::write(&script, ADAPTIVE_PROBE).unwrap();
    let out = dir.path().join("out").display().to_string();
    let (text, result) = run_ok(&[&script.display().to_string(), "--output", &out]);
    let phases = result["phases"].as_array().expect("three phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["step 1", "step 2", "step 3"], "{result}");
    let completed: Vec<f64> = phases.iter().map(|p| num(p, "completed")).collect();
    assert_eq!(completed, [2.0, 4.0, 6.0]);
    assert!(
        num(&result["scenario_result"], "last_p99_ttft_ms") > 0.0,
        "{result}"
    );
    assert!(text.contains("Phase 3/3: step 3"), "{text}");
    // Each phase has its per-tag table, in result.json and in report.md.
    let tags = &phases[2]["runner"]["tags"];
    assert_eq!(tags[0]["tag"], "kind-0", "{tags}");
    assert_eq!(
        (num(&tags[0], "completed"), num(&tags[1], "completed")),
        (3.0, 3.0)
    );
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    let noted = md
        .split("## Scenario result")
        .nth(1)
        .expect("a scenario result section in report.md");
    assert!(noted.contains("| last_p99_ttft_ms | "), "{md}");
    let section = md
        .split("## Per-tag metrics: step 3")
        .nth(1)
        .expect("per-tag section");
    assert!(
        section.contains("| kind-0 | 3 | 0 |") && section.contains("| kind-1 | 3 | 0 |"),
        "{md}"
    );
    // report.html shows the same two sections.
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    let noted = html
        .split("<h2>Scenario result</h2>")
        .nth(1)
        .expect("a scenario result section in report.html");
    assert!(
        noted.contains("<tr><th>last_p99_ttft_ms</th><td>"),
        "{html}"
    );
    let section = html
        .split("<h2>Per-tag metrics: step 3</h2>")
        .nth(1)
        .expect("per-tag section in report.html");
    assert!(
        section.contains("<tr><td>kind-0</td><td>3</td><td>0</td>")
            && section.contains("<tr><td>kind-1</td><td>3</td><td>0</td>"),
        "{html}"
    );

    // A phase `next_phase` returns is checked like one `phases` returns, naming the function.
    let bad = ADAPTIVE_PROBE.replace(r#"process: "closed""#, r#"process: "sometimes""#);
    std::fs::write(&script, bad).unwrap();
    let out = runner(&[&script.display().to_string()]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("next_phase") && err.contains("unknown arrival process `sometimes`"),
        "{err}"
    );
}
