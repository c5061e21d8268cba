//! The running phase's last few seconds: counts and TTFT, ITL, E2EL, send lateness and
//! client delay histograms over a window that moves with the clock, so a live display
//! shows the phase as it is now, not since it began (a stall 40 s into a phase would
//! barely move whole-phase percentiles).
//!
//! The window is a ring of [`SLICES`] slices of [`WINDOW`]`/SLICES` each; a slice that
//! falls out of the window is emptied and reused. Every histogram has fixed bounds, so
//! the memory is the same for a phase of ten requests or ten million. The collector
//! records each finished request here, off the request path, under a lock of its own.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::measuring::metrics::RequestRecord;

/// How far back the live figures look.
pub const WINDOW: Duration = Duration::from_secs(5);
const SLICES: usize = 10;
/// One hour in µs: the largest latency a live histogram tells apart (larger ones count
/// as one hour).
const HIGHEST_US: u64 = 3_600_000_000;
/// Two significant digits (1 %) is plenty for a display; it keeps each histogram ~27 KB.
const SIGNIFICANT_DIGITS: u8 = 2;

/// The latencies a window keeps, in the order of [`Slice::latencies`].
#[derive(Clone, Copy)]
enum Latency {
    Ttft,
    Itl,
    E2el,
    SendLateness,
    ClientDelay,
}
const LATENCIES: usize = 5;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, SIGNIFICANT_DIGITS)
        .expect("fixed bounds within hdrhistogram's limits")
}

/// What one slice of time saw finish.
struct Slice {
    /// Which slice of time since the window's origin it holds.
    index: u64,
    completed: u64,
    failed: u64,
    output_tokens: u64,
    latencies: [Histogram<u64>; LATENCIES],
}

impl Slice {
    fn empty(index: u64) -> Slice {
        Slice {
            index,
            completed: 0,
            failed: 0,
            output_tokens: 0,
            latencies: std::array::from_fn(|_| histogram()),
        }
    }

    fn reuse(&mut self, index: u64) {
        self.index = index;
        (self.completed, self.failed, self.output_tokens) = (0, 0, 0);
        self.latencies.iter_mut().for_each(Histogram::reset);
    }

    fn record_ns(&mut self, which: Latency, ns: u64) {
        self.latencies[which as usize].saturating_record((ns / 1000).clamp(1, HIGHEST_US));
    }
}

/// p50 and p99 of a latency over the window, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowQuantiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The running phase over the last [`WINDOW`] (less at its start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowStats {
    /// The seconds the window covers.
    pub span_s: f64,
    pub completed: u64,
    pub failed: u64,
    pub output_tokens: u64,
    /// Requests completed per second over the window.
    pub request_throughput: f64,
    /// Output tokens per second over the window.
    pub output_throughput: f64,
    /// `None` where nothing in the window had one.
    pub ttft: Option<WindowQuantiles>,
    pub itl: Option<WindowQuantiles>,
    pub e2el: Option<WindowQuantiles>,
    pub send_lateness: Option<WindowQuantiles>,
    /// Only where the kernel gave receive times (`--receive-clock kernel`).
    pub client_delay: Option<WindowQuantiles>,
}

/// The ring of slices.
pub(super) struct Window {
    origin: Instant,
    slices: Vec<Slice>,
}

impl Window {
    pub(super) fn new(origin: Instant) -> Window {
        Window {
            origin,
            slices: (0..SLICES as u64).map(Slice::empty).collect(),
        }
    }

    /// Empty again, its time counted from `origin` (a new phase).
    pub(super) fn restart(&mut self, origin: Instant) {
        self.origin = origin;
        for (i, s) in self.slices.iter_mut().enumerate() {
            s.reuse(i as u64);
        }
    }

    fn slice_of(&self, at: Instant) -> u64 {
        let slice = WINDOW.as_nanos() / SLICES as u128;
        (at.saturating_duration_since(self.origin).as_nanos() / slice) as u64
    }

    /// `r` finished at `now`: counted in the slice of `now`, as the whole phase's
    /// statistics count it (successes' TTFT, ITL, E2EL and client delay, every request's
    /// send lateness).
    pub(super) fn record(&mut self, r: &RequestRecord, now: Instant) {
        let index = self.slice_of(now);
        let slice = &mut self.slices[index as usize % SLICES];
        if slice.index != index {
            slice.reuse(index);
        }
        slice.record_ns(Latency::SendLateness, r.lateness_ns());
        if !r.succeeded() {
            slice.failed += u64::from(!r.cancelled);
            return;
        }
        slice.completed += 1;
        slice.output_tokens += r.output_tokens;
        if let (Some(t), Some(e)) = (r.ttft_ns(), r.e2el_ns()) {
            slice.record_ns(Latency::Ttft, t);
            slice.record_ns(Latency::E2el, e);
        }
        for itl in r.itls_ns() {
            slice.record_ns(Latency::Itl, itl);
        }
        for delay in r.chunks.iter().filter_map(|c| c.client_delay_ns) {
            slice.record_ns(Latency::ClientDelay, delay);
        }
    }

    /// The window ending `now`; `elapsed_s`, the phase's time so far, bounds its span
    /// (a phase two seconds old has a two-second window).
    pub(super) fn stats(&self, now: Instant, elapsed_s: f64) -> WindowStats {
        let current = self.slice_of(now);
        let first = current.saturating_sub(SLICES as u64 - 1);
        let live: Vec<&Slice> = self
            .slices
            .iter()
            .filter(|s| (first..=current).contains(&s.index))
            .collect();
        let slice_s = WINDOW.as_secs_f64() / SLICES as f64;
        let since_origin = now.saturating_duration_since(self.origin).as_secs_f64();
        let span_s = (since_origin - first as f64 * slice_s)
            .min(elapsed_s)
            .max(0.0);
        let sum = |f: fn(&Slice) -> u64| live.iter().map(|s| f(s)).sum::<u64>();
        let per_s = |n: u64| if span_s > 0.0 { n as f64 / span_s } else { 0.0 };
        let quantiles = |which: Latency| merged(&live, which);
        let (completed, output_tokens) = (sum(|s| s.completed), sum(|s| s.output_tokens));
        WindowStats {
            span_s,
            completed,
            failed: sum(|s| s.failed),
            output_tokens,
            request_throughput: per_s(completed),
            output_throughput: per_s(output_tokens),
            ttft: quantiles(Latency::Ttft),
            itl: quantiles(Latency::Itl),
            e2el: quantiles(Latency::E2el),
            send_lateness: quantiles(Latency::SendLateness),
            client_delay: quantiles(Latency::ClientDelay),
        }
    }
}

/// p50 and p99 of one latency over `slices`; `None` when none recorded it.
fn merged(slices: &[&Slice], which: Latency) -> Option<WindowQuantiles> {
    let mut all = histogram();
    for s in slices {
        // Same bounds on both sides: adding cannot fail.
        let _ = all.add(&s.latencies[which as usize]);
    }
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    (!all.is_empty()).then(|| WindowQuantiles {
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::record::Chunk;

    /// A success sent at 0 with chunks at `chunk_ms` (ms since its send).
    fn success(chunk_ms: &[u64]) -> RequestRecord {
        let mut r: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "scheduled_ns": 0, "sent_ns": 2_000_000,
            "chunks": [], "end_ns": 0, "input_tokens": 1, "output_tokens": chunk_ms.len(),
            "text_tokens": chunk_ms.len(),
        }))
        .expect("a valid record");
        r.chunks = chunk_ms
            .iter()
            .map(|ms| Chunk {
                t_ns: 2_000_000 + ms * 1_000_000,
                tokens: 1,
                client_delay_ns: Some(30_000),
            })
            .collect();
        r
    }

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= b * 0.01 + 1e-9
    }

    #[test]
    fn the_window_holds_the_last_seconds_only() {
        let t0 = Instant::now();
        let mut w = Window::new(t0);
        // A slow request early, fast ones 6 s later: only the fast ones are in the window.
        w.record(&success(&[900, 1000]), t0 + Duration::from_millis(100));
        for _ in 0..9 {
            w.record(&success(&[50, 60, 70]), t0 + Duration::from_millis(6_100));
        }
        let s = w.stats(t0 + Duration::from_millis(6_200), 6.2);
        assert_eq!((s.completed, s.failed, s.output_tokens), (9, 0, 27));
        let ttft = s.ttft.expect("TTFT in the window");
        assert!(
            near(ttft.p50_ms, 50.0) && near(ttft.p99_ms, 50.0),
            "{ttft:?}"
        );
        let itl = s.itl.expect("ITL in the window");
        assert!(near(itl.p99_ms, 10.0), "{itl:?}");
        assert!(near(s.e2el.expect("E2EL").p50_ms, 70.0));
        assert!(near(s.send_lateness.expect("lateness").p50_ms, 2.0));
        assert!(near(s.client_delay.expect("client delay").p99_ms, 0.03));
        // The window spans 4.5 to 5 s: 9 requests over it.
        assert!((4.5..=5.0).contains(&s.span_s), "{}", s.span_s);
        assert!(near(s.request_throughput, 9.0 / s.span_s));
    }

    #[test]
    fn a_young_phase_has_a_short_window_and_failures_count_apart() {
        let t0 = Instant::now();
        let mut w = Window::new(t0);
        let mut failed = success(&[]);
        failed.error = Some(crate::measuring::metrics::RequestError {
            kind: crate::measuring::metrics::ErrorKind::of_status(500),
            message: "boom".into(),
        });
        w.record(&failed, t0 + Duration::from_millis(300));
        w.record(&success(&[10]), t0 + Duration::from_millis(400));
        let s = w.stats(t0 + Duration::from_millis(500), 0.5);
        assert_eq!((s.completed, s.failed), (1, 1));
        assert!(
            near(s.span_s, 0.5) && near(s.request_throughput, 2.0),
            "{s:?}"
        );
        // One chunk: no gap between chunks.
        assert_eq!(s.itl, None);
        // A new phase starts empty.
        w.restart(t0 + Duration::from_secs(1));
        let s = w.stats(t0 + Duration::from_millis(1_100), 0.1);
        assert_eq!((s.completed, s.failed, s.ttft), (0, 0, None));
    }
}
