//! The scraper: its own OS thread with a one-thread tokio runtime, so fetching and parsing
//! never share a worker with the dispatcher or the requests. It scrapes every interval,
//! writes each scrape to server_metrics.jsonl, keeps the latest values for a scenario's
//! `stop` and adds each scrape to the running phase's summary.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::exposition::Exposition;
use super::fetch::{FetchError, Fetcher};
use super::phase::{PhaseAccumulator, ServerPhase, Timed};
use super::samples_file::SamplesFile;
use super::{ScrapeConfig, ServerMetricsError};
use crate::scenario::spec::{ServerStat, ServerValues};

/// A scrape's time limit: an interval, but at least 1 s and at most 5 s.
fn scrape_timeout(interval: Duration) -> Duration {
    interval.clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// One phase's server metrics: every scalar for `next_phase`, and the reports' view.
#[derive(Clone, Debug, Default)]
pub struct PhaseMetrics {
    pub stats: Vec<ServerStat>,
    pub report: Option<ServerPhase>,
}

#[derive(Default)]
struct State {
    /// The latest scrape and when it was taken.
    latest: Option<(Instant, Arc<Exposition>)>,
    /// Its scalar values (what a `stop` function sees).
    values: ServerValues,
    /// The running phase: its index, start and summary so far.
    phase: Option<(usize, Instant, PhaseAccumulator)>,
}

/// A running scraper; dropping it stops the thread.
pub struct Scraper {
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scraper {
    /// Starts scraping `config.url` now.
    pub fn start(config: ScrapeConfig) -> Result<Scraper, ServerMetricsError> {
        let url = reqwest::Url::parse(&config.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| ServerMetricsError::BadUrl(crate::redact::string(config.url.clone())))?;
        let fetcher = Fetcher::new(url, config.api_key.clone(), scrape_timeout(config.interval))
            .map_err(|e| ServerMetricsError::Client(e.to_string()))?;
        let file = match &config.samples_file {
            Some(path) => {
                Some(
                    SamplesFile::create(path).map_err(|source| ServerMetricsError::File {
                        path: path.display().to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ServerMetricsError::Client(e.to_string()))?;
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = oneshot::channel();
        let job = Job {
            fetcher,
            file,
            config,
            state: state.clone(),
            began: Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name("runner-scrape".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = job.run() => {}
                        _ = stopped => {}
                    }
                })
            })
            .map_err(|e| ServerMetricsError::Client(e.to_string()))?;
        Ok(Scraper {
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every metric's value at the latest scrape.
    pub fn latest_values(&self) -> ServerValues {
        self.lock().values.clone()
    }

    /// Phase `index` starts now; its counters count from the latest scrape.
    pub fn begin_phase(&self, index: usize) {
        let now = Instant::now();
        let mut state = self.lock();
        let baseline = state.latest.as_ref().map(|(at, e)| Timed {
            t_s: -now.saturating_duration_since(*at).as_secs_f64(),
            exposition: e.clone(),
        });
        state.phase = Some((index, now, PhaseAccumulator::new(baseline)));
    }

    /// The running phase ends now: what its scrapes showed.
    pub fn end_phase(&self) -> PhaseMetrics {
        let Some((_, _, phase)) = self.lock().phase.take() else {
            return PhaseMetrics::default();
        };
        PhaseMetrics {
            stats: phase.stats(),
            report: phase.report(),
        }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Job {
    fetcher: Fetcher,
    file: Option<SamplesFile>,
    config: ScrapeConfig,
    state: Arc<Mutex<State>>,
    began: Instant,
}

impl Job {
    /// Scrapes until stopped. A first scrape that fails for good (no such endpoint, not
    /// Prometheus text) is one warning line and the end of scraping; any other failure
    /// (a later one, or a first one that timed out: a server whose few HTTP threads are
    /// all taken by the run's connections, as llama.cpp's, answers later) is one warning
    /// line for the whole run, and scraping goes on.
    async fn run(mut self) {
        let mut ticks = tokio::time::interval(self.config.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut scraped = 0u64;
        let mut warned = false;
        loop {
            ticks.tick().await;
            let at = Instant::now();
            match self.fetcher.fetch().await {
                Ok(exposition) => {
                    scraped += 1;
                    self.keep(at, exposition);
                }
                Err(e) if scraped == 0 && !e.is_transient() => {
                    self.warn(&e, "the run goes on without server metrics");
                    return;
                }
                Err(e) if !warned => {
                    warned = true;
                    self.warn(&e, "scraping goes on (this warning is not repeated)");
                }
                Err(_) => {}
            }
        }
    }

    fn warn(&self, e: &FetchError, what_next: &str) {
        crate::errln!(
            "warning: cannot read server metrics from {}: {e}; {what_next}",
            crate::redact::string(self.config.url.clone())
        );
    }

    fn keep(&mut self, at: Instant, exposition: Exposition) {
        let exposition = Arc::new(exposition);
        let phase = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.values = exposition.values();
            state.latest = Some((at, exposition.clone()));
            match &mut state.phase {
                Some((index, start, acc)) => {
                    acc.add(Timed {
                        t_s: at.saturating_duration_since(*start).as_secs_f64(),
                        exposition: exposition.clone(),
                    });
                    Some(*index)
                }
                None => None,
            }
        };
        if let Some(file) = &mut self.file {
            let t_s = at.saturating_duration_since(self.began).as_secs_f64();
            if let Err(e) = file.write(t_s, phase, &exposition) {
                crate::errln!("warning: cannot write server_metrics.jsonl: {e}; it stops here");
                self.file = None;
            }
        }
    }
}
