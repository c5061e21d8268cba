//! The prefix-cache hit rate a workload intended (shared_prefix.rhai notes it) beside the
//! one the simulator's own counters report: the same within 10 points with a cache that
//! holds the prefixes, a warning when a small KV cache evicts them.

use crate::support::{runner, scenario, stderr, stdout};

fn hit_rate_lines(kv_tokens: &str) -> Vec<String> {
    let out = runner(&[
        &scenario("shared_prefix.rhai"),
        "-q",
        "-p",
        "groups=4",
        "-p",
        "requests_per_group=8",
        "-p",
        "input_tokens=512",
        "-p",
        "output_tokens=8",
        "-p",
        "rate=20",
        "--sim-kv-tokens",
        kv_tokens,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let section = text
        .split("Prefix Cache")
        .nth(1)
        .unwrap_or_else(|| panic!("a Prefix Cache section: {text}"));
    section
        .lines()
        .take_while(|l| !l.starts_with("=="))
        .filter(|l| !l.trim_start().starts_with('-') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// (achieved, intended) percentages of a `Hit rate, …` line.
fn rates(line: &str) -> (f64, f64) {
    let numbers: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[numbers.len() - 2], numbers[numbers.len() - 1])
}

#[test]
fn the_intended_hit_rate_stands_beside_the_servers_and_a_gap_warns() {
    // 3 of 4 prompt tokens are a group's prefix, and 7 of each group's 8 requests find it.
    let roomy = hit_rate_lines("262144");
    assert_eq!(roomy.len(), 1, "{roomy:?}");
    let (achieved, intended) = rates(&roomy[0]);
    assert!((intended - 65.6).abs() < 0.05, "{roomy:?}");
    // The simulator caches whole 16-token blocks: 24 of the prefix's 384 tokens.
    assert!((achieved - intended).abs() <= 10.0, "{roomy:?}");

    // A KV cache of 1,024 tokens holds less than three prefixes: interleaved groups evict
    // each other's.
    let small = hit_rate_lines("1024");
    assert_eq!(small.len(), 2, "{small:?}");
    let (achieved, _) = rates(&small[0]);
    assert!(achieved < intended - 10.0, "{small:?}");
    assert!(
        small[1].starts_with("warning: phase `prefix 0.75` hit the prefix cache -"),
        "{small:?}"
    );
}
