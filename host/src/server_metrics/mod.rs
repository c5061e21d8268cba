//! The server's own view of a run: its Prometheus metrics, scraped on their own thread
//! while the run goes on, kept per phase, given to scenarios and written to the reports.
//!
//! - `fetch`: one bounded HTTP scrape; `exposition`: its text parsed and summed over label
//!   sets (the `prometheus-parse` crate).
//! - `known`: the metrics of vLLM, SGLang, llama.cpp and TGI the reports name in words.
//! - `phase`: one phase's summary, built scrape by scrape.
//! - `samples_file`: server_metrics.jsonl, every scrape as it is taken.
//! - `scraper`: the thread that ties them together.

mod exposition;
mod fetch;
pub mod known;
mod phase;
mod samples_file;
mod scraper;

use std::path::PathBuf;
use std::time::Duration;

pub use exposition::{Exposition, Family, Kind};
pub use phase::{
    bucket_quantile, Above, CounterStat, GaugeStat, HistogramStat, ServerPhase, ServerPoint,
};
pub use scraper::{PhaseMetrics, Scraper};

/// The file every scrape is written to, in `--output`'s directory.
pub const SAMPLES_FILE: &str = "server_metrics.jsonl";

/// Default time between scrapes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest time between scrapes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// What to scrape and how often.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// The full URL of the metrics endpoint.
    pub url: String,
    pub interval: Duration,
    /// Sent as a bearer token, as to the API (a proxy in front of the server may ask for it).
    pub api_key: Option<String>,
    /// Where each scrape is written (server_metrics.jsonl), if anywhere.
    pub samples_file: Option<PathBuf>,
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
    let secs = crate::scenario::params::parse_duration_secs(s)
        .ok_or_else(|| format!("expected a duration like 1s or 250ms, got `{s}`"))?;
    let d = Duration::from_secs_f64(secs.min(86_400.0));
    if d < MIN_INTERVAL {
        return Err(format!("the shortest interval is 100ms, got `{s}`"));
    }
    Ok(d)
}

impl ScrapeConfig {
    /// What a run scrapes: `flag` (`--server-metrics`: a URL, `off`, or the target's
    /// `/metrics` when not given); `None` when off.
    pub fn for_run(
        flag: Option<&str>,
        target: &str,
        interval: Duration,
        output: Option<&std::path::Path>,
    ) -> Option<ScrapeConfig> {
        let url = match flag.map(str::trim) {
            Some(off) if off.eq_ignore_ascii_case("off") => return None,
            Some(url) => url.to_string(),
            None => default_url(target),
        };
        Some(ScrapeConfig {
            url,
            interval,
            api_key: None,
            samples_file: output.map(|d| d.join(SAMPLES_FILE)),
        })
    }
}

/// The metrics URL of a target: `<target>/metrics`, a trailing `/v1` left out (vLLM,
/// SGLang, llama.cpp and TGI all serve it at the root).
pub fn default_url(target: &str) -> String {
    let trimmed = target.trim().trim_end_matches('/');
    let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    format!("{base}/metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_url_is_at_the_servers_root() {
        assert_eq!(default_url("http://h:8000"), "http://h:8000/metrics");
        assert_eq!(default_url("http://h:8000/v1/"), "http://h:8000/metrics");
        assert_eq!(default_url("https://h/x/v1"), "https://h/x/metrics");
        let off = ScrapeConfig::for_run(Some("OFF"), "http://h", MIN_INTERVAL, None);
        assert!(off.is_none());
        let own = ScrapeConfig::for_run(Some("http://m:9/x"), "http://h", MIN_INTERVAL, None);
        assert_eq!(own.map(|c| c.url).as_deref(), Some("http://m:9/x"));
    }

    #[test]
    fn intervals_below_100ms_are_refused() {
        assert_eq!(parse_interval("100ms"), Ok(MIN_INTERVAL));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert!(parse_interval("99ms").is_err());
        assert!(parse_interval("fast").is_err());
    }
}
