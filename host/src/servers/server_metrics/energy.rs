//! Energy per phase from power exporters (`--power-metrics URL`, repeatable), scraped on the
//! server metrics' ticks but kept apart from them: their figures never count as a server
//! endpoint nor mix with an engine's gauges.
//!
//! Each exporter is read on its own: its energy counter's increase over the phase where it
//! has one (a counter that went down restarted, and counts from zero), else its power gauge
//! integrated over the scrape times by trapezoids. Exporters' joules add up (one per node).
//! An exporter's families are already summed over their label sets (one per GPU).
//!
//! Names and units: NVIDIA dcgm-exporter `etc/default-counters.csv`
//! (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, counter, mJ since boot; `DCGM_FI_DEV_POWER_USAGE`,
//! gauge, W); AMD device-metrics-exporter `pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go`
//! (`gpu_energy_consumed`, typed gauge but accumulated, µJ; `gpu_power_usage` and, MI3xx,
//! `gpu_package_power`, W).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::exposition::Exposition;

/// Energy counters and the joules in one of their units, in the order they are looked for.
pub const COUNTERS: [(&str, f64); 2] = [
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),
    ("gpu_energy_consumed", 1e-6),
];

/// Power gauges in watts, in the order they are looked for.
pub const GAUGES: [&str; 3] = [
    "DCGM_FI_DEV_POWER_USAGE",
    "gpu_power_usage",
    "gpu_package_power",
];

/// `--power-metrics`: an http:// or https:// URL.
pub fn parse_url(s: &str) -> Result<String, String> {
    let s = s.trim();
    match reqwest::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(s.to_string()),
        _ => Err(format!("`{s}` is not an http:// or https:// URL")),
    }
}

/// How a phase's joules were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The energy counters' increase.
    Counter,
    /// Power gauges integrated over the scrape times (trapezoids).
    PowerGauge,
    /// Some exporters by their counter, the others by their gauge.
    Mixed,
}

impl EnergySource {
    pub fn words(self) -> &'static str {
        match self {
            EnergySource::Counter => "energy counter",
            EnergySource::PowerGauge => "power gauge integrated over the scrapes",
            EnergySource::Mixed => "energy counters, and power gauges integrated where none",
        }
    }
}

/// One phase's energy, as the reports show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct EnergyPhase {
    /// Power exporters given (`--power-metrics`).
    pub exporters: usize,
    /// Their scrapes taken during the phase (all exporters together).
    pub scrapes: u64,
    /// How the joules were found; `None` when they were not.
    pub source: Option<EnergySource>,
    /// Energy used over the phase, joules (all exporters).
    pub joules: Option<f64>,
    /// Seconds the energy spans: from the phase's start (each exporter's reading there
    /// interpolated between its scrapes around it) to its last scrape (the longest of the
    /// exporters').
    pub seconds: Option<f64>,
    /// Mean power, watts: each exporter's joules over its seconds, summed.
    pub mean_watts: Option<f64>,
    /// The phase's output tokens: the client's count of its successful requests.
    pub output_tokens: Option<u64>,
    pub joules_per_token: Option<f64>,
    pub tokens_per_joule: Option<f64>,
    /// What was missing, one line each (an exporter without an energy counter, or with
    /// neither a counter nor a power gauge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

impl EnergyPhase {
    /// Sets the phase's output tokens and the figures per token.
    pub fn count_tokens(&mut self, output_tokens: u64) {
        self.output_tokens = Some(output_tokens);
        self.joules_per_token = self
            .joules
            .filter(|_| output_tokens > 0)
            .map(|j| j / output_tokens as f64);
        self.tokens_per_joule = self
            .joules
            .filter(|j| *j > 0.0)
            .map(|j| output_tokens as f64 / j);
    }
}

/// One exporter's figures at one scrape.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    joules: Option<f64>,
    watts: Option<f64>,
}

impl Reading {
    /// The figures of scrape `e`; a negative one (no meter reads below zero) is left out.
    fn of(at: Instant, e: &Exposition) -> Reading {
        let value = |name: &str| e.value(name).filter(|v| *v >= 0.0);
        Reading {
            at,
            joules: COUNTERS
                .iter()
                .find_map(|(name, unit)| value(name).map(|v| v * unit)),
            watts: GAUGES.iter().find_map(|name| value(name)),
        }
    }

    /// The reading at `at`, between `self` and the later `next`, by linear interpolation
    /// (a counter that went down keeps its value: it restarted in between).
    fn at(self, at: Instant, next: &Reading) -> Reading {
        let span = next.at.saturating_duration_since(self.at).as_secs_f64();
        let t = if span > 0.0 {
            (at.saturating_duration_since(self.at).as_secs_f64() / span).min(1.0)
        } else {
            0.0
        };
        let between = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some(a + (b - a) * t),
            _ => a,
        };
        Reading {
            at,
            joules: between(self.joules, next.joules),
            watts: match (self.watts, next.watts) {
                (Some(a), Some(b)) => Some(a + (b - a) * t),
                (a, _) => a,
            },
        }
    }
}

/// One exporter over a phase.
#[derive(Clone, Debug, Default)]
struct Span {
    /// The reading steps count from: the last one before the phase, then each in it.
    prev: Option<Reading>,
    /// When the phase began, until its first step: a reading from before it is moved to
    /// it, so the idle time before the phase does not count.
    began: Option<Instant>,
    /// Seconds into the phase of the first reading, when none came before it: the energy
    /// before it is not counted.
    late_s: Option<f64>,
    steps: u64,
    seconds: f64,
    counter_j: f64,
    /// Steps whose ends both had the counter (or the gauge).
    counter_steps: u64,
    gauge_j: f64,
    gauge_steps: u64,
}

impl Span {
    fn step(&mut self, r: Reading) {
        if let Some(mut p) = self.prev {
            if let Some(began) = self.began.take().filter(|b| p.at < *b && *b < r.at) {
                p = p.at(began, &r);
            }
            let dt = r.at.saturating_duration_since(p.at).as_secs_f64();
            self.steps += 1;
            self.seconds += dt;
            if let (Some(was), Some(now)) = (p.joules, r.joules) {
                // Below the last value: the exporter (or the GPU) restarted, from zero.
                self.counter_j += if now >= was { now - was } else { now.max(0.0) };
                self.counter_steps += 1;
            }
            if let (Some(a), Some(b)) = (p.watts, r.watts) {
                self.gauge_j += (a + b) / 2.0 * dt;
                self.gauge_steps += 1;
            }
        }
        self.prev = Some(r);
    }

    /// Whether the counter spans the phase without moving: a GPU always draws power, so
    /// the exporter did not read it again (dcgm-exporter reads every 30 s unless started
    /// with `-c MS`, `pkg/cmd/app.go`).
    fn counter_held_still(&self) -> bool {
        self.steps > 0 && self.counter_steps == self.steps && self.counter_j == 0.0
    }

    /// Joules and how they were found: every step by the counter (which moved), else every
    /// step by the gauge; `None` when neither spans the phase.
    fn joules(&self) -> Option<(f64, EnergySource)> {
        if self.steps == 0 {
            None
        } else if self.counter_steps == self.steps && !self.counter_held_still() {
            Some((self.counter_j, EnergySource::Counter))
        } else if self.gauge_steps == self.steps {
            Some((self.gauge_j, EnergySource::PowerGauge))
        } else {
            None
        }
    }

    /// What the report says of this exporter over the phase, if anything.
    fn note(&self, track: &Track) -> Option<String> {
        let url = &track.url;
        if self.counter_held_still() {
            let then = match self.joules() {
                Some(_) => "its power gauge integrated instead",
                None => "no energy from it",
            };
            return Some(format!(
                "{url}: the energy counter did not move over the phase's {:.1} s (an exporter that reads the GPU seldom: dcgm-exporter's -c is 30000 ms by default); {then}",
                self.seconds
            ));
        }
        match self.joules() {
            Some((_, EnergySource::PowerGauge)) => track.lacks.clone(),
            Some(_) => None,
            None if self.steps == 0 => Some(format!(
                "{url}: fewer than two scrapes over the phase, no energy from it"
            )),
            None => Some(track.lacks.clone().unwrap_or_else(|| {
                format!("{url}: its energy counter and power gauge came and went over the phase, no energy from it")
            })),
        }
    }
}

/// One exporter: its URL (credentials left out) and latest reading.
struct Track {
    url: String,
    latest: Option<Reading>,
    /// Whether what it lacks was said on stderr.
    told: bool,
    /// What it lacks, when it lacks anything.
    lacks: Option<String>,
}

/// Every exporter's readings, and the running phase's spans.
#[derive(Default)]
pub struct Meter {
    tracks: Vec<Track>,
    /// The running phase: when it began, its scrapes, each exporter's span.
    phase: Option<(Instant, u64, Vec<Span>)>,
}

impl Meter {
    /// A meter of the exporters at `urls`.
    pub fn new(urls: &[String]) -> Meter {
        Meter {
            tracks: urls
                .iter()
                .map(|u| Track {
                    url: crate::safeguards::redact::string(u.clone()),
                    latest: None,
                    told: false,
                    lacks: None,
                })
                .collect(),
            phase: None,
        }
    }

    /// A phase starts now: each exporter's energy counts from its latest reading.
    pub fn begin_phase(&mut self) {
        self.begin_phase_at(Instant::now());
    }

    /// A phase starts at `began`: each exporter's energy counts from its reading at that
    /// time, interpolated between its latest reading and the next one.
    fn begin_phase_at(&mut self, began: Instant) {
        let spans = self
            .tracks
            .iter()
            .map(|t| Span {
                prev: t.latest,
                began: Some(began),
                ..Span::default()
            })
            .collect();
        self.phase = Some((began, 0, spans));
    }

    /// Whether any exporter is read: a scrape at a phase's start then bounds its energy.
    pub fn is_on(&self) -> bool {
        !self.tracks.is_empty()
    }

    /// Exporter `i`'s scrape, taken at `at`.
    pub fn add(&mut self, i: usize, at: Instant, e: &Exposition) {
        let Some(track) = self.tracks.get_mut(i) else {
            return;
        };
        let r = Reading::of(at, e);
        track.lacks = lacks(&track.url, &r);
        if let (Some(line), false) = (&track.lacks, track.told) {
            track.told = true;
            crate::errln!("warning: {line}");
        }
        track.latest = Some(r);
        if let Some((began, scrapes, spans)) = &mut self.phase {
            *scrapes += 1;
            if let Some(span) = spans.get_mut(i) {
                if span.prev.is_none() {
                    span.late_s = Some(at.saturating_duration_since(*began).as_secs_f64());
                }
                span.step(r);
            }
        }
    }

    /// The running phase ends: its energy (`None` without exporters or a phase).
    pub fn end_phase(&mut self) -> Option<EnergyPhase> {
        let (_, scrapes, spans) = self.phase.take()?;
        if self.tracks.is_empty() {
            return None;
        }
        let mut phase = EnergyPhase {
            exporters: self.tracks.len(),
            scrapes,
            source: None,
            joules: None,
            seconds: None,
            mean_watts: None,
            output_tokens: None,
            joules_per_token: None,
            tokens_per_joule: None,
            missing: Vec::new(),
        };
        let mut found = Vec::new();
        for (track, span) in self.tracks.iter().zip(&spans) {
            if let Some((j, how)) = span.joules() {
                found.push((j, how, span.seconds));
            }
            phase.missing.extend(span.note(track));
            if let (Some(late), Some(_)) = (span.late_s, span.joules()) {
                phase.missing.push(format!(
                    "{}: no scrape before the phase began, so its first {late:.2} s are not counted",
                    track.url
                ));
            }
        }
        // Joules only when every exporter gave them: a part would read as the whole.
        if !found.is_empty() && found.len() == spans.len() {
            let joules = found.iter().map(|f| f.0).sum();
            phase.joules = Some(joules);
            phase.seconds = found.iter().map(|f| f.2).reduce(f64::max);
            phase.mean_watts = Some(found.iter().filter(|f| f.2 > 0.0).map(|f| f.0 / f.2).sum());
            let all = |how| found.iter().all(|f| f.1 == how);
            phase.source = Some(if all(EnergySource::Counter) {
                EnergySource::Counter
            } else if all(EnergySource::PowerGauge) {
                EnergySource::PowerGauge
            } else {
                EnergySource::Mixed
            });
        }
        Some(phase)
    }
}

/// What an exporter's reading lacks, in one line (`None`: it has an energy counter).
fn lacks(url: &str, r: &Reading) -> Option<String> {
    let counters = COUNTERS.map(|c| c.0).join(", ");
    match (r.joules, r.watts) {
        (Some(_), _) => None,
        (None, Some(_)) => Some(format!(
            "{url} has no energy counter ({counters}): its energy is the power gauge integrated over the scrapes"
        )),
        (None, None) => Some(format!(
            "{url} has no energy counter ({counters}) and no power gauge ({}): no energy from it",
            GAUGES.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn dcgm(mj: Option<f64>, w: Option<f64>) -> Exposition {
        let mut text = String::new();
        for gpu in ["0", "1"] {
            if let Some(mj) = mj {
                text += &format!("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"{gpu}\"}} {mj}\n");
            }
            if let Some(w) = w {
                text += &format!("DCGM_FI_DEV_POWER_USAGE{{gpu=\"{gpu}\"}} {w}\n");
            }
        }
        Exposition::parse(&text)
    }

    /// A meter of one exporter fed `scrapes` (seconds, exposition); the phase begins
    /// with the first.
    fn phase_of(scrapes: &[(f64, Exposition)]) -> EnergyPhase {
        let t0 = Instant::now();
        let mut meter = Meter::new(&["http://dcgm:9400/metrics".to_string()]);
        for (k, (t, e)) in scrapes.iter().enumerate() {
            let at = t0 + Duration::from_secs_f64(*t);
            meter.add(0, at, e);
            if k == 0 {
                meter.begin_phase_at(at);
            }
        }
        meter.end_phase().expect("a phase")
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn the_counters_increase_is_summed_over_gpus_and_given_in_joules() {
        // Two GPUs at 1,000 then 61,000 mJ each: 120 J over 2 s.
        let mut p = phase_of(&[
            (0.0, dcgm(Some(1e3), Some(1.0))),
            (1.0, dcgm(Some(3e4), None)),
            (2.0, dcgm(Some(6.1e4), Some(1.0))),
        ]);
        assert_eq!(p.source, Some(EnergySource::Counter));
        assert!(close(p.joules, 120.0), "{p:?}");
        assert!(close(p.seconds, 2.0));
        assert!(close(p.mean_watts, 60.0));
        assert_eq!(p.scrapes, 2);
        p.count_tokens(600);
        assert!(close(p.joules_per_token, 0.2));
        assert!(close(p.tokens_per_joule, 5.0));
        assert!(p.missing.is_empty());
    }

    #[test]
    fn a_counter_that_goes_down_restarted_and_counts_from_zero() {
        // 10 J, then a reset to 2 J (2 J since it), then 5 J more: 17 J (two GPUs each).
        let p = phase_of(&[
            (0.0, dcgm(Some(1e4), None)),
            (1.0, dcgm(Some(2e4), None)),
            (2.0, dcgm(Some(2e3), None)),
            (3.0, dcgm(Some(7e3), None)),
        ]);
        assert!(close(p.joules, 34.0), "{p:?}");
    }

    #[test]
    fn with_only_a_power_gauge_the_watts_are_integrated_and_it_says_so() {
        // 100 W, 300 W, 300 W per GPU at 0, 1, 3 s: trapezoids 200 + 600 J, two GPUs.
        let mut p = phase_of(&[
            (0.0, dcgm(None, Some(100.0))),
            (1.0, dcgm(None, Some(300.0))),
            (3.0, dcgm(None, Some(300.0))),
        ]);
        assert_eq!(p.source, Some(EnergySource::PowerGauge));
        assert!(close(p.joules, 1600.0), "{p:?}");
        assert!(close(p.mean_watts, 1600.0 / 3.0));
        assert_eq!(p.missing.len(), 1);
        assert!(
            p.missing[0].contains("no energy counter"),
            "{:?}",
            p.missing
        );
        assert!(p.missing[0].contains("integrated"), "{:?}", p.missing);
        p.count_tokens(0);
        assert_eq!(p.joules_per_token, None);
        assert_eq!(p.tokens_per_joule, Some(0.0));
    }

    #[test]
    fn an_exporter_without_either_says_so_and_gives_no_figures() {
        let vllm = Exposition::parse("vllm:num_requests_running 3\n");
        let mut p = phase_of(&[(0.0, vllm.clone()), (1.0, vllm)]);
        assert_eq!((p.source, p.joules, p.mean_watts), (None, None, None));
        assert_eq!(p.missing.len(), 1);
        assert!(
            p.missing[0].contains("and no power gauge"),
            "{:?}",
            p.missing
        );
        p.count_tokens(100);
        assert_eq!((p.joules_per_token, p.tokens_per_joule), (None, None));
    }

    #[test]
    fn amd_microjoules_and_a_counter_lost_midway() {
        let amd = |uj: Option<f64>, w: f64| {
            let mut t =
                format!("# TYPE gpu_power_usage gauge\ngpu_power_usage{{gpu_id=\"0\"}} {w}\n");
            if let Some(uj) = uj {
                t += &format!(
                    "# TYPE gpu_energy_consumed gauge\ngpu_energy_consumed{{gpu_id=\"0\"}} {uj}\n"
                );
            }
            Exposition::parse(&t)
        };
        let p = phase_of(&[(0.0, amd(Some(0.0), 10.0)), (2.0, amd(Some(5e7), 40.0))]);
        assert!(close(p.joules, 50.0), "{p:?}");
        // The counter is missing at one scrape: the gauge spans the phase instead.
        let p = phase_of(&[
            (0.0, amd(Some(0.0), 10.0)),
            (2.0, amd(None, 30.0)),
            (3.0, amd(Some(9e7), 30.0)),
        ]);
        assert_eq!(p.source, Some(EnergySource::PowerGauge));
        assert!(close(p.joules, 40.0 + 30.0), "{p:?}");
    }

    #[test]
    fn several_exporters_add_up_and_a_silent_one_leaves_no_total() {
        let t0 = Instant::now();
        let urls = ["http://a/m".to_string(), "http://b/m".to_string()];
        let mut meter = Meter::new(&urls);
        meter.add(0, t0, &dcgm(Some(0.0), None));
        meter.add(1, t0, &dcgm(None, Some(50.0)));
        meter.begin_phase_at(t0);
        let at = t0 + Duration::from_secs(2);
        meter.add(0, at, &dcgm(Some(1e4), None));
        meter.add(1, at, &dcgm(None, Some(50.0)));
        let p = meter.end_phase().expect("a phase");
        // 20 J by the counters, 200 J by the gauges.
        assert_eq!(p.source, Some(EnergySource::Mixed));
        assert!(close(p.joules, 220.0), "{p:?}");
        assert!(close(p.mean_watts, 110.0));
        meter.begin_phase_at(at);
        meter.add(0, at + Duration::from_secs(1), &dcgm(Some(2e4), None));
        let p = meter.end_phase().expect("a phase");
        assert_eq!(p.joules, None);
        assert!(
            p.missing.iter().any(|m| m.contains("http://b/m")),
            "{:?}",
            p.missing
        );
        assert!(Meter::new(&[]).end_phase().is_none());
    }

    #[test]
    fn a_counter_that_held_still_is_not_read_as_no_energy() {
        // dcgm-exporter read the GPU before the phase and not since: the gauge instead.
        let p = phase_of(&[
            (0.0, dcgm(Some(5e6), Some(100.0))),
            (1.0, dcgm(Some(5e6), Some(100.0))),
            (2.0, dcgm(Some(5e6), Some(100.0))),
        ]);
        assert_eq!(p.source, Some(EnergySource::PowerGauge));
        assert!(close(p.joules, 400.0), "{p:?}");
        assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
        assert!(p.missing[0].contains("did not move"), "{:?}", p.missing);
        assert!(
            p.missing[0].contains("gauge integrated instead"),
            "{:?}",
            p.missing
        );
        let p = phase_of(&[(0.0, dcgm(Some(5e6), None)), (1.0, dcgm(Some(5e6), None))]);
        assert_eq!((p.source, p.joules), (None, None));
        assert!(
            p.missing[0].contains("no energy from it"),
            "{:?}",
            p.missing
        );
    }

    #[test]
    fn a_phase_without_an_earlier_scrape_says_what_it_left_out() {
        let t0 = Instant::now();
        let mut meter = Meter::new(&["http://dcgm/metrics".to_string()]);
        meter.begin_phase_at(t0);
        meter.add(0, t0 + Duration::from_millis(400), &dcgm(Some(0.0), None));
        meter.add(0, t0 + Duration::from_millis(1400), &dcgm(Some(1e5), None));
        let p = meter.end_phase().expect("a phase");
        assert!(close(p.joules, 200.0), "{p:?}");
        assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
        assert!(p.missing[0].contains("first 0.4"), "{:?}", p.missing);
    }

    #[test]
    fn negative_readings_are_left_out() {
        let p = phase_of(&[
            (0.0, dcgm(Some(-5.0), Some(-1.0))),
            (1.0, dcgm(Some(-1.0), Some(-1.0))),
        ]);
        assert_eq!((p.source, p.joules), (None, None), "{p:?}");
        assert!(
            p.missing[0].contains("and no power gauge"),
            "{:?}",
            p.missing
        );
    }

    #[test]
    fn the_energy_counts_from_the_phases_own_start() {
        // A reading 1 s before the phase (two GPUs at 0 J, 100 W), the next 1 s into it
        // (300 J and 200 W each): the phase has the second half, 150 J and 150 W each.
        let t0 = Instant::now();
        let mut meter = Meter::new(&["http://dcgm/metrics".to_string()]);
        meter.add(0, t0, &dcgm(Some(0.0), Some(100.0)));
        meter.begin_phase_at(t0 + Duration::from_secs(1));
        meter.add(
            0,
            t0 + Duration::from_secs(2),
            &dcgm(Some(3e5), Some(200.0)),
        );
        let p = meter.end_phase().expect("a phase");
        assert!(close(p.joules, 300.0), "{p:?}");
        assert!(close(p.seconds, 1.0), "{p:?}");
        // The gauge alone: the trapezoid from 150 W (interpolated) to 200 W, two GPUs.
        let mut meter = Meter::new(&["http://dcgm/metrics".to_string()]);
        meter.add(0, t0, &dcgm(None, Some(100.0)));
        meter.begin_phase_at(t0 + Duration::from_secs(1));
        meter.add(0, t0 + Duration::from_secs(2), &dcgm(None, Some(200.0)));
        let p = meter.end_phase().expect("a phase");
        assert!(close(p.joules, 350.0), "{p:?}");
        // A counter that restarted in between keeps its earlier value: counts from zero.
        let mut meter = Meter::new(&["http://dcgm/metrics".to_string()]);
        meter.add(0, t0, &dcgm(Some(9e5), None));
        meter.begin_phase_at(t0 + Duration::from_secs(1));
        meter.add(0, t0 + Duration::from_secs(2), &dcgm(Some(1e4), None));
        let p = meter.end_phase().expect("a phase");
        assert!(close(p.joules, 20.0), "{p:?}");
    }

    #[test]
    fn urls_must_be_http() {
        assert!(parse_url("http://h:9400/metrics").is_ok());
        assert!(parse_url("ftp://h").is_err());
        assert!(parse_url("h:9400").is_err());
    }
}
