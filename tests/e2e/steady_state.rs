//! The steady-state window (`measuring/metrics/steady_state.rs`) of the README's main
//! job (1000 requests offered at 1000 req/s, at most 512 in flight; smaller prompts and
//! answers here, so the run takes seconds): recomputed from requests.jsonl, it leaves out
//! the ramp-up and the drain and holds at least 95 % of the cap, and its figures count
//! exactly the records inside it. A window the scenario names replaces the rule, and one
//! outside its phase is refused.

use serde_json::Value;

use crate::support::{exclusive, fixture, num, run_records, runner, scenario, stderr};

const CAP: u64 = 512;

/// Requests in flight after each event of `[sent, end)`, ends first on ties: (time, level).
fn sweep(records: &[Value]) -> Vec<(u64, u64)> {
    let mut events: Vec<(u64, i64)> = Vec::new();
    for r in records {
        let (sent, end) = (num(r, "sent_ns") as u64, num(r, "end_ns") as u64);
        if end > sent {
            events.push((sent, 1));
            events.push((end, -1));
        }
    }
    events.sort();
    let mut level = 0i64;
    events
        .into_iter()
        .map(|(t, d)| {
            level += d;
            (t, level as u64)
        })
        .collect()
}

#[test]
fn the_main_jobs_window_leaves_out_ramp_up_and_drain_and_holds_the_cap() {
    let _quiet = exclusive();
    let (text, result, records) = run_records(&[
        &scenario("throughput.rhai"),
        "-p",
        "input_tokens=128",
        "-p",
        "output_tokens=32",
        "-q",
    ]);
    assert_eq!(records.len(), 1000);
    let st = &result["runner"]["steady_state"];
    let w = &st["window"];
    assert_eq!(w["cap"], CAP, "{st}");
    let threshold = (0.95 * CAP as f64).ceil() as u64;
    assert_eq!(w["threshold_requests"], threshold, "{st}");
    let (from, to) = (
        (num(w, "start_s") * 1e9).round() as u64,
        (num(w, "end_s") * 1e9).round() as u64,
    );
    let events = sweep(&records);
    // Ramp-up left out: before the window the requests in flight never reached the
    // threshold, and at its start they did.
    let before: Vec<_> = events.iter().filter(|(t, _)| *t < from).collect();
    assert!(!before.is_empty(), "the window starts after the first send");
    assert!(before.iter().all(|(_, l)| *l < threshold), "{st}");
    // Drain left out: from its end on, never again at the threshold, and requests were
    // still in flight at the end (the drain exists).
    let after: Vec<_> = events.iter().filter(|(t, _)| *t >= to).collect();
    assert!(after.iter().all(|(_, l)| *l < threshold), "{st}");
    assert!(after.len() > 100, "{} events after the window", after.len());
    // Inside: time-weighted, at least 95 % of the cap.
    let (mut area, mut prev, mut level) = (0f64, 0u64, 0u64);
    for &(t, after) in &events {
        let (lo, hi) = (prev.max(from), t.min(to));
        if hi > lo {
            area += (hi - lo) as f64 * level as f64;
        }
        (prev, level) = (t, after);
    }
    let mean = area / (to - from) as f64;
    assert!(mean >= 0.95 * CAP as f64, "mean in flight {mean} {st}");
    assert!(
        (mean - num(w, "mean_concurrency")).abs() < 1e-6 * CAP as f64,
        "{mean} {st}"
    );
    // The figures count the records inside the window.
    let ok: Vec<_> = records.iter().filter(|r| r["error"].is_null()).collect();
    let inside = |ns: f64| (ns as u64) >= from && (ns as u64) < to;
    let sent = ok.iter().filter(|r| inside(num(r, "sent_ns"))).count() as u64;
    let last_chunk = |r: &Value| {
        num(
            &r["chunks"][r["chunks"].as_array().unwrap().len() - 1],
            "t_ns",
        )
    };
    let completed = ok.iter().filter(|r| inside(last_chunk(r))).count() as u64;
    assert_eq!(w["requests_sent"], sent, "{st}");
    assert_eq!(w["requests_completed"], completed, "{st}");
    let rate = completed as f64 / num(w, "duration_s");
    assert!(
        (num(st, "request_throughput") - rate).abs() < 1e-9 * rate,
        "{st}"
    );
    assert_eq!(st["ttft"]["count"], sent, "{st}");
    assert!(
        text.contains("------------------ Steady state ------------------"),
        "{text}"
    );
}

/// A phase that names its window (tests/fixtures/scenarios/steady_window.rhai: 60
/// requests at 100 req/s, no cap, the window 0.2 to 0.4 s): the figures are over that
/// window, the reports say the scenario chose it, and with `--percentiles 50,90` the
/// section's p99 is the window's own (the phase's, not asked for, is `-`).
#[test]
fn a_named_window_is_the_scenarios_and_the_reports_say_so() {
    let (text, result, records) =
        run_records(&[&fixture("steady_window.rhai"), "--percentiles", "50,90"]);
    assert_eq!(records.len(), 60);
    let st = &result["runner"]["steady_state"];
    let w = &st["window"];
    assert_eq!(w["rule"], "named", "{st}");
    assert_eq!((num(w, "start_s"), num(w, "end_s")), (0.2, 0.4), "{st}");
    assert!(
        w["cap"].is_null() && w["time_at_threshold"].is_null(),
        "{st}"
    );
    let inside = |ns: f64| (0.2e9..0.4e9).contains(&ns);
    let sent = records
        .iter()
        .filter(|r| r["error"].is_null() && inside(num(r, "sent_ns")))
        .count() as u64;
    // About 20 at 100 req/s; exactly those the records say.
    assert!((10..=30).contains(&sent), "{sent}");
    assert_eq!(w["requests_sent"], sent, "{st}");
    assert_eq!(st["ttft"]["count"], sent, "{st}");
    assert!(
        text.contains("named by the scenario (steady_window)"),
        "{text}"
    );
    let ttft = text
        .lines()
        .find(|l| l.starts_with("TTFT mean/p50/p99 (ms):"))
        .unwrap_or_else(|| panic!("no TTFT line in {text}"));
    let p99 = format!("/ {:.2} (phase ", num(&st["ttft"], "p99_ms"));
    assert!(
        ttft.contains(&p99) && ttft.ends_with(" / -)"),
        "{ttft}\n{st}"
    );
}

/// A named window outside its phase is refused before anything is sent, in one line.
#[test]
fn a_named_window_outside_the_phase_is_refused_in_one_line() {
    let out = runner(&[
        &fixture("steady_window.rhai"),
        "-p",
        "to_s=9",
        "-p",
        "max_duration=2",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("`steady_window` from 0.2 s to 9 s lies outside the phase: it ends after the phase's `max_duration` (2 s)"),
        "{err}"
    );
}
