//! One phase's server metrics, built sample by sample in constant memory: every scalar's
//! last, mean and maximum (what a scenario's `next_phase` sees), and for the reports the
//! known metrics in their own terms: a gauge's mean, maximum and time above its
//! threshold, a counter's delta and rate, a histogram's percentiles from the delta of its
//! buckets over the phase.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::exposition::{Exposition, Family, Kind};
use super::known::{self, Known, Meaning};
use crate::workloads::scenario::spec::ServerStat;

/// A scrape and when it was taken, seconds from the phase's start (negative: before it).
#[derive(Clone, Debug)]
pub struct Timed {
    pub t_s: f64,
    pub exposition: Arc<Exposition>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Running {
    n: u64,
    sum: f64,
    max: f64,
    last: f64,
    /// Seconds spent above the known threshold (gauges that have one).
    above_s: f64,
}

/// What the reports show of one phase's server metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct ServerPhase {
    /// Scrapes taken during the phase.
    pub samples: u64,
    /// Metrics endpoints whose scrapes were combined (one per target): every figure is
    /// their sum, KV cache use and hit rates their mean.
    #[serde(default = "one")]
    pub endpoints: usize,
    pub gauges: Vec<GaugeStat>,
    pub counters: Vec<CounterStat>,
    pub histograms: Vec<HistogramStat>,
    /// Prefix-cache hits / queries over the phase (tokens), 0 to 1, in each engine's
    /// own terms (`readings::prefix_cache_hit_rate`).
    pub prefix_cache_hit_rate: Option<f64>,
    /// Gauges that are averages since start or since the previous scrape, taken over
    /// the phase (`readings`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived: Vec<super::readings::DerivedStat>,
    /// With several endpoints, each one's server TTFT (`per_endpoint`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_endpoint: Vec<super::EndpointTtft>,
    /// Speculative decoding, when the server drafted in the phase (`spec_decode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<super::SpecDecode>,
    /// Energy over the phase, from `--power-metrics` exporters (not from these endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<super::energy::EnergyPhase>,
    /// Requests running and waiting and KV cache use at each scrape, for the charts
    /// (seconds from the phase start); not in result.json.
    #[serde(default, skip_serializing)]
    #[cfg_attr(test, schemars(skip))]
    pub series: Vec<ServerPoint>,
}

fn one() -> usize {
    1
}

/// A known gauge over the phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct GaugeStat {
    pub name: String,
    /// What it means, in words.
    pub meaning: String,
    pub last: f64,
    pub mean: f64,
    pub max: f64,
    /// Seconds the gauge spent above `threshold`, for gauges that have one.
    pub above: Option<Above>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct Above {
    pub threshold: f64,
    pub seconds: f64,
}

/// A known counter over the phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct CounterStat {
    pub name: String,
    pub meaning: String,
    /// Increase over the phase.
    pub delta: f64,
    /// Increase per second.
    pub rate: f64,
}

/// A known histogram over the phase (seconds histograms given in ms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct HistogramStat {
    pub name: String,
    pub meaning: String,
    /// Observations during the phase.
    pub count: f64,
    pub mean_ms: Option<f64>,
    /// Percentiles interpolated inside Prometheus buckets: approximate, each inside the
    /// bucket given beside it.
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The bucket each percentile lies in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_bucket: Option<Bucket>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_bucket: Option<Bucket>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_bucket: Option<Bucket>,
}

/// One Prometheus bucket, in the histogram's reported unit (ms for seconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct Bucket {
    /// Above this bound.
    pub above: f64,
    /// Up to this bound; `None` for the +Inf bucket.
    pub up_to: Option<f64>,
}

/// The main gauges at one scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerPoint {
    /// Seconds from the phase start.
    pub t_s: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_cache_use: Option<f64>,
    /// Prefix-cache hits over queries since the scrape before, 0 to 1 (`None`: no
    /// query in between, or the server counts none).
    #[serde(default)]
    pub prefix_cache_hit_rate: Option<f64>,
}

/// A phase's server metrics as its scrapes arrive.
#[derive(Default)]
pub struct ServerPhaseAccumulator {
    /// The last scrape before the phase started, else its first: counters count from it.
    baseline: Option<Timed>,
    latest: Option<Timed>,
    samples: u64,
    scalars: BTreeMap<String, Running>,
    series: Vec<ServerPoint>,
    /// With several endpoints, each one's baseline and latest scrape, and the targets it
    /// serves.
    base_each: Vec<Option<Arc<Exposition>>>,
    latest_each: Vec<Option<Arc<Exposition>>>,
    endpoint_targets: Vec<Vec<usize>>,
}

/// Most chart points kept per phase (a day at 1 s is 86,400): past it, every other point
/// is dropped and the rest kept at half the density.
const MAX_POINTS: usize = 20_000;

/// Most series (metric names) a phase keeps: a `/metrics` that invents new names at every
/// scrape would otherwise grow the run without bound. vLLM exposes about 60.
pub const MAX_SERIES: usize = 10_000;

/// Whether the run has said that [`MAX_SERIES`] was reached.
static SERIES_WARNED: AtomicBool = AtomicBool::new(false);

impl ServerPhaseAccumulator {
    /// A phase whose counters count from `baseline` (the run's latest scrape, if any).
    pub fn new(baseline: Option<Timed>) -> ServerPhaseAccumulator {
        ServerPhaseAccumulator {
            baseline,
            ..ServerPhaseAccumulator::default()
        }
    }

    /// Each endpoint's last scrape before the phase (`None`: none yet) and the targets
    /// each serves.
    pub fn per_endpoint(
        mut self,
        base: Vec<Option<Arc<Exposition>>>,
        targets: Vec<Vec<usize>>,
    ) -> ServerPhaseAccumulator {
        self.base_each = base;
        self.endpoint_targets = targets;
        self
    }

    /// Each endpoint's latest scrape; an endpoint first scraped in the phase counts from
    /// its first.
    pub fn add_each(&mut self, latest: Vec<Option<Arc<Exposition>>>) {
        self.base_each.resize(latest.len(), None);
        for (base, now) in self.base_each.iter_mut().zip(&latest) {
            if base.is_none() {
                base.clone_from(now);
            }
        }
        self.latest_each = latest;
    }

    pub fn add(&mut self, sample: Timed) {
        let dt = self.latest.as_ref().map(|l| (sample.t_s - l.t_s).max(0.0));
        for (name, family) in &sample.exposition.families {
            if family.kind == Kind::Histogram {
                continue;
            }
            if !self.scalars.contains_key(name) && !self.room_for_another() {
                continue;
            }
            let r = self.scalars.entry(name.clone()).or_insert(Running {
                max: f64::NEG_INFINITY,
                ..Running::default()
            });
            if let (Some(dt), Some(threshold)) = (dt, known::lookup(name).and_then(|k| k.threshold))
            {
                if r.n > 0 && r.last > threshold {
                    r.above_s += dt;
                }
            }
            r.n += 1;
            r.sum += family.value;
            r.max = r.max.max(family.value);
            r.last = family.value;
        }
        let before = self.latest.as_ref().or(self.baseline.as_ref());
        self.series.push(point(&sample, before));
        if self.series.len() > MAX_POINTS {
            let kept = self.series.iter().step_by(2).copied().collect();
            self.series = kept;
        }
        if self.baseline.is_none() {
            self.baseline = Some(sample.clone());
        }
        self.samples += 1;
        self.latest = Some(sample);
    }

    /// Whether a new series may be kept: past [`MAX_SERIES`] it is dropped, and the run
    /// says so once.
    fn room_for_another(&self) -> bool {
        if self.scalars.len() < MAX_SERIES {
            return true;
        }
        if !SERIES_WARNED.swap(true, Ordering::Relaxed) {
            crate::errln!(
                "warning: the server's /metrics has more than {MAX_SERIES} series; further new ones are not kept"
            );
        }
        false
    }

    /// Every scalar's last, mean and maximum over the phase, for `next_phase`.
    pub fn stats(&self) -> Vec<ServerStat> {
        self.scalars
            .iter()
            .map(|(name, r)| ServerStat {
                name: name.clone(),
                last: r.last,
                mean: r.sum / r.n.max(1) as f64,
                max: r.max,
            })
            .collect()
    }

    /// The reports' view of the phase; `None` when no scrape was taken in it.
    pub fn report(&self) -> Option<ServerPhase> {
        let latest = self.latest.as_ref()?;
        let base = self.baseline.as_ref().unwrap_or(latest);
        let span_s = latest.t_s - base.t_s;
        let mut phase = ServerPhase {
            samples: self.samples,
            endpoints: latest.exposition.endpoints,
            series: self.series.clone(),
            ..ServerPhase::default()
        };
        for k in known::KNOWN {
            let Some(now) = latest.exposition.families.get(k.name) else {
                continue;
            };
            let before = base.exposition.families.get(k.name);
            match now.kind {
                // A gauge that is an average is read over the phase (`derived`).
                Kind::Gauge if k.reading != known::Reading::AsExposed => {}
                Kind::Gauge => phase.gauges.extend(self.gauge(k)),
                Kind::Counter => phase.counters.push(counter(k, now, before, span_s)),
                Kind::Histogram => phase.histograms.push(histogram(k, now, before)),
            }
        }
        let increases: Vec<(&str, f64)> = (phase.counters.iter())
            .map(|c| (c.name.as_str(), c.delta))
            .collect();
        phase.prefix_cache_hit_rate = super::readings::prefix_cache_hit_rate(&increases);
        phase.derived = super::readings::derived(&base.exposition, &latest.exposition);
        phase.ttft_by_endpoint =
            super::per_endpoint::ttft(&self.base_each, &self.latest_each, &self.endpoint_targets);
        fill_means(&mut phase, &latest.exposition, &base.exposition);
        phase.spec_decode =
            super::spec_decode::of_phase(&base.exposition, &latest.exposition, |n| {
                self.scalars.get(n).map(|r| r.sum / r.n.max(1) as f64)
            });
        Some(phase)
    }

    fn gauge(&self, k: &Known) -> Option<GaugeStat> {
        let r = self.scalars.get(k.name)?;
        Some(GaugeStat {
            name: k.name.to_string(),
            meaning: k.words.to_string(),
            last: r.last,
            mean: r.sum / r.n.max(1) as f64,
            max: r.max,
            above: k.threshold.map(|threshold| Above {
                threshold,
                seconds: r.above_s,
            }),
        })
    }
}

fn point(sample: &Timed, before: Option<&Timed>) -> ServerPoint {
    let e = &sample.exposition;
    let hit_rate = before.and_then(|b| {
        let increases: Vec<(&str, f64)> = known::KNOWN
            .iter()
            .filter_map(|k| {
                let now = e.families.get(k.name).filter(|f| f.kind == Kind::Counter)?;
                let c = counter(k, now, b.exposition.families.get(k.name), 0.0);
                Some((k.name, c.delta))
            })
            .collect();
        super::readings::prefix_cache_hit_rate(&increases)
    });
    let first = |meaning| {
        known::first_of(meaning, |n| e.families.contains_key(n)).and_then(|k| e.value(k.name))
    };
    ServerPoint {
        t_s: sample.t_s,
        running: first(Meaning::Running),
        waiting: first(Meaning::Waiting),
        kv_cache_use: first(Meaning::KvCacheUse),
        prefix_cache_hit_rate: hit_rate,
    }
}

/// A counter's increase: a value below the baseline means the server restarted, and
/// counts from zero.
fn counter(k: &Known, now: &Family, before: Option<&Family>, span_s: f64) -> CounterStat {
    let base = before.map_or(0.0, |b| b.value);
    let delta = if now.value >= base {
        now.value - base
    } else {
        now.value
    };
    CounterStat {
        name: k.name.to_string(),
        meaning: k.words.to_string(),
        delta,
        rate: if span_s > 0.0 { delta / span_s } else { 0.0 },
    }
}

fn histogram(k: &Known, now: &Family, before: Option<&Family>) -> HistogramStat {
    let buckets: Vec<(f64, f64)> = now
        .buckets
        .iter()
        .map(|&(le, count)| {
            let was = before
                .and_then(|b| b.buckets.iter().find(|(l, _)| *l == le))
                .map_or(0.0, |b| b.1);
            (le, (count - was).max(0.0))
        })
        .collect();
    let count = buckets.last().map_or(0.0, |b| b.1);
    let scale = if k.name.ends_with("_seconds") || k.name.ends_with("_duration") {
        1000.0
    } else {
        1.0
    };
    let quantile = |q: f64| bucket_quantile(&buckets, q).map(|v| v * scale);
    let bucket = |q: f64| {
        bucket_of(&buckets, q).map(|(lo, hi)| Bucket {
            above: lo * scale,
            up_to: hi.is_finite().then_some(hi * scale),
        })
    };
    HistogramStat {
        name: k.name.to_string(),
        meaning: k.words.to_string(),
        count,
        mean_ms: None,
        p50_ms: quantile(0.5),
        p90_ms: quantile(0.9),
        p99_ms: quantile(0.99),
        p50_bucket: bucket(0.5),
        p90_bucket: bucket(0.9),
        p99_bucket: bucket(0.99),
    }
}

/// The bounds of the bucket the `q` quantile of cumulative `buckets` lies in; in the
/// +Inf bucket, the highest finite bound and infinity (shown as "above").
pub fn bucket_of(buckets: &[(f64, f64)], q: f64) -> Option<(f64, f64)> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = 0.0;
    for &(le, count) in buckets {
        if count >= rank {
            return Some((lower, le));
        }
        lower = le;
    }
    Some((lower, f64::INFINITY))
}

/// The `q` quantile of cumulative `buckets` by linear interpolation inside the bucket it
/// falls in, as Prometheus's `histogram_quantile` does; in the +Inf bucket, the highest
/// finite bound.
pub fn bucket_quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let inside = count - lower.1;
            let fraction = if inside > 0.0 {
                (rank - lower.1) / inside
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * fraction);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

/// Mean of each histogram whose `_sum` and `_count` counters were scraped.
fn fill_means(phase: &mut ServerPhase, latest: &Exposition, base: &Exposition) {
    for h in &mut phase.histograms {
        let delta = |suffix: &str| {
            let name = format!("{}{suffix}", h.name);
            let now = latest.value(&name)?;
            Some(now - base.value(&name).unwrap_or(0.0))
        };
        if let (Some(sum), Some(count)) = (delta("_sum"), delta("_count")) {
            let scale = if h.name.ends_with("_seconds") || h.name.ends_with("_duration") {
                1000.0
            } else {
                1.0
            };
            h.mean_ms = (count > 0.0).then(|| sum / count * scale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(t_s: f64, text: &str) -> Timed {
        Timed {
            t_s,
            exposition: Arc::new(Exposition::parse(text)),
        }
    }

    fn vllm(running: f64, kv: f64, hits: f64, queries: f64, ttft: [f64; 3]) -> String {
        format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {running}\n\
             # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc {kv}\n\
             vllm:prefix_cache_hits_total {hits}\nvllm:prefix_cache_queries_total {queries}\n\
             # TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"1.0\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n\
             vllm:time_to_first_token_seconds_count {}\nvllm:time_to_first_token_seconds_sum {}\n",
            ttft[0], ttft[1], ttft[1], ttft[1], ttft[2]
        )
    }

    #[test]
    fn a_phase_counts_from_its_baseline() {
        // Before the phase: 10 queries, 4 hits, 2 first tokens (0.1 s in all).
        let mut phase = ServerPhaseAccumulator::new(Some(scrape(
            -0.5,
            &vllm(0.0, 0.0, 4.0, 10.0, [2.0, 2.0, 0.1]),
        )));
        phase.add(scrape(0.5, &vllm(4.0, 0.5, 4.0, 10.0, [2.0, 2.0, 0.1])));
        phase.add(scrape(1.5, &vllm(8.0, 0.95, 34.0, 50.0, [2.0, 12.0, 5.1])));
        phase.add(scrape(2.5, &vllm(2.0, 0.2, 64.0, 110.0, [2.0, 12.0, 5.1])));
        let report = phase.report().expect("scraped");
        assert_eq!(report.samples, 3);
        // Between scrapes: no query, then 30 hits of 40, then 30 of 60.
        let hits: Vec<Option<f64>> = report
            .series
            .iter()
            .map(|p| p.prefix_cache_hit_rate)
            .collect();
        assert_eq!(hits, [None, Some(0.75), Some(0.5)]);
        let running = &report.gauges[0];
        assert_eq!(
            (
                running.name.as_str(),
                running.mean,
                running.max,
                running.last
            ),
            (RUNNING, 14.0 / 3.0, 8.0, 2.0)
        );
        // KV use was above 90 % from the scrape at 1.5 s to the next, at 2.5 s.
        let kv = &report.gauges[1];
        assert_eq!(
            kv.above,
            Some(Above {
                threshold: 0.9,
                seconds: 1.0
            })
        );
        // 60 hits of 100 queries since the baseline, over 3 s.
        assert_eq!(report.prefix_cache_hit_rate, Some(0.6));
        let queries = report
            .counters
            .iter()
            .find(|c| c.name.ends_with("queries_total"));
        assert_eq!(
            queries.map(|c| (c.delta, c.rate)),
            Some((100.0, 100.0 / 3.0))
        );
        // 10 first tokens in the phase, all in (0.1 s, 1 s], 5 s in all.
        let ttft = &report.histograms[0];
        assert_eq!(ttft.count, 10.0);
        let close = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-9);
        assert!(close(ttft.mean_ms, 500.0), "{:?}", ttft.mean_ms);
        assert!(close(ttft.p50_ms, 550.0), "{:?}", ttft.p50_ms);
        assert_eq!(report.series.len(), 3);
        assert_eq!(report.series[1].running, Some(8.0));
        let stats = phase.stats();
        let kv_stat = stats.iter().find(|s| s.name == "vllm:kv_cache_usage_perc");
        assert_eq!(kv_stat.map(|s| (s.last, s.max)), Some((0.2, 0.95)));
    }

    const RUNNING: &str = "vllm:num_requests_running";

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let buckets = [(1.0, 10.0), (2.0, 30.0), (f64::INFINITY, 40.0)];
        assert_eq!(bucket_quantile(&buckets, 0.5), Some(1.5));
        assert_eq!(bucket_quantile(&buckets, 0.125), Some(0.5));
        // In the +Inf bucket: the highest finite bound.
        assert_eq!(bucket_quantile(&buckets, 0.99), Some(2.0));
        assert_eq!(bucket_quantile(&[(1.0, 0.0)], 0.5), None);
        assert_eq!(bucket_quantile(&[], 0.5), None);
    }

    #[test]
    fn a_phase_without_scrapes_has_no_report() {
        assert!(ServerPhaseAccumulator::new(None).report().is_none());
    }
}
