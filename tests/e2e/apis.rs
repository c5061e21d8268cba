//! The APIs a run can speak, on the simulator: reasoning kept apart from the answer (time
//! to first answer beside TTFT, the token split), OpenAI Responses and Anthropic Messages
//! giving chat's totals, embeddings with its own report block, and the endpoint every
//! request went to in requests.jsonl, the header, result.json and report.html.

use std::collections::HashMap;

use serde_json::Value;

use crate::support::*;

/// Reasoning tokens the simulator streams before the answer in these tests.
const REASONING: u64 = 3;
const OUTPUT: u64 = 8;
const REQUESTS: u64 = 12;

/// A small chat-sized throughput run on the `fixed` profile, reasoning on, for `api`.
fn reasoning_run(api: &str, extra: &[&str]) -> (String, Value, Vec<Value>) {
    let (requests, output, reasoning) = (
        format!("requests={REQUESTS}"),
        format!("output_tokens={OUTPUT}"),
        REASONING.to_string(),
    );
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        requests,
        "-p".into(),
        "input_tokens=32".into(),
        "-p".into(),
        output,
        "-p".into(),
        "max_concurrency=4".into(),
        "--api".into(),
        api.into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--sim-reasoning-tokens".into(),
        reasoning,
        "-q".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_records(&args)
}

/// The simulator's send log: each request id's chunk send times, ms from its arrival.
fn send_log(path: &str) -> HashMap<String, Vec<f64>> {
    std::fs::read_to_string(path)
        .expect("send log")
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            let id = v["request_id"].as_str()?.to_string();
            let chunks = v["chunk_ms"].as_array()?.iter().filter_map(Value::as_f64);
            Some((id, chunks.collect()))
        })
        .collect()
}

/// ms from a record's send to the time `key` (a phase offset in ns) or its chunk `i`.
fn since_send(rec: &Value, t_ns: u64) -> f64 {
    (t_ns - rec["sent_ns"].as_u64().expect("sent_ns")) as f64 / 1e6
}

#[test]
fn ttft_is_the_first_reasoning_chunk_and_ttfa_the_first_answer_chunk() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("sent.jsonl").display().to_string();
    let (_, r, records) = reasoning_run("chat", &["--sim-send-log", &log]);
    assert_eq!(num(&r, "completed"), REQUESTS as f64, "{r}");
    let sent = send_log(&log);
    // One token per chunk: chunk 0 is the first reasoning token, chunk REASONING the
    // first answer token.
    let (mut over_ttft, mut over_ttfa) = (vec![], vec![]);
    for rec in &records {
        let server = &sent[rec["request_id"].as_str().expect("request_id")];
        let ttft = since_send(rec, rec["chunks"][0]["t_ns"].as_u64().expect("t_ns"));
        let ttfa = since_send(rec, rec["first_answer_ns"].as_u64().expect("ttfa"));
        let (server_ttft, server_ttfa) = (server[0], server[REASONING as usize]);
        assert!(
            ttft >= server_ttft && ttfa >= server_ttfa,
            "{rec} vs {server:?}"
        );
        over_ttft.push(ttft - server_ttft);
        over_ttfa.push(ttfa - server_ttfa);
        assert_eq!(rec["reasoning_tokens"], REASONING, "{rec}");
        assert_eq!(rec["output_tokens"], OUTPUT, "{rec}");
        assert_eq!(rec["endpoint"], "/v1/chat/completions");
    }
    for (what, mut over) in [("TTFT", over_ttft), ("TTFA", over_ttfa)] {
        over.sort_by(f64::total_cmp);
        let median = over[over.len() / 2];
        eprintln!(
            "{what} over the server's send: median {median:.3} ms, max {:.3} ms",
            over[over.len() - 1]
        );
        assert!(
            median <= 1.0,
            "{what}: the median request reads {median} ms over the server's send"
        );
    }
    let metrics = &r["runner"];
    eprintln!("reasoning split: {metrics}");
    assert_eq!(
        num(metrics, "total_reasoning_tokens"),
        (REASONING * REQUESTS) as f64
    );
    assert_eq!(
        num(metrics, "total_answer_tokens"),
        ((OUTPUT - REASONING) * REQUESTS) as f64
    );
    let ttfa = &metrics["ttfa"];
    assert!(num(ttfa, "mean_ms") > num(&r, "mean_ttft_ms"), "{ttfa} {r}");
}

#[test]
fn responses_and_messages_give_chat_totals_and_ttft() {
    let _quiet = exclusive();
    let mut seen = vec![];
    for (api, path) in [
        ("chat", "/v1/chat/completions"),
        ("responses", "/v1/responses"),
        ("messages", "/v1/messages"),
    ] {
        let (_, r, records) = reasoning_run(api, &[]);
        assert_eq!(num(&r, "completed"), REQUESTS as f64, "{api}: {r}");
        assert_eq!(r["runner"]["api"], api);
        assert!(records.iter().all(|rec| rec["endpoint"] == path), "{api}");
        assert!(
            records
                .iter()
                .all(|rec| rec["reasoning_tokens"] == REASONING),
            "{api}"
        );
        let totals = (
            num(&r, "total_input_tokens"),
            num(&r, "total_output_tokens"),
            num(&r["runner"], "total_reasoning_tokens"),
        );
        eprintln!(
            "{api}: totals {totals:?}, mean TTFT {} ms",
            num(&r, "mean_ttft_ms")
        );
        seen.push((api, totals, num(&r, "mean_ttft_ms")));
    }
    let (_, chat_totals, chat_ttft) = seen[0];
    for (api, totals, ttft) in &seen[1..] {
        assert_eq!(*totals, chat_totals, "{api} against chat");
        assert!(
            (ttft - chat_ttft).abs() <= 3.0,
            "{api} TTFT {ttft} ms, chat {chat_ttft} ms"
        );
    }
}

#[test]
fn embeddings_report_latency_and_input_throughput() {
    let _quiet = exclusive();
    let (stdout, r, records) = run_records(&[
        &scenario("embeddings.rhai"),
        "-p",
        "requests=20",
        "-p",
        "batch_size=4",
        "-p",
        "input_tokens=64",
        "-p",
        "rate=200",
        "--api",
        "embeddings",
        "--sim-profile",
        "fixed",
    ]);
    assert_eq!(num(&r, "completed"), 20.0, "{r}");
    assert_eq!(num(&r, "total_input_tokens"), (20 * 4 * 64) as f64, "{r}");
    assert_eq!(r["runner"]["api"], "embeddings");
    assert!(records
        .iter()
        .all(|rec| rec["endpoint"] == "/v1/embeddings"));
    // vLLM's pooling block, row for row (the golden test in host/src/outputs/report/embeddings.rs
    // pins it to vLLM's serve.py); the runner's lines come after it.
    let blocks = crate::report::vllm_blocks(&stdout);
    let labels: Vec<&str> = blocks[0]
        .iter()
        .map(|l| l.split_once(':').map_or(*l, |(label, _)| label))
        .collect();
    assert_eq!(
        labels,
        [
            "============ Serving Benchmark Result ============",
            "Successful requests",
            "Failed requests",
            "Maximum request concurrency",
            "Request rate configured (RPS)",
            "Benchmark duration (s)",
            "Total input tokens",
            "Request throughput (req/s)",
            "Total token throughput (tok/s)",
            "----------------End-to-end Latency----------------",
            "Mean E2EL (ms)",
            "Median E2EL (ms)",
            "P99 E2EL (ms)",
        ],
        "{stdout}"
    );
    assert!(stdout.contains(" Runner extras "), "{stdout}");
}

#[test]
fn a_messages_scenario_without_api_reports_the_chat_endpoint() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let (printed, r) = run_ok(&[
        &scenario("multi_turn.rhai"),
        "-p",
        "conversations=2",
        "-p",
        "turns=2",
        "-p",
        "input_tokens=16",
        "-p",
        "output_tokens=4",
        "-p",
        "think_time=0",
        "--sim-profile",
        "zero",
        "--output",
        &out,
    ]);
    assert_eq!(r["runner"]["api"], "chat", "{r}");
    let records = records_in(dir.path());
    assert_eq!(records.len(), 4);
    assert!(records
        .iter()
        .all(|rec| rec["endpoint"] == "/v1/chat/completions"));
    let report = std::fs::read_to_string(dir.path().join("report.txt")).expect("report.txt");
    let api_line = report
        .lines()
        .find(|l| l.starts_with("API:"))
        .expect("API line");
    assert!(api_line.ends_with(" chat"), "{api_line}");
    // The terminal prints the header report.txt has, not the `--api` asked for (it once
    // printed `completions`, the default, before the run).
    assert_eq!(printed, report, "the terminal shows report.txt");
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("report.html");
    assert!(
        html.contains("<tr><th>API</th><td>chat</td></tr>"),
        "the HTML names chat"
    );
}
