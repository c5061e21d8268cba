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
