//! The scraper: its own OS thread with a one-thread tokio runtime, so fetching and parsing
//! never share a worker with the dispatcher or the requests. It scrapes every endpoint
//! (one per target) every interval, all at once, and combines what each last gave into one
//! view of the fleet; it writes each scrape to server_metrics.jsonl, keeps the latest
//! values for a scenario's `stop` and adds each scrape to the running phase's summary.
//!
//! A phase ends with a scrape of its own, taken after its last response: without it the
//! counters stopped at the last tick, up to an interval before the end (the README's main
//! job read 98,304 generated tokens of 128,000). Where an engine's counters are known to
//! lag its responses, that last scrape is repeated until they hold still (bounded).
//!
//! `--power-metrics` exporters are scraped on the same ticks, apart from the endpoints:
//! their scrapes go to the energy meter (`energy.rs`) only.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::{mpsc, oneshot};

use super::energy::Meter;
use super::exposition::Exposition;
use super::fetch::{FetchError, Fetcher};
use super::phase::{ServerPhase, ServerPhaseAccumulator, Timed};
use super::samples_file::SamplesFile;
use super::{MetricsEndpoint, ScrapeConfig, ServerMetricsError};
use crate::workloads::scenario::spec::{ServerStat, ServerValues};

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
    /// What each endpoint last gave, and the targets each serves.
    each: Vec<Option<Arc<Exposition>>>,
    endpoint_targets: Vec<Vec<usize>>,
    /// Its scalar values (what a `stop` function sees).
    values: ServerValues,
    /// The running phase: its index, start and summary so far.
    phase: Option<(usize, Instant, ServerPhaseAccumulator)>,
    /// The power exporters' readings and the running phase's energy.
    energy: Meter,
}

/// How long a phase's last scrape may wait for lagging counters to hold still.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);
/// The time between the repeated scrapes of a settling phase end.
const SETTLE_STEP: Duration = Duration::from_millis(150);

/// A running scraper; dropping it stops the thread.
pub struct Scraper {
    state: Arc<Mutex<State>>,
    /// Asks the thread for a scrape now; it answers once the scrape is kept.
    now: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// The longest a scrape now may take, settling included.
    now_limit: Duration,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scraper {
    /// Starts scraping `config.endpoints` now.
    pub fn start(config: ScrapeConfig) -> Result<Scraper, ServerMetricsError> {
        let timeout = scrape_timeout(config.interval);
        let sources = config
            .endpoints
            .iter()
            .map(|e| Source::new(e, timeout))
            .collect::<Result<Vec<_>, _>>()?;
        let power = config
            .power
            .iter()
            .map(|url| {
                let endpoint = MetricsEndpoint {
                    url: url.clone(),
                    api_key: None,
                };
                Source::new(&endpoint, timeout).map(|s| Source {
                    what: "power metrics",
                    ..s
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
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
        let state = Arc::new(Mutex::new(State {
            energy: Meter::new(&config.power),
            endpoint_targets: config.endpoint_targets.clone(),
            ..State::default()
        }));
        let (stop, stopped) = oneshot::channel();
        let (now, asks) = mpsc::unbounded_channel();
        let (first_kept, first) = std::sync::mpsc::channel();
        let job = Job {
            asks,
            first_kept: Some(first_kept),
            sources,
            power,
            file,
            interval: config.interval,
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
        // The run starts once the first scrape is in (bounded by its time limit): the
        // first phase then counts its counters and energy from a reading taken before it
        // began. Without the wait, a slow exporter (or a loaded machine) left the first
        // phase without a baseline and its first moments uncounted.
        let _ = first.recv_timeout(timeout + timeout);
        Ok(Scraper {
            state,
            now,
            now_limit: timeout + SETTLE_LIMIT + timeout,
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
        let acc = ServerPhaseAccumulator::new(baseline)
            .per_endpoint(state.each.clone(), state.endpoint_targets.clone());
        state.phase = Some((index, now, acc));
        state.energy.begin_phase();
        if state.energy.is_on() {
            // A scrape now bounds the energy at the phase's start (`energy.rs`), which
            // the idle draw since the latest tick would otherwise swell.
            let (ask, _) = oneshot::channel();
            let _ = self.now.send(ask);
        }
    }

    /// The running phase ends now: a last scrape is taken (bounded in time; without an
    /// answer the phase keeps what its earlier scrapes showed), then what they showed.
    pub async fn end_phase(&self) -> PhaseMetrics {
        let (done, scraped) = oneshot::channel();
        if self.now.send(done).is_ok() {
            let _ = tokio::time::timeout(self.now_limit, scraped).await;
        }
        let (phase, energy) = {
            let mut state = self.lock();
            (state.phase.take(), state.energy.end_phase())
        };
        let mut metrics = phase.map_or_else(PhaseMetrics::default, |(_, _, phase)| PhaseMetrics {
            stats: phase.stats(),
            report: phase.report(),
        });
        if energy.is_some() {
            // Energy alone (no endpoint answered, or `--server-metrics off`): no scrapes.
            let report = metrics.report.get_or_insert_with(|| ServerPhase {
                endpoints: 0,
                ..ServerPhase::default()
            });
            report.energy = energy;
        }
        metrics
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

/// One endpoint: its fetcher and what it last gave.
struct Source {
    /// For warnings, credentials left out.
    url: String,
    fetcher: Fetcher,
    latest: Option<Arc<Exposition>>,
    /// What it serves, for warnings: server metrics, or power metrics.
    what: &'static str,
    scraped: u64,
    warned: bool,
    /// Its first scrape failed for good: it is not scraped again.
    gone: bool,
}

impl Source {
    fn new(endpoint: &MetricsEndpoint, timeout: Duration) -> Result<Source, ServerMetricsError> {
        let url = crate::safeguards::redact::string(endpoint.url.clone());
        let parsed = reqwest::Url::parse(&endpoint.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| ServerMetricsError::BadUrl(url.clone()))?;
        let fetcher = Fetcher::new(parsed, endpoint.api_key.clone(), timeout)
            .map_err(|e| ServerMetricsError::Client(e.to_string()))?;
        Ok(Source {
            url,
            fetcher,
            latest: None,
            what: "server metrics",
            scraped: 0,
            warned: false,
            gone: false,
        })
    }

    /// Keeps a scrape's result; true when it brought metrics. A first scrape that fails
    /// for good (no such endpoint, not Prometheus text) is one warning line and the end of
    /// this endpoint; any other failure (a later one, or a first one that timed out: a
    /// server whose few HTTP threads are all taken by the run's connections, as
    /// llama.cpp's, answers later) is one warning line for the whole run, and scraping
    /// goes on, the combined view keeping this endpoint's last scrape.
    fn take(&mut self, result: Result<Exposition, FetchError>, alone: bool) -> bool {
        match result {
            Ok(exposition) => {
                self.scraped += 1;
                self.latest = Some(Arc::new(exposition));
                return true;
            }
            Err(e) if self.scraped == 0 && !e.is_transient() => {
                self.gone = true;
                let what_next = if alone {
                    format!("the run goes on without {}", self.what)
                } else {
                    "the other endpoints are still read".to_string()
                };
                self.warn(&e, &what_next);
            }
            Err(e) if !self.warned => {
                self.warned = true;
                self.warn(&e, "scraping goes on (this warning is not repeated)");
            }
            Err(_) => {}
        }
        false
    }

    fn warn(&self, e: &FetchError, what_next: &str) {
        crate::errln!(
            "warning: cannot read {} from {}: {e}; {what_next}",
            self.what,
            self.url
        );
    }
}

/// One endpoint's scrape: `None` when it is no longer read.
type Fetched = Option<Result<Exposition, FetchError>>;

/// A scrape of every source still read, all at once.
async fn fetch_all(sources: &[Source]) -> Vec<Fetched> {
    join_all(sources.iter().map(|s| async move {
        if s.gone {
            None
        } else {
            Some(s.fetcher.fetch().await)
        }
    }))
    .await
}

struct Job {
    /// Scrapes asked for now (a phase's end), each answered once kept.
    asks: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    /// Told once the first scrape is kept, answered or not (`Scraper::start` waits).
    first_kept: Option<std::sync::mpsc::Sender<()>>,
    sources: Vec<Source>,
    /// `--power-metrics` exporters.
    power: Vec<Source>,
    file: Option<SamplesFile>,
    interval: Duration,
    state: Arc<Mutex<State>>,
    began: Instant,
}

impl Job {
    /// Scrapes every endpoint until stopped, or until none is left: at every tick, and
    /// whenever a phase ends.
    async fn run(mut self) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    let alive = self.scrape().await;
                    if let Some(first) = self.first_kept.take() {
                        let _ = first.send(());
                    }
                    if !alive {
                        return;
                    }
                }
                Some(done) = self.asks.recv() => {
                    let alive = self.scrape_settled().await;
                    let _ = done.send(());
                    // The next tick is a whole interval after this scrape.
                    ticks.reset();
                    if !alive {
                        return;
                    }
                }
            }
        }
    }

    /// One scrape of every endpoint still read, kept; false once none is left.
    async fn scrape(&mut self) -> bool {
        let alone = self.sources.len() == 1;
        let at = Instant::now();
        let (results, power) =
            futures_util::future::join(fetch_all(&self.sources), fetch_all(&self.power)).await;
        self.read_power(at, power);
        let mut fresh = Vec::new();
        for (i, result) in results.into_iter().enumerate() {
            if let Some(result) = result {
                if self.sources[i].take(result, alone) {
                    fresh.push(i);
                }
            }
        }
        if self.sources.iter().chain(&self.power).all(|s| s.gone) {
            return false;
        }
        if !fresh.is_empty() {
            self.keep(at, &fresh);
        }
        true
    }

    /// Gives the power exporters' scrapes taken at `at` to the energy meter.
    fn read_power(&mut self, at: Instant, results: Vec<Fetched>) {
        let alone = self.power.len() == 1;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (i, (source, result)) in self.power.iter_mut().zip(results).enumerate() {
            match (result.map(|r| source.take(r, alone)), &source.latest) {
                (Some(true), Some(e)) => state.energy.add(i, at, e),
                _ => continue,
            }
        }
    }

    /// A phase's last scrape; repeated, [`SETTLE_STEP`] apart and for at most
    /// [`SETTLE_LIMIT`], while the counters of an engine known to count late
    /// (`known::counts_late`) still move.
    async fn scrape_settled(&mut self) -> bool {
        let began = Instant::now();
        let mut before = self.counter_values();
        loop {
            if !self.scrape().await {
                return false;
            }
            let now = self.counter_values();
            let lagging = self
                .combined()
                .is_some_and(|e| super::known::counts_late(&e));
            if !lagging || now == before || began.elapsed() >= SETTLE_LIMIT {
                return true;
            }
            before = now;
            tokio::time::sleep(SETTLE_STEP).await;
        }
    }

    /// Every counter's value in what the endpoints last gave, to see them settle.
    fn counter_values(&self) -> Vec<f64> {
        self.combined().map_or_else(Vec::new, |e| {
            e.families
                .values()
                .filter(|f| f.kind == super::exposition::Kind::Counter)
                .map(|f| f.value)
                .collect()
        })
    }

    /// What the endpoints last gave, as one.
    fn combined(&self) -> Option<Arc<Exposition>> {
        match self.sources.as_slice() {
            [only] => only.latest.clone(),
            all => Some(Arc::new(Exposition::combine(
                all.iter().filter_map(|s| s.latest.as_deref()),
            ))),
        }
    }

    /// Keeps the scrapes taken at `at` (of the endpoints `fresh`).
    fn keep(&mut self, at: Instant, fresh: &[usize]) {
        let Some(exposition) = self.combined() else {
            return;
        };
        let each: Vec<_> = self.sources.iter().map(|s| s.latest.clone()).collect();
        let phase = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.values = exposition.values();
            state.latest = Some((at, exposition.clone()));
            state.each.clone_from(&each);
            match &mut state.phase {
                Some((index, start, acc)) => {
                    acc.add(Timed {
                        t_s: at.saturating_duration_since(*start).as_secs_f64(),
                        exposition: exposition.clone(),
                    });
                    acc.add_each(each);
                    Some(*index)
                }
                None => None,
            }
        };
        let Some(file) = &mut self.file else {
            return;
        };
        // With several endpoints each line also holds what each of them gave at `at`.
        let each: Vec<(usize, &str, &Exposition)> = match self.sources.len() {
            1 => Vec::new(),
            _ => fresh
                .iter()
                .filter_map(|&i| {
                    let s = &self.sources[i];
                    Some((i, s.url.as_str(), s.latest.as_deref()?))
                })
                .collect(),
        };
        let t_s = at.saturating_duration_since(self.began).as_secs_f64();
        if let Err(e) = file.write(t_s, phase, &exposition, &each) {
            crate::errln!("warning: cannot write server_metrics.jsonl: {e}; it stops here");
            self.file = None;
        }
    }
}
