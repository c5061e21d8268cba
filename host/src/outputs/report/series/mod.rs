//! A series of repeated runs (`--repeat N`): each run's headline figures (those of the
//! vLLM block: request and token throughput, mean, median and the reported percentiles
//! of TTFT, TPOT, ITL and E2EL, and the success rate), phases paired across runs by name,
//! and each figure's spread over the runs (`metrics::spread`) with a flag where its
//! coefficient of variation is above the threshold.

pub mod render;

use super::run_report::RunReport;
use super::RunHeader;
use crate::measuring::metrics::catalogue::{self, Better, MetricName, E2EL, ITL, TPOT, TTFT};
use crate::measuring::metrics::spread::Spread;
use crate::measuring::metrics::PhaseSummary;

/// The most runs one series may have. The interval narrows as 1/√N: at 100 runs it is a
/// tenth of one run's spread, and every run keeps a folder of its own.
pub const MAX_RUNS: u32 = 100;

/// One headline figure of one run's phase.
#[derive(Clone, Debug, PartialEq)]
pub struct FigureValue {
    /// As result.json spells it (`mean_ttft_ms`, `request_throughput`, `success_rate`).
    pub key: String,
    pub label: String,
    pub better: Better,
    /// `None` when the phase has no value (no request succeeded).
    pub value: Option<f64>,
}

/// One run of the series, reduced to its headline figures.
#[derive(Clone, Debug)]
pub struct RunFigures {
    /// From 1.
    pub run: u32,
    pub seed: u64,
    /// Its own `--output` folder (`run-3`), relative to the series' folder.
    pub dir: Option<String>,
    pub request_digest: String,
    /// Each measured phase's name and figures, in run order.
    pub phases: Vec<(String, Vec<FigureValue>)>,
}

/// The headline figures of a phase, in the order the vLLM block shows them.
pub fn headline(s: &PhaseSummary) -> Vec<FigureValue> {
    let scalar = |m: &catalogue::Scalar| FigureValue {
        key: m.key.to_string(),
        label: m.label.to_string(),
        better: m.better,
        value: (m.value)(s),
    };
    let mut out = vec![
        scalar(&catalogue::REQUEST_THROUGHPUT),
        scalar(&catalogue::OUTPUT_THROUGHPUT),
        scalar(&catalogue::TOTAL_TOKEN_THROUGHPUT),
    ];
    let finished = s.completed + s.failed;
    out.push(FigureValue {
        key: "success_rate".into(),
        label: "Success rate".into(),
        better: Better::Higher,
        value: (finished > 0).then(|| s.completed as f64 / finished as f64),
    });
    let mut stats = vec![("mean", "Mean"), ("median", "Median")];
    let words: Vec<(String, String)> = s
        .percentiles
        .iter()
        .map(|&p| {
            let word = catalogue::percentile_word(p);
            (format!("p{word}"), format!("P{word}"))
        })
        .collect();
    stats.extend(words.iter().map(|(k, l)| (k.as_str(), l.as_str())));
    for latency in [&TTFT, &TPOT, &ITL, &E2EL] {
        for (stat, word) in &stats {
            let key = catalogue::latency_key(stat, latency);
            out.push(FigureValue {
                value: MetricName::parse(&key).and_then(|m| m.value(s)),
                label: format!("{word} {} (ms)", latency.short),
                better: Better::Lower,
                key,
            });
        }
    }
    out
}

impl RunFigures {
    /// Run `run`'s headline figures, from its report.
    pub fn of(report: &RunReport, run: u32, dir: Option<String>) -> RunFigures {
        let phases = report
            .phases
            .iter()
            .filter(|p| !p.warmup)
            .map(|p| (p.summary.name.clone(), headline(&p.summary)))
            .collect();
        RunFigures {
            run,
            seed: report.header.seed,
            dir,
            request_digest: report.request_digest().to_string(),
            phases: unique_names(phases),
        }
    }
}

/// A phase name a run gives twice pairs by its occurrence: the second is `name #2`.
fn unique_names(phases: Vec<(String, Vec<FigureValue>)>) -> Vec<(String, Vec<FigureValue>)> {
    let mut seen: Vec<String> = Vec::new();
    phases
        .into_iter()
        .map(|(name, figures)| {
            let n = seen.iter().filter(|s| **s == name).count();
            seen.push(name.clone());
            let name = if n == 0 {
                name
            } else {
                format!("{name} #{}", n + 1)
            };
            (name, figures)
        })
        .collect()
}

/// The whole series: what was run (the first run's header), and every run's figures.
#[derive(Clone, Debug)]
pub struct RunSeries {
    pub header: RunHeader,
    /// Every run's seed was the first's (`--same-seed`).
    pub same_seed: bool,
    /// A figure whose coefficient of variation is above this fraction is flagged.
    pub cv_threshold: f64,
    pub runs: Vec<RunFigures>,
}

/// One figure of one phase over the runs.
#[derive(Clone, Debug)]
pub struct SeriesFigure {
    pub key: String,
    pub label: String,
    pub better: Better,
    /// Each run's value, by run (`None`: that run's phase had none, or lacked the phase).
    pub values: Vec<Option<f64>>,
    /// Over the runs that have a value; `None` with fewer than two.
    pub spread: Option<Spread>,
    /// Its coefficient of variation is above the series' threshold.
    pub unstable: bool,
}

/// One phase of the series.
#[derive(Clone, Debug)]
pub struct SeriesPhase {
    pub name: String,
    /// How many runs had the phase.
    pub runs: usize,
    pub figures: Vec<SeriesFigure>,
}

impl RunSeries {
    /// The phases, paired across runs by name (in order of first appearance), each
    /// figure's values and spread.
    pub fn phases(&self) -> Vec<SeriesPhase> {
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in self.runs.iter().flat_map(|r| &r.phases) {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        names.into_iter().map(|name| self.phase(name)).collect()
    }

    fn phase(&self, name: &str) -> SeriesPhase {
        fn of_run<'a>(r: &'a RunFigures, name: &str) -> Option<&'a Vec<FigureValue>> {
            r.phases.iter().find(|(n, _)| n == name).map(|(_, f)| f)
        }
        let mut figures: Vec<SeriesFigure> = Vec::new();
        for f in self.runs.iter().filter_map(|r| of_run(r, name)).flatten() {
            if figures.iter().any(|s| s.key == f.key) {
                continue;
            }
            let values: Vec<Option<f64>> = self
                .runs
                .iter()
                .map(|r| of_run(r, name)?.iter().find(|g| g.key == f.key)?.value)
                .collect();
            let present: Vec<f64> = values.iter().flatten().copied().collect();
            let spread = Spread::of(&present);
            figures.push(SeriesFigure {
                key: f.key.clone(),
                label: f.label.clone(),
                better: f.better,
                unstable: spread
                    .as_ref()
                    .is_some_and(|s| s.unstable(self.cv_threshold)),
                values,
                spread,
            });
        }
        SeriesPhase {
            name: name.to_string(),
            runs: self
                .runs
                .iter()
                .filter(|r| of_run(r, name).is_some())
                .count(),
            figures,
        }
    }
}

/// The seed of run `run` (from 1) of a series whose base seed is `base`: the first run
/// keeps the base seed (it is the run `--seed base` alone would make), each later one
/// takes the next output of SplitMix64 from it, so the series is reproducible from the
/// base seed and two series from neighbouring base seeds share no run. Its top 31 bits
/// only: a scenario's `seed` parameter is an integer of its language (Rhai's i64, a
/// 32-bit one elsewhere), and short seeds read well in a report.
pub fn run_seed(base: u64, run: u32) -> u64 {
    if run <= 1 {
        return base;
    }
    // SplitMix64 (Steele, Lea and Flood 2014; the seeding generator of xoshiro): the
    // state advances by the golden-ratio constant, the output is its mixed state.
    let z = base.wrapping_add(0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(u64::from(run - 1)));
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) >> 33
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: u32, phases: &[(&str, f64)]) -> RunFigures {
        RunFigures {
            run: n,
            seed: run_seed(7, n),
            dir: Some(format!("run-{n}")),
            request_digest: String::new(),
            phases: unique_names(
                phases
                    .iter()
                    .map(|(name, ttft)| {
                        let f = FigureValue {
                            key: "mean_ttft_ms".into(),
                            label: "Mean TTFT (ms)".into(),
                            better: Better::Lower,
                            value: Some(*ttft),
                        };
                        (name.to_string(), vec![f])
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn phases_pair_by_name_and_a_missing_one_counts_fewer_runs() {
        let series = RunSeries {
            header: RunHeader::default(),
            same_seed: false,
            cv_threshold: 0.1,
            runs: vec![
                run(1, &[("a", 100.0), ("b", 10.0)]),
                run(2, &[("a", 102.0), ("b", 20.0), ("b", 1.0)]),
                run(3, &[("a", 101.0)]),
            ],
        };
        let phases = series.phases();
        let names: Vec<&str> = phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "b #2"]);
        let a = &phases[0].figures[0];
        assert_eq!(phases[0].runs, 3);
        assert!((a.spread.as_ref().unwrap().mean - 101.0).abs() < 1e-9);
        assert!(!a.unstable);
        let b = &phases[1].figures[0];
        assert_eq!(b.values, [Some(10.0), Some(20.0), None]);
        assert!(b.unstable, "CV 47 % > 10 %");
        assert!(phases[2].figures[0].spread.is_none(), "one run: no spread");
    }

    #[test]
    fn seeds_are_reproducible_distinct_and_start_at_the_base() {
        assert_eq!(run_seed(42, 1), 42);
        let seeds: Vec<u64> = (1..=100).map(|r| run_seed(42, r)).collect();
        let mut unique = seeds.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 100);
        assert_eq!(
            seeds,
            (1..=100).map(|r| run_seed(42, r)).collect::<Vec<_>>()
        );
        assert!(
            !seeds[1..].contains(&43),
            "neighbouring base seeds share no run"
        );
    }
}
