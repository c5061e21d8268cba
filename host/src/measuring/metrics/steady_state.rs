//! A phase's steady-state window and its headline figures over it. A phase with a
//! concurrency cap ramps up to it, runs at it, and drains: the window runs from the first
//! moment the requests in flight reach 95 % of the cap to the last moment they fall below
//! it, as vLLM's Rust client defines it (vllm-bench, `src/metrics/steady_state.rs`), so
//! the ramp-up and the drain are left out.
//!
//! Over the window, as that client counts: requests per second completed in it, output
//! tokens per second that arrived in it, and the TTFT, TPOT and E2EL of the requests sent
//! in it. The requests in flight are every request's `[sent, end)` (a failed one held its
//! slot too); the figures are the successful requests'. Output tokens are counted in
//! 10 ms buckets of their chunks' arrival, so the window's edges cut them to 10 ms.
//!
//! A scenario may name the window itself (a Rhai phase's `steady_window`): the figures
//! are then taken over the window it named, cut at the phase's end, and the window says
//! which rule chose it.
//!
//! Kept per successful request: three times and two token counts (40 bytes), beside the
//! send and end times the phase keeps for its peak concurrency. The shards' states do not
//! carry these rows: `runner merge` feeds them from the shards' requests.jsonl.

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;
use super::stat::{Distribution, StreamingStat};
use crate::workloads::scenario::NamedWindow;

/// The share of the cap the requests in flight must reach (vLLM's default threshold).
pub const THRESHOLD: f64 = 0.95;
/// The width of the output-token buckets.
const BUCKET_NS: u64 = 10_000_000;
/// The most buckets kept: 10,000 s of phase. Tokens later than that are not counted.
const MAX_BUCKETS: usize = 1_000_000;

/// One successful request, as the window's figures need it.
#[derive(Clone, Copy, Debug)]
struct Row {
    sent_ns: u64,
    first_ns: u64,
    last_ns: u64,
    input_tokens: u64,
    output_tokens: u64,
}

/// What a phase keeps to find its steady state.
#[derive(Clone, Debug, Default)]
pub(crate) struct SteadyStats {
    rows: Vec<Row>,
    /// Output tokens of the successful requests per 10 ms of chunk arrival.
    tokens: Vec<u64>,
}

/// Which rule chose a phase's steady-state window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WindowRule {
    /// vLLM's plateau rule: the requests in flight at 95 % of the cap or more.
    #[default]
    Plateau,
    /// The scenario named it (its phase's `steady_window`).
    Named,
}

/// The window: its bounds (seconds from the phase's start) and how it was found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SteadyWindow {
    /// Which rule chose the window: `plateau` (vLLM's) or `named` (by the scenario).
    #[serde(default)]
    pub rule: WindowRule,
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    /// The phase's concurrency cap (none: a named window of a phase without one).
    pub cap: Option<u64>,
    /// The share of the cap the window holds to, and that many requests (rounded up).
    pub threshold: f64,
    pub threshold_requests: Option<u64>,
    /// The most requests in flight at once in the phase.
    pub peak: u64,
    /// Requests in flight over the window, time-weighted mean.
    pub mean_concurrency: f64,
    /// The share of the window's time with at least `threshold_requests` in flight.
    pub time_at_threshold: Option<f64>,
    pub requests_sent: u64,
    pub requests_completed: u64,
}

/// What a phase's steady state needs beside the rows: its cap, the window its scenario
/// named, its length, and its requests in flight, `[starts[i], ends[i])` (both ascending).
pub(crate) struct PhaseSpan<'a> {
    pub(crate) cap: Option<u64>,
    pub(crate) named: Option<NamedWindow>,
    pub(crate) duration_ns: u64,
    pub(crate) starts: &'a [u64],
    pub(crate) ends: &'a [u64],
}

/// The headline figures over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    pub window: SteadyWindow,
    pub request_throughput: f64,
    pub output_throughput: f64,
    /// Prompt tokens of the requests sent in the window plus output tokens in it, per s.
    pub total_token_throughput: f64,
    pub ttft: Distribution,
    pub tpot: Distribution,
    pub e2el: Distribution,
}

impl SteadyStats {
    /// Adds a finished request; only successful ones with a chunk count.
    pub(crate) fn record(&mut self, r: &RequestRecord) {
        if r.error.is_some() || r.cancelled {
            return;
        }
        let (Some(first), Some(last)) = (r.chunks.first(), r.chunks.last()) else {
            return;
        };
        self.rows.push(Row {
            sent_ns: r.sent_ns,
            first_ns: first.t_ns,
            last_ns: last.t_ns,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
        });
        for c in &r.chunks {
            let k = (c.t_ns / BUCKET_NS) as usize;
            if k < MAX_BUCKETS {
                if self.tokens.len() <= k {
                    self.tokens.resize(k + 1, 0);
                }
                self.tokens[k] += u64::from(c.tokens);
            }
        }
    }

    /// Another part of the same phase (times from a common phase start).
    pub(crate) fn merge(&mut self, o: &SteadyStats) {
        self.rows.extend_from_slice(&o.rows);
        if self.tokens.len() < o.tokens.len() {
            self.tokens.resize(o.tokens.len(), 0);
        }
        for (a, b) in self.tokens.iter_mut().zip(&o.tokens) {
            *a += b;
        }
    }

    /// The steady state of `phase`: over the window its scenario named (cut at the
    /// phase's end), else the plateau rule's. `None` without rows, for a named window
    /// that starts after the phase ended, and by the rule without a cap or when the
    /// requests in flight never reached the threshold.
    pub(crate) fn summarize(&self, phase: &PhaseSpan, percentiles: &[f64]) -> Option<SteadyState> {
        if self.rows.is_empty() {
            return None;
        }
        let cap = phase.cap.filter(|c| *c > 0);
        let window = match phase.named {
            Some(named) => {
                let to = s_to_ns(named.to_s).min(phase.duration_ns);
                let bounds = (s_to_ns(named.from_s), to);
                (bounds.0 < bounds.1)
                    .then(|| describe(WindowRule::Named, bounds, cap, phase.starts, phase.ends))?
            }
            None => {
                let cap = cap?;
                let bounds = plateau(cap, phase.starts, phase.ends)?;
                describe(
                    WindowRule::Plateau,
                    bounds,
                    Some(cap),
                    phase.starts,
                    phase.ends,
                )
            }
        };
        Some(self.over(window, percentiles))
    }

    /// The figures over `w`.
    fn over(&self, w: SteadyWindow, percentiles: &[f64]) -> SteadyState {
        let (from, to) = (s_to_ns(w.start_s), s_to_ns(w.end_s));
        let inside = |t: u64| t >= from && t < to;
        let (mut ttft, mut tpot, mut e2el) = (
            StreamingStat::new(),
            StreamingStat::new(),
            StreamingStat::new(),
        );
        let (mut completed, mut sent, mut input) = (0u64, 0u64, 0u64);
        for r in &self.rows {
            completed += u64::from(inside(r.last_ns));
            if !inside(r.sent_ns) {
                continue;
            }
            sent += 1;
            input = input.saturating_add(r.input_tokens);
            ttft.record(r.first_ns.saturating_sub(r.sent_ns) as f64);
            e2el.record(r.last_ns.saturating_sub(r.sent_ns) as f64);
            if r.output_tokens > 1 {
                let decode = r.last_ns.saturating_sub(r.first_ns) as f64;
                tpot.record(decode / (r.output_tokens - 1) as f64);
            }
        }
        let first = (from / BUCKET_NS) as usize;
        let last = (to.div_ceil(BUCKET_NS) as usize).min(self.tokens.len());
        let output: u64 = self.tokens.get(first..last).unwrap_or(&[]).iter().sum();
        let per_s = |x: f64| {
            if w.duration_s > 0.0 {
                x / w.duration_s
            } else {
                0.0
            }
        };
        SteadyState {
            request_throughput: per_s(completed as f64),
            output_throughput: per_s(output as f64),
            total_token_throughput: per_s(input.saturating_add(output) as f64),
            ttft: ttft.distribution(percentiles),
            tpot: tpot.distribution(percentiles),
            e2el: e2el.distribution(percentiles),
            window: SteadyWindow {
                requests_sent: sent,
                requests_completed: completed,
                ..w
            },
        }
    }
}

fn s_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

/// The requests in flight that hold a cap of `cap` (95 % of it, rounded up).
pub(crate) fn threshold_requests(cap: u64) -> u64 {
    ((THRESHOLD * cap as f64).ceil() as u64).max(1)
}

/// The plateau rule's window of requests in flight `[starts[i], ends[i])` at or above the
/// threshold of `cap`: from the first up-crossing to the last down-crossing, ns. On ties
/// an end comes before a start, as in the phase's peak concurrency.
fn plateau(cap: u64, starts: &[u64], ends: &[u64]) -> Option<(u64, u64)> {
    let threshold = threshold_requests(cap);
    let (mut up, mut down) = (None, None);
    for (t, before, after) in Events::new(starts, ends) {
        if before < threshold && after >= threshold && up.is_none() {
            up = Some(t);
        }
        if before >= threshold && after < threshold {
            down = Some(t);
        }
    }
    Some((up?, down?))
}

/// The window `[from, to)` (ns) chosen by `rule`: how full it held, against the cap when
/// the phase has one.
fn describe(
    rule: WindowRule,
    (from, to): (u64, u64),
    cap: Option<u64>,
    starts: &[u64],
    ends: &[u64],
) -> SteadyWindow {
    let threshold = cap.map(threshold_requests);
    // Time-weighted concurrency over [from, to): each stretch between two events holds
    // the level the first of them left.
    let (mut area, mut at_threshold, mut peak) = (0f64, 0f64, 0u64);
    let (mut prev, mut level) = (0u64, 0u64);
    for (t, _, after) in Events::new(starts, ends) {
        let (lo, hi) = (prev.max(from), t.min(to));
        if hi > lo {
            area += (hi - lo) as f64 * level as f64;
            if threshold.is_some_and(|n| level >= n) {
                at_threshold += (hi - lo) as f64;
            }
        }
        (prev, level) = (t, after);
        peak = peak.max(after);
    }
    // A named window may reach past the last end: nothing in flight there.
    let span = (to - from) as f64;
    let share = |x: f64| if span > 0.0 { x / span } else { 0.0 };
    SteadyWindow {
        rule,
        start_s: from as f64 / 1e9,
        end_s: to as f64 / 1e9,
        duration_s: span / 1e9,
        cap,
        threshold: THRESHOLD,
        threshold_requests: threshold,
        peak,
        mean_concurrency: share(area),
        time_at_threshold: threshold.map(|_| share(at_threshold)),
        requests_sent: 0,
        requests_completed: 0,
    }
}

/// The sweep over sends and ends: each event's time and the requests in flight before
/// and after it.
#[derive(Clone)]
struct Events<'a> {
    starts: &'a [u64],
    ends: &'a [u64],
    i: usize,
    j: usize,
    level: u64,
}

impl<'a> Events<'a> {
    fn new(starts: &'a [u64], ends: &'a [u64]) -> Self {
        Events {
            starts,
            ends,
            i: 0,
            j: 0,
            level: 0,
        }
    }
}

impl Iterator for Events<'_> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<(u64, u64, u64)> {
        let before = self.level;
        let end_first = match (self.starts.get(self.i), self.ends.get(self.j)) {
            (Some(s), Some(e)) => e <= s,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (None, None) => return None,
        };
        let t = if end_first {
            self.j += 1;
            self.level = self.level.saturating_sub(1);
            self.ends[self.j - 1]
        } else {
            self.i += 1;
            self.level += 1;
            self.starts[self.i - 1]
        };
        Some((t, before, self.level))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Four slots: requests ramp up one per 10 ms, hold for a while, then drain.
    fn ramp() -> (Vec<u64>, Vec<u64>) {
        let starts = vec![0, 10 * MS, 20 * MS, 30 * MS, 100 * MS, 110 * MS];
        let mut ends = vec![100 * MS, 110 * MS, 200 * MS, 210 * MS, 220 * MS, 230 * MS];
        ends.sort_unstable();
        (starts, ends)
    }

    /// The plateau rule's window over `[starts, ends)` with a cap of `cap`.
    fn find_window(cap: u64, starts: &[u64], ends: &[u64]) -> Option<SteadyWindow> {
        let bounds = plateau(cap, starts, ends)?;
        Some(describe(
            WindowRule::Plateau,
            bounds,
            Some(cap),
            starts,
            ends,
        ))
    }

    fn span<'a>(cap: Option<u64>, starts: &'a [u64], ends: &'a [u64]) -> PhaseSpan<'a> {
        PhaseSpan {
            cap,
            named: None,
            duration_ns: 230 * MS,
            starts,
            ends,
        }
    }

    /// One successful request per `[sent, end)` of `ramp`, a token per 10 ms.
    fn ramp_stats() -> SteadyStats {
        let (starts, ends) = ramp();
        let mut stats = SteadyStats::default();
        for (&sent, &end) in starts.iter().zip(&ends) {
            stats.rows.push(Row {
                sent_ns: sent,
                first_ns: sent + 5 * MS,
                last_ns: end,
                input_tokens: 10,
                output_tokens: 2,
            });
        }
        stats.tokens = vec![1; 23];
        stats
    }

    #[test]
    fn the_window_runs_from_the_first_rise_to_the_last_fall_through_the_threshold() {
        let (starts, ends) = ramp();
        let w = find_window(4, &starts, &ends).expect("a window");
        // 95 % of 4 rounds up to 4: reached at 30 ms; at 200 ms four fall to three.
        assert_eq!(w.threshold_requests, Some(4));
        assert_eq!((w.start_s, w.end_s), (0.030, 0.200));
        assert_eq!(w.peak, 4);
        assert_eq!(w.rule, WindowRule::Plateau);
        // 100 and 110 ms: an end and a start at the same moment keep four in flight.
        assert!((w.mean_concurrency - 4.0).abs() < 1e-9, "{w:?}");
        assert_eq!(w.time_at_threshold, Some(1.0), "{w:?}");
    }

    #[test]
    fn a_dip_inside_the_window_lowers_its_mean_and_time_at_threshold() {
        // Two slots: full over [10, 20) and [30, 40) ms, one in flight in between.
        let starts = vec![0, 10 * MS, 30 * MS];
        let ends = vec![20 * MS, 40 * MS, 40 * MS];
        let w = find_window(2, &starts, &ends).expect("a window");
        assert_eq!((w.start_s, w.end_s), (0.010, 0.040));
        let at = w.time_at_threshold.expect("a cap");
        assert!((at - 2.0 / 3.0).abs() < 1e-9, "{w:?}");
        assert!((w.mean_concurrency - 5.0 / 3.0).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn no_window_without_reaching_the_threshold_or_without_a_cap() {
        let (starts, ends) = ramp();
        assert!(find_window(8, &starts, &ends).is_none());
        let stats = SteadyStats::default();
        assert!(stats
            .summarize(&span(None, &starts, &ends), &[50.0])
            .is_none());
        assert!(stats
            .summarize(&span(Some(4), &starts, &ends), &[50.0])
            .is_none());
        let stats = ramp_stats();
        assert!(stats
            .summarize(&span(None, &starts, &ends), &[50.0])
            .is_none());
        assert!(stats
            .summarize(&span(Some(4), &starts, &ends), &[50.0])
            .is_some());
    }

    #[test]
    fn a_named_window_replaces_the_rule_even_without_a_cap_and_is_cut_at_the_phase_end() {
        let (starts, ends) = ramp();
        let stats = ramp_stats();
        let named = |from_s, to_s, cap| PhaseSpan {
            named: Some(NamedWindow { from_s, to_s }),
            ..span(cap, &starts, &ends)
        };
        let st = stats
            .summarize(&named(0.0, 0.1, None), &[50.0])
            .expect("the named window");
        let w = &st.window;
        assert_eq!(w.rule, WindowRule::Named);
        assert_eq!((w.start_s, w.end_s, w.cap), (0.0, 0.1, None));
        assert_eq!((w.threshold_requests, w.time_at_threshold), (None, None));
        // In flight over [0, 100) ms: 1, 2, 3 then 4 from 30 ms: (10+20+30+280)/100.
        assert!((w.mean_concurrency - 3.4).abs() < 1e-9, "{w:?}");
        assert_eq!(w.requests_sent, 4);
        assert_eq!(w.peak, 4);
        // With the cap, the same window says how long it held the cap.
        let st = stats.summarize(&named(0.0, 0.1, Some(4)), &[50.0]);
        let at = st.expect("a window").window.time_at_threshold;
        assert!((at.expect("a cap") - 0.7).abs() < 1e-9, "{at:?}");
        // Past the phase's end (230 ms) the window is cut there; after it, none.
        let st = stats.summarize(&named(0.2, 9.0, None), &[50.0]);
        assert_eq!(st.expect("a cut window").window.end_s, 0.23);
        assert!(stats.summarize(&named(0.3, 9.0, None), &[50.0]).is_none());
    }

    #[test]
    fn figures_count_requests_sent_and_completed_and_tokens_inside_the_window() {
        let mut stats = SteadyStats::default();
        // Sent at 0 (before the window), 40 and 50 ms (inside); 11 tokens each.
        for (sent, first, last) in [(0, 20, 60), (40, 70, 170), (50, 80, 250)] {
            stats.rows.push(Row {
                sent_ns: sent * MS,
                first_ns: first * MS,
                last_ns: last * MS,
                input_tokens: 100,
                output_tokens: 11,
            });
        }
        // One token per 10 ms from 0 to 250 ms.
        stats.tokens = vec![1; 25];
        let w = SteadyWindow {
            rule: WindowRule::Plateau,
            start_s: 0.030,
            end_s: 0.200,
            duration_s: 0.170,
            cap: Some(2),
            threshold: THRESHOLD,
            threshold_requests: Some(2),
            peak: 2,
            mean_concurrency: 2.0,
            time_at_threshold: Some(1.0),
            requests_sent: 0,
            requests_completed: 0,
        };
        let s = stats.over(w, &[50.0]);
        assert_eq!(s.window.requests_sent, 2);
        // Completed at 60 and 170 ms; the third ended after the window.
        assert_eq!(s.window.requests_completed, 2);
        assert!((s.request_throughput - 2.0 / 0.170).abs() < 1e-9);
        // Buckets 3..20: 17 tokens.
        assert!((s.output_throughput - 17.0 / 0.170).abs() < 1e-9);
        assert!((s.total_token_throughput - 217.0 / 0.170).abs() < 1e-9);
        // TTFT of the two sent inside: 30 ms each; TPOT 10 and 17 ms.
        assert_eq!(s.ttft.count, 2);
        assert!((s.ttft.mean - 30.0).abs() < 1e-6, "{:?}", s.ttft);
        assert!((s.tpot.mean - 13.5).abs() < 1e-6, "{:?}", s.tpot);
    }
}
