//! The server's side against a real engine: llama.cpp's own counters read the way the
//! engine means them. Its prefix-cache hit rate against its counters read by the test
//! itself, its tokens/s gauges (rates since the previous scrape) against its counters, a
//! cache left warm by an earlier run warned about, and `--reset-prefix-cache run`
//! bringing a second run back to the first's hit rate.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::fixture::{engine, Options, Server};
use crate::support::{exclusive, runner, scenario, stderr, stdout};

/// One value of llama.cpp's /metrics, read by the test itself (an HTTP/1.0 GET).
fn metric(server: &Server, name: &str) -> f64 {
    let addr = server.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Prompt tokens from cache and computed, as llama.cpp counts them.
fn prompt_counters(server: &Server) -> (f64, f64) {
    (
        metric(server, "llamacpp:prompt_tokens_cached_total"),
        metric(server, "llamacpp:prompt_tokens_total"),
    )
}

struct Run {
    text: String,
    warnings: String,
    result: Value,
    samples: Vec<Value>,
}

/// shared_prefix against `server`: 2 groups of 6 requests of 1024 tokens, three quarters
/// shared, 64 tokens out, two at a time, scraped every 100 ms. (llama.cpp's generation
/// gauge leaves each request's first token out, which its counter holds: 1 in 64, 1.6 %.)
fn shared_prefix(server: &Server, tokenizer: &Path, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let result_path = dir.path().join("result.json").display().to_string();
    let tokenizer = tokenizer.display().to_string();
    let mut args = vec![
        scenario("shared_prefix.rhai"),
        "-p".into(),
        "groups=2".into(),
        "-p".into(),
        "requests_per_group=6".into(),
        "-p".into(),
        "input_tokens=1024".into(),
        "-p".into(),
        "output_tokens=64".into(),
        "-p".into(),
        "concurrency=2".into(),
        "-p".into(),
        "prefix_ratio=0.75".into(),
        "--server-metrics-interval".into(),
        "100ms".into(),
        "--target".into(),
        server.url.clone(),
        "--tokenizer".into(),
        tokenizer,
        "--output".into(),
        out,
        "--save-result".into(),
        result_path.clone(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    assert!(o.status.success(), "{}\n{}", stderr(&o), stdout(&o));
    let result = std::fs::read_to_string(&result_path).expect("result.json");
    let samples = std::fs::read_to_string(dir.path().join("server_metrics.jsonl"))
        .expect("server_metrics.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    Run {
        text: stdout(&o),
        warnings: stderr(&o),
        result: serde_json::from_str(&result).expect("JSON"),
        samples,
    }
}

fn hit_rate(run: &Run) -> f64 {
    let server = &run.result["runner"]["server_metrics"];
    server["prefix_cache_hit_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no prefix-cache hit rate in {server}"))
}

const LEFTOVER: &str = "which no request of this run could have filled yet";

#[test]
fn hit_rates_rates_and_a_leftover_cache_read_as_llama_cpp_means_them() {
    let _quiet = exclusive();
    let Some(engine) = engine() else { return };
    // --cache-ram 0: an erase of the slots then empties every prompt llama.cpp keeps.
    let options = Options {
        slot_actions: true,
        cache_ram_mib: Some(0),
        ..Options::default()
    };
    let server = Server::start_with(&engine, options);
    let before = prompt_counters(&server);
    let first = shared_prefix(&server, &engine.tokenizer, &[]);
    let after = prompt_counters(&server);
    let (cached, computed) = (after.0 - before.0, after.1 - before.1);
    let counted = cached / (cached + computed);
    let reported = hit_rate(&first);
    eprintln!("llama.cpp shared_prefix: hit rate {reported:.4} reported, {counted:.4} from its counters ({cached} cached of {})", cached + computed);
    assert!(
        (reported - counted).abs() <= 0.05,
        "{reported} against {counted}"
    );
    assert!(counted > 0.3, "{counted}: the shared prefixes were cached");
    assert!(!first.text.contains(LEFTOVER), "{}", first.text);
    tokens_per_second_gauges_agree_with_the_counters(&first);

    // Same seed, same prompts: the slots still hold the first run's.
    let second = shared_prefix(&server, &engine.tokenizer, &[]);
    assert!(second.text.contains(LEFTOVER), "{}", second.text);
    assert!(second.warnings.contains(LEFTOVER), "{}", second.warnings);
    assert!(hit_rate(&second) > reported + 0.05, "{}", hit_rate(&second));

    let reset = shared_prefix(&server, &engine.tokenizer, &["--reset-prefix-cache", "run"]);
    eprintln!(
        "hit rates: first run {reported:.4}, second {:.4}, third after a reset {:.4}",
        hit_rate(&second),
        hit_rate(&reset)
    );
    assert!(
        (hit_rate(&reset) - reported).abs() <= 0.05,
        "{} against {reported}",
        hit_rate(&reset)
    );
    assert!(!reset.text.contains(LEFTOVER), "{}", reset.text);
}

/// llama.cpp's tokens/s gauges are each `tokens / seconds` since the previous scrape:
/// at every scrape after tokens moved, the gauge equals the counters' increase over that
/// interval (within 5 %), and the phase's figure is the counters' over the phase.
fn tokens_per_second_gauges_agree_with_the_counters(run: &Run) {
    let value = |s: &Value, name: &str| s["values"][name].as_f64();
    let pairs = [
        (
            "llamacpp:predicted_tokens_seconds",
            "llamacpp:tokens_predicted_total",
            "llamacpp:tokens_predicted_seconds_total",
        ),
        (
            "llamacpp:prompt_tokens_seconds",
            "llamacpp:prompt_tokens_total",
            "llamacpp:prompt_seconds_total",
        ),
    ];
    for (gauge, tokens, seconds) in pairs {
        let (mut checked, mut sum_tokens, mut sum_by_gauge) = (0, 0.0, 0.0);
        for w in run.samples.windows(2) {
            let (Some(t0), Some(t1)) = (value(&w[0], tokens), value(&w[1], tokens)) else {
                continue;
            };
            let (s0, s1) = (
                value(&w[0], seconds).unwrap(),
                value(&w[1], seconds).unwrap(),
            );
            let g = value(&w[1], gauge).unwrap();
            if t1 - t0 < 1.0 || s1 <= s0 {
                continue;
            }
            let rate = (t1 - t0) / (s1 - s0);
            assert!(
                (g - rate).abs() <= 0.05 * rate,
                "{gauge} {g} against {rate}"
            );
            checked += 1;
            sum_tokens += t1 - t0;
            sum_by_gauge += (t1 - t0) / g;
        }
        assert!(checked >= 2, "{gauge}: {checked} scrapes with tokens");
        let derived = run.result["runner"]["server_metrics"]["derived"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["name"] == gauge))
            .and_then(|d| d["value"].as_f64())
            .unwrap_or_else(|| panic!("no {gauge} in {}", run.result["runner"]));
        let from_gauges = sum_tokens / sum_by_gauge;
        eprintln!("{gauge}: {derived:.1}/s over the phase from the counters, {from_gauges:.1}/s from the gauges ({checked} scrapes)");
        assert!(
            (derived - from_gauges).abs() <= 0.05 * derived,
            "{derived} against {from_gauges}"
        );
    }
}
