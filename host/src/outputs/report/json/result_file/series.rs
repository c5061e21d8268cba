//! result.json of a series of repeated runs (`--repeat N`, the series' own `--output`
//! folder; each run's result.json is in its `run-I` folder): the runs, what was run, and
//! per phase each headline figure's values by run, mean, sample standard deviation, 95 %
//! confidence interval of the mean, coefficient of variation and whether it is flagged.
//! `runner compare` reads the values back for Welch's test.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::measuring::metrics::catalogue::Better;
use crate::measuring::metrics::spread::CONFIDENCE;
use crate::outputs::report::series::{RunSeries, SeriesFigure};

/// The top-level key that marks a series.
pub const SERIES_KEY: &str = "series";

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
/// A series of repeated runs.
pub struct SeriesResult {
    pub series: SeriesInfo,
    pub runner: SeriesRunner,
    /// The measured phases, paired across runs by name.
    pub phases: Vec<SeriesPhaseResult>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SeriesInfo {
    /// Each run, in order.
    pub runs: Vec<SeriesRunResult>,
    /// Every run used the first run's seed (`--same-seed`).
    pub same_seed: bool,
    /// The confidence level of the intervals (0.95).
    pub confidence: f64,
    /// A figure whose coefficient of variation is above this fraction is `unstable`.
    pub cv_threshold: f64,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SeriesRunResult {
    pub run: u32,
    pub seed: u64,
    /// Its folder, relative to this file's (`run-1`); `null` without `--output`.
    pub dir: Option<String>,
    pub request_digest: String,
}

/// What was run: the first run's header (its seed is the series' base seed).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SeriesRunner {
    pub scenario: String,
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    pub request_digest: Option<String>,
    pub target: String,
    pub model: String,
    pub api: String,
    pub runner_version: String,
    pub wit_version: String,
    pub scenario_digest: String,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SeriesPhaseResult {
    pub phase: String,
    /// How many runs had this phase.
    pub runs: usize,
    pub figures: Vec<SeriesFigureResult>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SeriesFigureResult {
    /// As a run's result.json spells it (`mean_ttft_ms`), or `success_rate`.
    pub key: String,
    pub label: String,
    /// `higher` or `lower`: which way the figure is better.
    pub better: String,
    /// Each run's value, by run; `null` where that run had none.
    pub values: Vec<Option<f64>>,
    /// The runs with a value.
    pub n: usize,
    /// Over those runs; `null` with fewer than two.
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1).
    pub std: Option<f64>,
    /// The 95 % confidence interval of the mean (Student's t, n − 1 degrees of freedom).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Coefficient of variation, std / |mean|; `null` for a mean of 0.
    pub cv: Option<f64>,
    /// `cv` is above `cv_threshold`.
    pub unstable: bool,
}

fn figure(f: &SeriesFigure) -> SeriesFigureResult {
    let s = f.spread.as_ref();
    SeriesFigureResult {
        key: f.key.clone(),
        label: f.label.clone(),
        better: match f.better {
            Better::Higher => "higher",
            Better::Lower => "lower",
            Better::Neither => "neither",
        }
        .into(),
        values: f.values.clone(),
        n: f.values.iter().flatten().count(),
        mean: s.map(|s| s.mean),
        std: s.map(|s| s.std),
        ci_low: s.map(|s| s.ci_low),
        ci_high: s.map(|s| s.ci_high),
        cv: s.and_then(|s| s.cv),
        unstable: f.unstable,
    }
}

impl SeriesResult {
    pub fn of(series: &RunSeries) -> SeriesResult {
        let h = &series.header;
        SeriesResult {
            series: SeriesInfo {
                runs: series
                    .runs
                    .iter()
                    .map(|r| SeriesRunResult {
                        run: r.run,
                        seed: r.seed,
                        dir: r.dir.clone(),
                        request_digest: r.request_digest.clone(),
                    })
                    .collect(),
                same_seed: series.same_seed,
                confidence: CONFIDENCE,
                cv_threshold: series.cv_threshold,
            },
            runner: SeriesRunner {
                scenario: h.scenario.clone(),
                params: h.params.iter().cloned().collect(),
                seed: h.seed,
                request_digest: h.request_digest.clone(),
                target: h.target.clone(),
                model: h.model.clone(),
                api: h.api.clone(),
                runner_version: h.runner_version.clone(),
                wit_version: h.wit_version.clone(),
                scenario_digest: h.scenario_digest.clone(),
            },
            phases: series
                .phases()
                .iter()
                .map(|p| SeriesPhaseResult {
                    phase: p.name.clone(),
                    runs: p.runs,
                    figures: p.figures.iter().map(figure).collect(),
                })
                .collect(),
        }
    }
}
