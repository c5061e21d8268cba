//! The server's own view of a run: its Prometheus metrics, scraped on their own thread
//! while the run goes on, kept per phase, given to scenarios and written to the reports.
//!
//! - `fetch`: one bounded HTTP scrape; `exposition`: its text parsed and summed over label
//!   sets (the `prometheus-parse` crate).
//! - `known`: the metrics of vLLM, SGLang, llama.cpp and TGI the reports name in words.
//! - `phase`: one phase's summary, built scrape by scrape; `per_endpoint`: what each
//!   endpoint's own histograms say of it (with several targets).
//! - `readings`: averages read over a phase, and each engine's prefix-cache hit rate.
//! - `samples_file`: server_metrics.jsonl, every scrape as it is taken.
//! - `spec_decode`: a phase's speculative decoding, from the acceptance counters.
//! - `energy`: each phase's energy from `--power-metrics` exporters (DCGM, AMD), kept apart
//!   from the endpoints.
//! - `scraper`: the thread that ties them together.

pub mod energy;
mod exposition;
mod fetch;
pub mod known;
mod per_endpoint;
mod phase;
pub mod readings;
mod samples_file;
mod scraper;
mod spec_decode;

use std::path::PathBuf;
use std::time::Duration;

pub use exposition::{Exposition, Family, Kind};
pub use per_endpoint::EndpointTtft;
pub use phase::{
    bucket_quantile, Above, Bucket, CounterStat, GaugeStat, HistogramStat, ServerPhase, ServerPoint,
};
pub use scraper::{PhaseMetrics, Scraper};
pub use spec_decode::{SpecDecode, SpecDecodeSource};

/// The file every scrape is written to, in `--output`'s directory.
pub const SAMPLES_FILE: &str = "server_metrics.jsonl";

/// Default time between scrapes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest time between scrapes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// One metrics endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsEndpoint {
    /// The full URL of the metrics endpoint.
    pub url: String,
    /// Sent as a bearer token, as to the API (a proxy in front of the server may ask for it).
    pub api_key: Option<String>,
}

/// What to scrape and how often.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// Every target's endpoint (or the one `--server-metrics` names), in target order;
    /// their scrapes are combined into one (`Exposition::combine`).
    pub endpoints: Vec<MetricsEndpoint>,
    pub interval: Duration,
    /// Where each scrape is written (server_metrics.jsonl), if anywhere.
    pub samples_file: Option<PathBuf>,
    /// `--power-metrics`: energy or power exporters, read apart from the endpoints.
    pub power: Vec<String>,
    /// The targets (indices) each endpoint serves, in endpoint order: with each target's
    /// own /metrics, the targets whose URL gives it; with one `--server-metrics` URL, all.
    pub endpoint_targets: Vec<Vec<usize>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerMetricsError {
    #[error("--server-metrics: `{0}` is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("cannot start the server metrics scraper: {0}")]
    Client(String),
    #[error("cannot create {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
}

/// `--server-metrics-interval`: a duration of at least [`MIN_INTERVAL`].
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let secs = crate::workloads::scenario::params::parse_duration_secs(s)
        .ok_or_else(|| format!("expected a duration like 1s or 250ms, got `{s}`"))?;
    let d = Duration::from_secs_f64(secs.min(86_400.0));
    if d < MIN_INTERVAL {
        return Err(format!("the shortest interval is 100ms, got `{s}`"));
    }
    Ok(d)
}

impl ScrapeConfig {
    /// What a run scrapes: `flag` (`--server-metrics`: a URL, `off`, or each target's
    /// `/metrics` when not given, each endpoint once); `None` when off. The API key goes
    /// only to an endpoint on one of the targets, never to another host's /metrics.
    pub fn for_run(
        flag: Option<&str>,
        targets: &[&str],
        api_key: Option<&str>,
        interval: Duration,
        output: Option<&std::path::Path>,
    ) -> Option<ScrapeConfig> {
        let mut urls: Vec<String> = match flag.map(str::trim) {
            Some(off) if off.eq_ignore_ascii_case("off") => return None,
            Some(url) => vec![url.to_string()],
            None => targets.iter().map(|t| default_url(t)).collect(),
        };
        let mut seen = std::collections::HashSet::new();
        urls.retain(|u| seen.insert(u.clone()));
        let on_a_target = |url: &str| {
            targets
                .iter()
                .any(|t| url.starts_with(&format!("{}/", server_root(t))))
        };
        let endpoint_targets = urls
            .iter()
            .map(|url| {
                (0..targets.len())
                    .filter(|&t| flag.is_some() || default_url(targets[t]) == *url)
                    .collect()
            })
            .collect();
        let endpoints = urls
            .into_iter()
            .map(|url| MetricsEndpoint {
                api_key: api_key.filter(|_| on_a_target(&url)).map(str::to_string),
                url,
            })
            .collect();
        Some(ScrapeConfig {
            endpoints,
            interval,
            samples_file: output.map(|d| d.join(SAMPLES_FILE)),
            power: Vec::new(),
            endpoint_targets,
        })
    }

    /// Nothing to scrape (`--server-metrics off`) at `interval`.
    pub fn none(interval: Duration) -> ScrapeConfig {
        ScrapeConfig {
            endpoints: Vec::new(),
            interval,
            samples_file: None,
            power: Vec::new(),
            endpoint_targets: Vec::new(),
        }
    }
}

/// The metrics URL of a target: `<target>/metrics`, a trailing `/v1` left out (vLLM,
/// SGLang, llama.cpp and TGI all serve it at the root).
pub fn default_url(target: &str) -> String {
    format!("{}/metrics", server_root(target))
}

/// A target's URL without a trailing `/` or `/v1`.
fn server_root(target: &str) -> &str {
    let trimmed = target.trim().trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_url_is_at_the_servers_root() {
        assert_eq!(default_url("http://h:8000"), "http://h:8000/metrics");
        assert_eq!(default_url("http://h:8000/v1/"), "http://h:8000/metrics");
        assert_eq!(default_url("https://h/x/v1"), "https://h/x/metrics");
    }

    fn endpoints(flag: Option<&str>, targets: &[&str]) -> Option<Vec<MetricsEndpoint>> {
        ScrapeConfig::for_run(flag, targets, Some("k"), MIN_INTERVAL, None).map(|c| c.endpoints)
    }

    fn endpoint(url: &str, api_key: Option<&str>) -> MetricsEndpoint {
        MetricsEndpoint {
            url: url.into(),
            api_key: api_key.map(str::to_string),
        }
    }

    #[test]
    fn every_target_is_scraped_once_and_only_targets_get_the_key() {
        assert_eq!(endpoints(Some("OFF"), &["http://h"]), None);
        let own = endpoints(Some("http://m:9/x"), &["http://h"]);
        assert_eq!(own, Some(vec![endpoint("http://m:9/x", None)]));
        let on_target = endpoints(Some("http://h:1/m"), &["http://h:1/v1/"]);
        assert_eq!(on_target, Some(vec![endpoint("http://h:1/m", Some("k"))]));
        let next_door = endpoints(Some("http://h:10/m"), &["http://h:1"]);
        assert_eq!(next_door, Some(vec![endpoint("http://h:10/m", None)]));
        let targets = ["http://a:1/v1", "http://b:2", "http://a:1"];
        let config = ScrapeConfig::for_run(None, &targets, None, MIN_INTERVAL, None);
        assert_eq!(
            config.map(|c| c.endpoint_targets),
            Some(vec![vec![0, 2], vec![1]])
        );
        let fleet = endpoints(None, &targets);
        assert_eq!(
            fleet,
            Some(vec![
                endpoint("http://a:1/metrics", Some("k")),
                endpoint("http://b:2/metrics", Some("k")),
            ])
        );
    }

    #[test]
    fn intervals_below_100ms_are_refused() {
        assert_eq!(parse_interval("100ms"), Ok(MIN_INTERVAL));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert!(parse_interval("99ms").is_err());
        assert!(parse_interval("fast").is_err());
    }
}
