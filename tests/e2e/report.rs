//! The text report keeps the exact layout of `vllm bench serve`.

use crate::support::*;

/// The rows vLLM prints, in its order (Request goodput only with --goodput).
const VLLM_ROWS: [&str; 13] = [
    "Successful requests:",
    "Failed requests:",
    "Maximum request concurrency:",
    "Request rate configured (RPS):",
    "Benchmark duration (s):",
    "Total input tokens:",
    "Total generated tokens:",
    "Request throughput (req/s):",
    "Output token throughput (tok/s):",
    "Peak output token throughput (tok/s):",
    "Peak concurrent requests:",
    "Total token throughput (tok/s):",
    "---------------Time to First Token----------------",
];

const SECTIONS: [&str; 4] = [
    "---------------Time to First Token----------------",
    "-----Time per Output Token (excl. 1st token)------",
    "---------------Inter-token Latency----------------",
    "----------------End-to-end Latency----------------",
];

#[test]
fn throughput_run_prints_the_vllm_block() {
    let _quiet = exclusive();
    let out = runner(&[&scenario("throughput.rhai"), "-p", "requests=200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let start = text
        .find("============ Serving Benchmark Result ============")
        .expect("block title");
    let block: Vec<&str> = text[start..]
        .lines()
        .take_while(|l| *l != "=".repeat(50))
        .collect();
    // Every row in vLLM's order, label padded to 40 columns, value in a 10-column field.
    let mut at = 0;
    for row in VLLM_ROWS {
        let pos = block[at..]
            .iter()
            .position(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("missing `{row}` after line {at}:\n{}", block.join("\n")));
        at += pos + 1;
    }
    for line in &block[1..] {
        if !line.starts_with('-') {
            assert!(
                line.len() >= 51 && line.as_bytes()[40] == b' ',
                "not a {{:<40}} {{:<10}} row: {line:?}"
            );
        } else {
            assert_eq!(line.len(), 50, "ruler width: {line:?}");
        }
    }
    let mut at = 0;
    for s in SECTIONS {
        let pos = block[at..]
            .iter()
            .position(|l| *l == s)
            .unwrap_or_else(|| panic!("missing section {s}"));
        at += pos + 1;
        for prefix in ["Mean ", "Median ", "P99 "] {
            assert!(
                block[at..].iter().take(3).any(|l| l.starts_with(prefix)),
                "{s} lacks {prefix}"
            );
        }
    }
    let row = |label: &str| -> String {
        block
            .iter()
            .find(|l| l.starts_with(label))
            .map(|l| l[41..].trim().to_string())
            .unwrap_or_default()
    };
    assert_eq!(row("Successful requests:"), "200");
    assert_eq!(row("Failed requests:"), "0");
    assert_eq!(row("Maximum request concurrency:"), "512");
    assert_eq!(row("Total input tokens:"), "204800");
    assert_eq!(row("Total generated tokens:"), "25600");
    // The header names scenario, parameters, seed, target, model and the request digest.
    for needle in [
        "throughput",
        "requests=200",
        "Seed:",
        "42",
        "built-in simulator",
        "sim/llm-9b",
        "Request stream digest (sha256):",
    ] {
        assert!(text.contains(needle), "report lacks {needle}");
    }
}

#[test]
fn percentiles_and_goodput_options_add_rows() {
    let out = runner(&[
        &fixture("fixed.rhai"),
        "--sim-profile",
        "fixed",
        "-p",
        "requests=16",
        "-p",
        "output_tokens=8",
        "--percentiles",
        "50,95,99.9",
        "--goodput",
        "ttft:1000",
        "tpot:1000",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "P50 TTFT (ms):",
        "P95 TPOT (ms):",
        "P99.9 ITL (ms):",
        "P95 E2EL (ms):",
        "Request goodput (req/s):",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
    assert!(!text.contains("N/A"));
}

/// Reads the block the way vLLM-output parsers do: the label runs up to the colon, the
/// value is the next whitespace-separated field.
#[test]
fn the_block_parses_like_vllm_output() {
    let out = runner(&[
        &fixture("fixed.rhai"),
        "--sim-profile",
        "fixed",
        "-p",
        "requests=16",
        "-p",
        "output_tokens=8",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let start = text
        .find("============ Serving Benchmark Result ============")
        .unwrap();
    let mut parsed = std::collections::BTreeMap::new();
    for line in text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("=========="))
    {
        if line.starts_with('-') {
            continue;
        }
        let (label, rest) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("no colon: {line:?}"));
        let value = rest
            .split_whitespace()
            .next()
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        let number: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line:?}"));
        parsed.insert(format!("{label}:"), number);
    }
    assert_eq!(parsed["Successful requests:"], 16.0);
    assert_eq!(parsed["Total generated tokens:"], 128.0);
    assert!(parsed["Mean TTFT (ms):"] > 0.0);
    // 11 headline rows (no request rate in a closed loop) and 4 sections of mean, median, P99.
    assert_eq!(parsed.len(), 23, "{parsed:?}");
}

/// The lines of each `Serving Benchmark Result` block in `text`, title to `=` footer.
pub fn vllm_blocks(text: &str) -> Vec<Vec<&str>> {
    let title = "============ Serving Benchmark Result ============";
    text.match_indices(title)
        .map(|(at, _)| {
            text[at..]
                .lines()
                .take_while(|l| *l != "=".repeat(50))
                .collect()
        })
        .collect()
}

/// Whether `line` may stand in vLLM's block: its title, one of its rulers, or a row whose
/// label `vllm bench serve` prints (vLLM's `vllm/benchmarks/serve.py`).
fn a_vllm_line(line: &str) -> bool {
    let label = match line.split_once(':') {
        Some((label, _)) => format!("{label}:"),
        None => return SECTIONS.contains(&line) || line.starts_with("============ Serving"),
    };
    let headline = VLLM_ROWS.contains(&label.as_str()) || label == "Request goodput (req/s):";
    let latency = ["TTFT", "TPOT", "ITL", "E2EL"].iter().any(|m| {
        let stat = label.strip_suffix(&format!(" {m} (ms):")).unwrap_or("-");
        stat == "Mean"
            || stat == "Median"
            || stat
                .strip_prefix('P')
                .is_some_and(|p| p.parse::<f64>().is_ok())
    });
    headline || latency
}

/// Against a server that closes every connection after its answer (as llama.cpp's does)
/// and drops request 1 unanswered, requests are sent a second time: the count is a runner
/// line after the block, and every line of the block is one vLLM prints (a `Retried
/// requests:` row once stood inside it).
#[test]
fn retried_requests_are_counted_after_the_vllm_block() {
    use crate::fault_server::{Fault, FaultServer};
    let _quiet = exclusive();
    let server = FaultServer::start(|i| match i {
        1 => Fault::CloseAfterRead,
        _ => Fault::CloseAfterAnswer,
    });
    let (text, result) = run_ok(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        "requests=40",
        "-p",
        "concurrency=4",
    ]);
    let retried = result["runner"]["retried_requests"]
        .as_u64()
        .expect("a count");
    assert!(retried >= 1, "request 1 was dropped unanswered: {result}");
    let blocks = vllm_blocks(&text);
    assert_eq!(blocks.len(), 1, "{text}");
    for line in &blocks[0] {
        assert!(
            a_vllm_line(line),
            "not a line of vLLM's block: {line:?}\n{text}"
        );
    }
    let extras = text.find(" Runner extras ").expect("the extras");
    let row = format!("\nRetried requests:{:<23} {retried:<10}\n", "");
    let at = text
        .find(&row)
        .unwrap_or_else(|| panic!("no `{row}` in:\n{text}"));
    assert!(at > extras, "the retried row is before the extras:\n{text}");
}

/// A phase that sent no request says so on one line in the text, markdown and HTML reports
/// instead of a block of zeros; result.json keeps its schema (zero counts and vLLM's zero
/// latencies, as vLLM writes for a run with no success).
#[test]
fn a_phase_that_sent_nothing_says_so_in_one_line() {
    const NOTHING_SENT: &str = "No requests were sent in this phase: nothing to measure.";
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("empty_phase.rhai");
    std::fs::write(
        &script,
        r#"
fn describe() { #{ name: "empty-phase", description: "A phase, then one with no request.", params: [] } }
fn phases() {
    [#{ name: "sends", arrival: #{ process: "burst" }, max_requests: 4 },
     #{ name: "empty", arrival: #{ process: "burst" }, max_requests: 4 }]
}
fn next_request(phase, index) {
    if phase == 1 { return (); }
    #{ prompt: "hello there", input_tokens: 2, max_tokens: 4 }
}
"#,
    )
    .expect("write the scenario");
    let out = dir.path().join("out");
    let (text, _) = run_ok(&[
        &script.display().to_string(),
        "--sim-profile",
        "zero",
        "--output",
        &out.display().to_string(),
    ]);
    assert_eq!(
        vllm_blocks(&text).len(),
        1,
        "one block, the sending phase's:\n{text}"
    );
    let empty = text
        .find("Phase 2/2: empty")
        .expect("the empty phase's heading");
    assert!(
        text[empty..].lines().nth(1) == Some(NOTHING_SENT),
        "the empty phase's first line:\n{text}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert_eq!(vllm_blocks(&md).len(), 1, "{md}");
    assert!(
        md.contains(&format!("## empty\n\n```\n{NOTHING_SENT}\n```")),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(
        html.contains(&format!("<pre>{NOTHING_SENT}\n</pre>")),
        "{html}"
    );
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap())
            .expect("result.json");
    crate::schema::assert_valid(&crate::schema::validator(), "result.json", &result);
    let phase = &result["phases"][1];
    assert_eq!(
        (phase["completed"].as_u64(), phase["failed"].as_u64()),
        (Some(0), Some(0))
    );
}
