//! What the HTML charts show, built in one pass over the request records: latency
//! distributions per phase (HDR histograms, so memory stays flat however long the run) and
//! time series on one timeline, the measured phases back to back.

use hdrhistogram::Histogram;

use crate::measuring::metrics::RequestRecord;

const NS_PER_S: f64 = 1e9;
const NS_PER_MS: f64 = 1e6;
/// Bins of a time series, about; the width is rounded to 1, 2 or 5 × 10^k seconds.
const TARGET_BINS: f64 = 240.0;
/// A record stamped absurdly late cannot grow a series past this.
const MAX_BINS: usize = 100_000;
/// Points of a drawn CDF, at most.
const CDF_POINTS: usize = 400;
/// Most per-tag CDF lines: past it the CDFs are drawn per phase only.
const MAX_TAG_LINES: usize = 16;
/// Most dots of the TTFT-by-request chart: past it every other one is dropped and only
/// every second request after is kept, so a long run's chart stays a few hundred KB.
const MAX_SCATTER: usize = 4000;

/// The latency distributions of one measured phase, in microseconds.
pub struct PhaseLatencies {
    pub name: String,
    pub ttft: Histogram<u64>,
    pub tpot: Histogram<u64>,
    pub itl: Histogram<u64>,
    pub e2el: Histogram<u64>,
}

/// One measured phase as the series need it.
pub struct PhaseSlot {
    pub name: String,
    /// Index of the phase in the run (records carry it).
    pub index: usize,
    pub duration_s: f64,
}

/// The charts' data for a whole run.
pub struct Series {
    pub phases: Vec<PhaseLatencies>,
    /// The latency distributions of each tag of each measured phase (named `tag`, or
    /// `phase: tag` when there are several phases), in order of first appearance; empty
    /// when no request had a tag or more than [`MAX_TAG_LINES`] did.
    pub tags: Vec<PhaseLatencies>,
    /// (position in `phases`, tag) → position in `tags`; `None` once past the limit.
    tag_slots: Option<std::collections::HashMap<(usize, String), usize>>,
    /// Width of a time bin, seconds.
    pub bin_s: f64,
    /// Start of each measured phase on the timeline, seconds, with its name.
    pub boundaries: Vec<(f64, String)>,
    /// Output tokens received per second, per bin.
    pub throughput: Vec<f64>,
    /// Requests that succeeded per second, by the bin of their end.
    pub completions: Vec<f64>,
    /// Each successful request's TTFT (ms) at its send time on the timeline (s): one in
    /// `scatter_stride` of them, at most [`MAX_SCATTER`].
    pub ttft_by_request: Vec<(f64, f64)>,
    scatter_stride: usize,
    scatter_seen: usize,
    /// Requests in flight, time-averaged over each bin.
    pub concurrency: Vec<f64>,
    /// Send lateness of the requests sent in each bin, ms: (mean, max); `None` when none.
    pub lateness: Vec<Option<(f64, f64)>>,
    lateness_acc: Vec<(f64, u64, f64)>,
    /// Run phase index → (position in `phases`, timeline offset in ns).
    slots: Vec<Option<(usize, f64)>>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is a valid precision")
}

/// 1, 2 or 5 × 10^k, the smallest at least `x`.
fn nice_step(x: f64) -> f64 {
    let x = x.max(1e-3);
    let base = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|s| *s >= x * (1.0 - 1e-9))
        .unwrap_or(10.0 * base)
}

impl Series {
    /// Empty series for the measured phases of a run (warm-ups are not given).
    pub fn new(phases: &[PhaseSlot]) -> Series {
        let total: f64 = phases.iter().map(|p| p.duration_s.max(0.0)).sum();
        let bin_s = nice_step(total / TARGET_BINS);
        let mut slots = Vec::new();
        let mut boundaries = Vec::new();
        let mut offset = 0.0;
        for (pos, p) in phases.iter().enumerate() {
            if slots.len() <= p.index {
                slots.resize(p.index + 1, None);
            }
            slots[p.index] = Some((pos, offset * NS_PER_S));
            boundaries.push((offset, p.name.clone()));
            offset += p.duration_s.max(0.0);
        }
        let bins = ((total / bin_s).ceil() as usize).clamp(1, MAX_BINS);
        Series {
            phases: phases
                .iter()
                .map(|p| PhaseLatencies {
                    name: p.name.clone(),
                    ttft: histogram(),
                    tpot: histogram(),
                    itl: histogram(),
                    e2el: histogram(),
                })
                .collect(),
            tags: Vec::new(),
            tag_slots: Some(std::collections::HashMap::new()),
            bin_s,
            boundaries,
            throughput: vec![0.0; bins],
            completions: vec![0.0; bins],
            ttft_by_request: Vec::new(),
            scatter_stride: 1,
            scatter_seen: 0,
            concurrency: vec![0.0; bins],
            lateness: Vec::new(),
            lateness_acc: vec![(0.0, 0, 0.0); bins],
            slots,
        }
    }

    /// Bin of a timeline instant (ns), growing the series up to [`MAX_BINS`].
    fn bin(&mut self, t_ns: f64) -> Option<usize> {
        let b = (t_ns / NS_PER_S / self.bin_s).floor();
        if !(0.0..MAX_BINS as f64).contains(&b) {
            return None;
        }
        let b = b as usize;
        if b >= self.throughput.len() {
            self.throughput.resize(b + 1, 0.0);
            self.completions.resize(b + 1, 0.0);
            self.concurrency.resize(b + 1, 0.0);
            self.lateness_acc.resize(b + 1, (0.0, 0, 0.0));
        }
        Some(b)
    }

    /// Adds one record; records of phases not given (warm-ups) are left out.
    pub fn add(&mut self, r: &RequestRecord) {
        let Some(&Some((pos, offset))) = self.slots.get(r.phase) else {
            return;
        };
        if r.warmup {
            return;
        }
        if r.succeeded() {
            record_latencies(&mut self.phases[pos], r);
            if let Some(t) = self.tag_of(pos, r) {
                record_latencies(t, r);
            }
            for c in &r.chunks {
                if let Some(b) = self.bin(offset + c.t_ns as f64) {
                    self.throughput[b] += f64::from(c.tokens) / self.bin_s;
                }
            }
            if let Some(b) = self.bin(offset + r.end_ns as f64) {
                self.completions[b] += 1.0 / self.bin_s;
            }
            self.add_dot(offset, r);
        }
        // Requests in flight: the share of each bin the request's [sent, end) covers.
        let (start, end) = (offset + r.sent_ns as f64, offset + r.end_ns as f64);
        if end > start {
            let bin_ns = self.bin_s * NS_PER_S;
            if let (Some(first), Some(last)) = (self.bin(start), self.bin(end)) {
                for b in first..=last {
                    let lo = start.max(b as f64 * bin_ns);
                    let hi = end.min((b + 1) as f64 * bin_ns);
                    if hi > lo {
                        self.concurrency[b] += (hi - lo) / bin_ns;
                    }
                }
            }
        }
        if let Some(b) = self.bin(start) {
            let late = r.lateness_ns() as f64 / NS_PER_MS;
            let acc = &mut self.lateness_acc[b];
            acc.0 += late;
            acc.1 += 1;
            acc.2 = acc.2.max(late);
        }
    }

    /// One dot of the TTFT-by-request chart, if `r` is one the stride keeps.
    fn add_dot(&mut self, offset: f64, r: &RequestRecord) {
        let Some(ttft) = r.ttft_ns() else {
            return;
        };
        self.scatter_seen += 1;
        if !(self.scatter_seen - 1).is_multiple_of(self.scatter_stride) {
            return;
        }
        let sent_s = (offset + r.sent_ns as f64) / NS_PER_S;
        self.ttft_by_request.push((sent_s, ttft as f64 / NS_PER_MS));
        if self.ttft_by_request.len() >= MAX_SCATTER {
            let kept = self.ttft_by_request.iter().step_by(2).copied().collect();
            self.ttft_by_request = kept;
            self.scatter_stride *= 2;
        }
    }

    /// The per-tag distributions `r` adds to, if it has a tag and the tags are not past
    /// their limit (then every per-tag line is dropped).
    fn tag_of(&mut self, pos: usize, r: &RequestRecord) -> Option<&mut PhaseLatencies> {
        let tag = r.tag.as_ref()?;
        let slots = self.tag_slots.as_mut()?;
        let key = (pos, tag.clone());
        let index = match slots.get(&key) {
            Some(&i) => i,
            None if slots.len() >= MAX_TAG_LINES => {
                self.tag_slots = None;
                self.tags.clear();
                return None;
            }
            None => {
                let name = if self.phases.len() > 1 {
                    format!("{}: {tag}", self.phases[pos].name)
                } else {
                    tag.clone()
                };
                self.tags.push(PhaseLatencies {
                    name,
                    ttft: histogram(),
                    tpot: histogram(),
                    itl: histogram(),
                    e2el: histogram(),
                });
                slots.insert(key, self.tags.len() - 1);
                self.tags.len() - 1
            }
        };
        self.tags.get_mut(index)
    }

    /// Ends the pass: turns the lateness sums into (mean, max) per bin.
    pub fn finish(mut self) -> Series {
        self.lateness = self
            .lateness_acc
            .iter()
            .map(|&(sum, n, max)| (n > 0).then(|| (sum / n as f64, max)))
            .collect();
        self
    }

    /// Midpoint of bin `b` on the timeline, seconds.
    pub fn time_of(&self, b: usize) -> f64 {
        (b as f64 + 0.5) * self.bin_s
    }

    /// Length of the timeline, seconds.
    pub fn span_s(&self) -> f64 {
        self.throughput.len() as f64 * self.bin_s
    }
}

/// Adds a successful request's latencies to `p`, in µs.
fn record_latencies(p: &mut PhaseLatencies, r: &RequestRecord) {
    let us = |ns: f64| (ns / 1e3).round().max(0.0) as u64;
    if let Some(t) = r.ttft_ns() {
        let _ = p.ttft.record(us(t as f64));
    }
    if let Some(t) = r.tpot_ns() {
        let _ = p.tpot.record(us(t));
    }
    if let Some(t) = r.e2el_ns() {
        let _ = p.e2el.record(us(t as f64));
    }
    for gap in r.itls_ns() {
        let _ = p.itl.record(us(gap as f64));
    }
}

/// The empirical CDF of a histogram in µs as (ms, fraction ≤) points, at most
/// [`CDF_POINTS`]; empty when nothing was recorded.
pub fn cdf(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let total = h.len();
    if total == 0 {
        return Vec::new();
    }
    let mut points = Vec::new();
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        let ms = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
        points.push((ms.min(h.max() as f64 / 1e3), seen as f64 / total as f64));
    }
    if points.len() > CDF_POINTS {
        let step = points.len().div_ceil(CDF_POINTS);
        let last = *points.last().expect("not empty");
        points = points.into_iter().step_by(step).collect();
        if points.last() != Some(&last) {
            points.push(last);
        }
    }
    // Steps, as an empirical CDF is: flat up to each value, then up at it, from zero
    // probability at the smallest value. Lines between the points would claim values
    // between them that no request had.
    let mut steps = Vec::with_capacity(points.len() * 2);
    let mut below = 0.0;
    for (x, p) in points {
        steps.push((x, below));
        steps.push((x, p));
        below = p;
    }
    steps
}

/// The value at quantile `q` (0 to 1) of a CDF's histogram, ms: where its chart's x axis
/// may end.
pub fn quantile_ms(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.highest_equivalent(h.value_at_quantile(q)) as f64 / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::Chunk;

    fn record(phase: usize, sent_ms: u64, chunks_ms: &[u64]) -> RequestRecord {
        let ms = 1_000_000;
        RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase,
            index: 0,
            tag: None,
            scheduled_ns: 0,
            sent_ns: sent_ms * ms,
            first_byte_ns: None,
            chunks: chunks_ms
                .iter()
                .map(|&t| Chunk {
                    t_ns: t * ms,
                    tokens: 2,
                    client_delay_ns: None,
                })
                .collect(),
            end_ns: chunks_ms.last().copied().unwrap_or(sent_ms) * ms,
            input_tokens: 1,
            output_tokens: 2 * chunks_ms.len() as u64,
            usage_output_tokens: None,
            text_tokens: 0,
            warmup: false,
            http_status: Some(200),
            error: None,
            server_timings: None,
            reached: Default::default(),
            retried: false,
            send_write_ns: None,
            cancelled: false,
            target: None,
            answer: Default::default(),
            session: Default::default(),
        }
    }

    #[test]
    fn each_tag_gets_its_own_distributions_up_to_a_limit() {
        let slot = |n: &str| PhaseSlot {
            name: n.into(),
            index: 0,
            duration_s: 1.0,
        };
        let tagged = |tag: &str, first_ms: u64| RequestRecord {
            tag: Some(tag.into()),
            ..record(0, 0, &[first_ms, first_ms + 10])
        };
        let mut s = Series::new(&[slot("p")]);
        s.add(&tagged("short", 20));
        s.add(&tagged("long", 300));
        s.add(&tagged("short", 30));
        let names: Vec<&str> = s.tags.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["short", "long"]);
        assert_eq!((s.tags[0].ttft.len(), s.tags[1].ttft.len()), (2, 1));
        assert_eq!(s.phases[0].ttft.len(), 3);
        // Past the limit of lines, no tag is drawn on its own.
        for i in 0..=MAX_TAG_LINES {
            s.add(&tagged(&format!("t{i}"), 50));
        }
        assert!(s.tags.is_empty());
        assert_eq!(s.phases[0].ttft.len(), 3 + MAX_TAG_LINES as u64 + 1);
    }

    #[test]
    fn the_ttft_dots_stay_bounded_and_evenly_spread() {
        let slot = PhaseSlot {
            name: "p".into(),
            index: 0,
            duration_s: 10.0,
        };
        let mut s = Series::new(&[slot]);
        for i in 0..3 * MAX_SCATTER as u64 {
            s.add(&record(0, i % 1000, &[i % 1000 + 20]));
        }
        let s = s.finish();
        assert!(s.ttft_by_request.len() < MAX_SCATTER);
        assert_eq!(s.scatter_stride, 4);
        assert!(s.ttft_by_request.iter().all(|&(_, ttft)| ttft == 20.0));
        // Every request ended inside the 10 s: the completions add up to all of them.
        let done: f64 = s.completions.iter().sum::<f64>() * s.bin_s;
        assert!((done - 3.0 * MAX_SCATTER as f64).abs() < 1e-6, "{done}");
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(0.0042), 0.005);
        assert_eq!(nice_step(0.01), 0.01);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(7.0), 10.0);
    }

    #[test]
    fn phases_lie_back_to_back_and_warmups_are_left_out() {
        // Phase 0 is a warm-up (not given); phases 1 and 2 last 1.2 s each.
        let slots = [
            PhaseSlot {
                name: "a".into(),
                index: 1,
                duration_s: 1.2,
            },
            PhaseSlot {
                name: "b".into(),
                index: 2,
                duration_s: 1.2,
            },
        ];
        let mut s = Series::new(&slots);
        assert_eq!(s.bin_s, 0.01);
        assert_eq!(s.boundaries, vec![(0.0, "a".into()), (1.2, "b".into())]);
        s.add(&record(0, 0, &[100]));
        s.add(&record(1, 0, &[100, 200]));
        s.add(&record(2, 0, &[100]));
        let s = s.finish();
        assert_eq!(s.phases[0].ttft.len(), 1);
        assert_eq!(s.phases[0].itl.len(), 1);
        assert_eq!(s.phases[1].e2el.len(), 1);
        // 2 tokens in a 10 ms bin: 200 tok/s, at 0.1 s and 0.2 s, then 1.3 s for phase b.
        let at = |t: f64| s.throughput[(t / s.bin_s).floor() as usize];
        assert!((at(0.105) - 200.0).abs() < 1e-9);
        assert!((at(0.205) - 200.0).abs() < 1e-9);
        assert!((at(1.305) - 200.0).abs() < 1e-9);
        assert_eq!(s.throughput.iter().sum::<f64>(), 600.0);
        // One request in flight over [0, 200 ms) of phase a and [1.2 s, 1.3 s) of b.
        let busy: f64 = s.concurrency.iter().sum::<f64>() * s.bin_s;
        assert!((busy - 0.3).abs() < 1e-9, "{busy}");
        assert_eq!(s.lateness[0], Some((0.0, 0.0)));
        assert_eq!(s.lateness[1], None);
    }

    #[test]
    fn cdf_rises_to_one() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let c = cdf(&h);
        assert!(c.len() <= 2 * (CDF_POINTS + 1));
        assert_eq!(c[0].1, 0.0);
        // Steps: each value twice, flat then up.
        assert!(c.chunks(2).all(|s| s[0].0 == s[1].0 && s[0].1 <= s[1].1));
        assert!(c.windows(2).skip(1).step_by(2).all(|w| w[0].1 == w[1].1));
        assert_eq!(c.last().unwrap().1, 1.0);
        assert!((c.last().unwrap().0 - 1000.0).abs() < 1.0);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(cdf(&histogram()).is_empty());
        let p999 = quantile_ms(&h, 0.999).expect("a quantile");
        assert!((p999 - 999.0).abs() < 1.0, "{p999}");
        assert_eq!(quantile_ms(&histogram(), 0.999), None);
    }
}
