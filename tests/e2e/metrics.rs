//! Measurement against the server's own account: the simulator's fixed mode sends TTFT,
//! the gaps between chunks and the tokens per chunk on a timetable, and its send log
//! (`--sim-send-log`) says when each chunk really left; every measured figure is held to
//! that, request by request (`client_error.rs` of tests/timing). The same figures against
//! the nominal timetable, which only a quiet machine keeps, are in `quiet_machine`.

use std::collections::BTreeMap;

use crate::client_error::*;
use crate::support::*;

fn within(what: &str, got: f64, truth: f64, tolerance: f64) {
    assert!(
        (got - truth).abs() <= tolerance,
        "{what}: measured {got}, truth {truth} ± {tolerance}"
    );
}

/// Runs the truth fixture in fixed mode (TTFT 50 ms, 10 ms between chunks), with the
/// server's send log.
fn truth_run(extra: &[&str]) -> Logged {
    let mut args = vec![fixture("truth.rhai")];
    args.extend(
        [
            "--sim-profile",
            "fixed",
            "--sim-ttft-ms",
            "50",
            "--sim-itl-ms",
            "10",
            "--percentiles",
            "50,99",
            "-q",
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run_logged(&refs)
}

/// The truth fixture's closed loop of `streams` for `requests` measured requests, and the
/// counts that do not depend on the clock.
fn truth_run_at(streams: usize, requests: usize) -> Logged {
    let run = truth_run(&[
        "-p",
        &format!("concurrency={streams}"),
        "-p",
        &format!("requests={requests}"),
    ]);
    let r = &run.result;
    assert_eq!(
        num(r, "completed"),
        requests as f64,
        "warm-up requests are not counted"
    );
    assert_eq!(num(r, "total_output_tokens"), 64.0 * requests as f64);
    assert_eq!(num(r, "max_concurrent_requests"), streams as f64);
    assert_eq!(
        r["warmup_phases"][0]["completed"], streams,
        "the warm-up is listed apart"
    );
    run
}

#[test]
fn fixed_timing_against_the_servers_send_log_at_1_and_64_streams() {
    let _quiet = exclusive();
    for (streams, requests) in [(1, 8), (64, 256)] {
        let run = truth_run_at(streams, requests);
        let measured = paired(&run, 1);
        assert_eq!(measured.len(), requests);
        let what = format!("{streams} streams");
        check_latencies(&what, &measured);
        check_gaps(&what, &measured);
        check_all_reported(&run.result, &measured);
    }
}

/// The peak of output tokens per whole second of the phase, counted at the moments the
/// server sent them: each request's send (the client's clock) plus the server's offsets.
fn server_peak_tokens_per_s(requests: &[Paired]) -> f64 {
    let mut per_second: BTreeMap<u64, f64> = BTreeMap::new();
    for p in requests {
        let sent = p.record["sent_ns"].as_u64().expect("sent_ns") as f64;
        let chunks = p.record["chunks"].as_array().expect("chunks");
        for (chunk, ms) in chunks.iter().zip(p.server_ms) {
            let second = ((sent + ms * 1e6) / 1e9) as u64;
            *per_second.entry(second).or_default() += num(chunk, "tokens");
        }
    }
    per_second.values().copied().fold(0.0, f64::max)
}

/// 64 streams × 12 rounds of 64-token requests in chunks of 4: long enough for whole
/// 1-second windows.
fn four_tokens_per_chunk_run() -> Logged {
    truth_run(&[
        "--sim-tokens-per-chunk",
        "4",
        "-p",
        "concurrency=64",
        "-p",
        "requests=768",
    ])
}

/// How far the mean gap (ITL, TPOT) may sit from the server's: over 768 × 15 gaps, the
/// arrivals' errors cancel out but for each stream's first and last (loaded: within
/// 0.01 ms). Per-chunk and per-token gaps mixed up are 7.5 ms off.
const MEAN_GAP_MS: f64 = 0.2;

#[test]
fn four_tokens_per_chunk_per_token_and_per_chunk_itl() {
    let _quiet = exclusive();
    let run = four_tokens_per_chunk_run();
    let (r, out) = (&run.result, &run.stdout);
    let measured = paired(&run, 1);
    let server = Figures::server(&measured);
    let server_gap = Spread::of(server.itl).mean;
    let server_tpot = Spread::of(server.tpot).mean;
    // A per-token gap is the chunk's gap over its 4 tokens, weighted by them.
    within(
        "per-chunk ITL",
        num(r, "mean_itl_ms"),
        server_gap,
        MEAN_GAP_MS,
    );
    within(
        "per-token ITL",
        num(&r["runner"]["itl_per_token"], "mean_ms"),
        server_gap / 4.0,
        MEAN_GAP_MS / 4.0,
    );
    within("TPOT", num(r, "mean_tpot_ms"), server_tpot, MEAN_GAP_MS);
    check_gaps("4 tokens per chunk", &measured);
    within(
        "tokens per chunk",
        num(&r["runner"], "mean_tokens_per_chunk"),
        4.0,
        1e-9,
    );
    // Only the tokens within the client's error of a second's edge can change windows.
    let (peak, truth) = (
        num(r, "max_output_tokens_per_s"),
        server_peak_tokens_per_s(&measured),
    );
    eprintln!("peak output: client {peak} tok/s, server {truth} tok/s");
    assert!(
        peak.is_finite() && (peak - truth).abs() <= 0.02 * truth,
        "peak {peak} tok/s, server {truth}"
    );
    assert!(
        out.contains("Mean tokens per chunk:                   4.00"),
        "{out}"
    );
}

/// Chat streams open with a role-only delta at once, then 8 reasoning tokens, then
/// content: TTFT runs to the first reasoning token, the server's first logged chunk.
fn reasoning_run() -> Logged {
    truth_run(&[
        "--sim-reasoning-tokens",
        "8",
        "-p",
        "chat=true",
        "-p",
        "concurrency=8",
        "-p",
        "requests=32",
        "--api",
        "chat",
    ])
}

#[test]
fn reasoning_and_role_only_chunks_do_not_start_the_clock() {
    let _quiet = exclusive();
    let run = reasoning_run();
    let (r, out) = (&run.result, &run.stdout);
    let measured = paired(&run, 1);
    // A clock started at the role-only delta would read TTFT ~50 ms below the server's.
    check_latencies("reasoning first", &measured);
    check_gaps("reasoning first", &measured);
    assert_eq!(num(r, "total_output_tokens"), 64.0 * 32.0);
    let acc = &r["runner"]["token_accounting"];
    assert_eq!(acc["counted_by"], "server usage");
    assert_eq!(acc["usage_tokens"], 64 * 32);
    assert_eq!(
        acc["tokenizer_tokens"],
        64 * 32,
        "reasoning text is counted too"
    );
    assert_eq!(acc["chunks"], 64 * 32);
    assert!(
        out.contains("Output tokens counted by:                server usage"),
        "{out}"
    );
}

#[test]
fn continuous_usage_gives_per_chunk_tokens() {
    let Logged {
        stdout: out,
        result: r,
        ..
    } = truth_run(&[
        "--continuous-usage",
        "--sim-tokens-per-chunk",
        "4",
        "-p",
        "concurrency=8",
        "-p",
        "requests=16",
    ]);
    assert_eq!(num(&r["runner"], "mean_tokens_per_chunk"), 4.0);
    assert_eq!(r["runner"]["token_accounting"]["chunks"], 16 * 16);
    assert!(
        out.contains(
            "NOTE: the chunk count differs from the server's usage by -768 tokens (-75.00 %)."
        ),
        "{out}"
    );
}

#[test]
fn goodput_counts_exactly_the_slow_requests() {
    let _quiet = exclusive();
    // The server delays every 4th request it receives by 200 ms (its count includes the
    // pre-run test request, so of the run's 64 requests, numbers 2..65, exactly 16 are
    // slow): with TTFT 20 ms and an SLO of 120 ms, exactly 75 % are good, and the SLO
    // sits 100 ms from both kinds.
    let run = run_logged(&[
        &fixture("fixed.rhai"),
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "20",
        "--sim-itl-ms",
        "2",
        "--sim-slow-every",
        "4",
        "--sim-slow-ms",
        "200",
        "-p",
        "requests=64",
        "-p",
        "concurrency=8",
        "-p",
        "output_tokens=8",
        "--goodput",
        "ttft:120",
        "-q",
    ]);
    let (r, out) = (&run.result, &run.stdout);
    let measured = paired(&run, 0);
    assert_eq!(measured.len(), 64);
    // The server's own account of which requests it held back, never early.
    let held = measured.iter().filter(|p| p.server_ms[0] >= 220.0).count();
    assert_eq!(held, 16, "every 4th request was held 200 ms");
    check_latencies("goodput", &measured);
    let good_fraction = num(r, "request_goodput") / num(r, "request_throughput");
    within("good fraction", good_fraction, 0.75, 1e-9);
    assert!(out.contains("Request goodput (req/s):"), "{out}");
}

/// numpy.percentile's default (linear) method.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

#[test]
fn percentiles_agree_with_the_raw_samples_in_requests_jsonl() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    // The batching profile gives widely spread latencies.
    let out = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=300",
        "-p",
        "input_tokens=256",
        "--percentiles",
        "50,90,95,99",
        "--output",
        &d,
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.json")).unwrap())
            .unwrap();
    let mut samples: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let jsonl = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 300, "one line per finished request");
    for r in &lines {
        let sent = r["sent_ns"].as_f64().unwrap();
        let chunks = r["chunks"].as_array().unwrap();
        let first = chunks[0]["t_ns"].as_f64().unwrap();
        let last = chunks[chunks.len() - 1]["t_ns"].as_f64().unwrap();
        let out_tokens = r["output_tokens"].as_f64().unwrap();
        samples
            .entry("ttft")
            .or_default()
            .push((first - sent) / 1e6);
        samples.entry("e2el").or_default().push((last - sent) / 1e6);
        samples
            .entry("tpot")
            .or_default()
            .push((last - first) / 1e6 / (out_tokens - 1.0));
        for w in chunks.windows(2) {
            samples
                .entry("itl")
                .or_default()
                .push((w[1]["t_ns"].as_f64().unwrap() - w[0]["t_ns"].as_f64().unwrap()) / 1e6);
        }
    }
    for (metric, values) in samples.iter_mut() {
        values.sort_by(f64::total_cmp);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        within(
            &format!("mean {metric}"),
            num(&result, &format!("mean_{metric}_ms")),
            mean,
            1e-6 * mean.max(1.0),
        );
        for p in [50.0, 90.0, 95.0, 99.0] {
            let exact = percentile(values, p);
            let got = num(&result, &format!("p{p}_{metric}_ms"));
            // HDR histograms keep 3 significant digits: within 0.1 % (+1 µs).
            within(&format!("p{p} {metric}"), got, exact, exact * 1e-3 + 1e-3);
        }
    }
}

#[test]
fn output_dir_holds_report_records_and_phase_tables() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let out = runner(&[
        &scenario("sweep.rhai"),
        "-p",
        "max_prompts=4",
        "-p",
        "output_tokens=4",
        "--sim-profile",
        "fixed",
        "--output",
        &d,
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
    assert!(
        report.contains("Scenario:") && report.contains(&stdout(&out)),
        "report.txt = header + printed report"
    );
    let md = std::fs::read_to_string(dir.path().join("phases.md")).unwrap();
    assert_eq!(md.lines().count(), 2 + 3, "header, rule, 3 phases:\n{md}");
    let csv = std::fs::read_to_string(dir.path().join("phases.csv")).unwrap();
    assert!(
        csv.lines().nth(3).unwrap().starts_with("4 prompts,4,0,"),
        "{csv}"
    );
    let records = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 1 + 2 + 4);
}

/// The same runs held to the nominal timetable, which the server keeps only when nothing
/// else runs: a late timer on a busy machine moves the server's sends, and with them every
/// figure, although the client measured them right. Run them with the README's
/// quiet-machine command.
mod quiet_machine {
    use super::*;

    /// The aim is 1 ms on means and 2 ms on P99. One stream lands there (debug, three
    /// runs: mean TTFT 50.57-50.61, p99 50.67-50.76, mean E2EL 680.53-680.56, p99
    /// 680.65-680.82 ms); 64 streams in lockstep on a 2-vCPU VM do not, because the
    /// simulator's own sends are up to 2-3 ms late at P99 (bench-results/client_perf.md),
    /// and the VM stalls a thread for up to ~4 ms now and then. The gate still catches the
    /// bugs it is for: a role-only delta taken as the first token is 50 ms off, per-chunk
    /// and per-token gaps mixed up are 7.5 ms off.
    const MEAN_TOLERANCE_MS: f64 = 3.0;
    const P99_TOLERANCE_MS: f64 = 6.0;

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn fixed_timing_truth_at_1_and_64_streams() {
        let _quiet = exclusive();
        for (streams, requests) in [(1, 8), (64, 256)] {
            let r = truth_run_at(streams, requests).result;
            let at = |k: &str| format!("{streams} streams: {k}");
            // Truth: TTFT 50 ms; TPOT and ITL 10 ms; E2EL 50 + 63 × 10 = 680 ms.
            for (metric, truth) in [
                ("ttft", 50.0),
                ("tpot", 10.0),
                ("itl", 10.0),
                ("e2el", 680.0),
            ] {
                within(
                    &at(&format!("mean {metric}")),
                    num(&r, &format!("mean_{metric}_ms")),
                    truth,
                    MEAN_TOLERANCE_MS,
                );
                within(
                    &at(&format!("p99 {metric}")),
                    num(&r, &format!("p99_{metric}_ms")),
                    truth,
                    P99_TOLERANCE_MS,
                );
            }
        }
    }

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn four_tokens_per_chunk_on_the_nominal_timetable() {
        let _quiet = exclusive();
        let r = four_tokens_per_chunk_run().result;
        within("per-chunk ITL", num(&r, "mean_itl_ms"), 10.0, 0.2);
        within(
            "per-token ITL",
            num(&r["runner"]["itl_per_token"], "mean_ms"),
            2.5,
            0.2,
        );
        within(
            "TPOT = 150 ms / 63",
            num(&r, "mean_tpot_ms"),
            150.0 / 63.0,
            0.2,
        );
        // Truth: each stream receives 64 tokens every 200 ms (TTFT 50 + 15 gaps of 10 ms).
        let truth = 64.0 * 64.0 / 0.200;
        let peak = num(&r, "max_output_tokens_per_s");
        assert!(
            peak.is_finite() && (peak - truth).abs() <= 0.1 * truth,
            "peak {peak} tok/s, truth {truth}"
        );
    }

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn reasoning_first_ttft_on_the_nominal_timetable() {
        let _quiet = exclusive();
        let r = reasoning_run().result;
        within(
            "mean TTFT",
            num(&r, "mean_ttft_ms"),
            50.0,
            MEAN_TOLERANCE_MS,
        );
        within("p99 TTFT", num(&r, "p99_ttft_ms"), 50.0, P99_TOLERANCE_MS);
        within("mean ITL", num(&r, "mean_itl_ms"), 10.0, MEAN_TOLERANCE_MS);
    }
}

/// Against a zero-delay server the chunks of one stream arrive microseconds apart, closer
/// than the error of each read's conversion of the kernel's stamp to the monotonic clock:
/// on main at 1a0dc7c up to 45 of 2,000 such requests had their last chunk stamped before
/// their first, and their TPOT wrapped to about 7×10¹⁰ ms. No chunk may step back, and no
/// TPOT may pass its request's E2EL.
#[test]
fn chunk_times_never_step_back_against_a_zero_delay_server() {
    let _quiet = exclusive();
    let (_, result, records) = run_records(&[
        &fixture("truth.rhai"),
        "--sim-profile",
        "zero",
        "-p",
        "requests=2000",
        "-p",
        "concurrency=64",
        "-p",
        "output_tokens=256",
        "-q",
    ]);
    let measured: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["warmup"] != true).collect();
    assert_eq!(measured.len(), 2000);
    for r in &measured {
        let chunks = r["chunks"].as_array().expect("chunks");
        let times: Vec<u64> = chunks.iter().map(|c| c["t_ns"].as_u64().unwrap()).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "request {} has a chunk before the one before it: {times:?}",
            r["index"]
        );
    }
    // A request's TPOT is at most its E2EL, so every percentile of one is at most the
    // other's: a wrapped TPOT is 10⁷ times over.
    for key in ["mean", "p99"] {
        let tpot = num(&result, &format!("{key}_tpot_ms"));
        let e2el = num(&result, &format!("{key}_e2el_ms"));
        assert!(
            tpot <= e2el,
            "{key} TPOT {tpot} ms over {key} E2EL {e2el} ms"
        );
    }
}
