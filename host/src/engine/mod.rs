//! The run loop. The scenario runs on its own OS thread and generates requests ahead of
//! their send time into a bounded queue; a tokio dispatcher sends each on time (or when a
//! concurrency slot frees); each request runs in its own task and hands its record to a
//! collector task that keeps the statistics, writes the JSONL records and feeds outcomes
//! back to the scenario. Guest code never runs on the I/O path.
//!
//! Phases come from the scenario's `phases` list, then, for an adaptive scenario, one at
//! a time from its `next_phase`, given a report of every finished phase (asked on the
//! scenario thread like every other call).

mod collect;
mod dispatch;
mod generator;
mod record_builder;
mod record_file;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, watch};

use crate::client::{Api, Client, Prepared, UsageRequest};
use crate::metrics::record::RequestRecord;
use crate::metrics::{DecisionLatencies, Distribution, MetricsOptions, PhaseInfo, PhaseSummary};
use crate::scenario::{
    LatencySummary, NoteValue, Outcome, PhaseReport, PhaseSpec, Scenario, ScenarioError, Snapshot,
};
use crate::tokenizer::Tokenizer;

use collect::collect;
use dispatch::dispatch_phase;
use generator::{scenario_loop, ThreadContext};
use record_file::RecordFile;

/// How long a stopped run waits for the scenario thread to end its current call (after a
/// signal, within the 5 s drain's budget).
const SCENARIO_GRACE: Duration = Duration::from_millis(500);

/// Longest wait for the scenario to fill its queue before a phase's clock starts.
const MAX_PRIMING: Duration = Duration::from_secs(60);

/// Most phases one run may have: an adaptive scenario whose `next_phase` never answers
/// "done" ends with an error here instead of running until someone notices.
pub const MAX_PHASES: usize = 10_000;

#[derive(Clone)]
pub struct EngineConfig {
    pub api: Api,
    pub model: String,
    pub usage: UsageRequest,
    /// How long in-flight requests may finish after a phase is stopped by time or by its
    /// stop condition (a phase that ran out of requests waits for all of them).
    pub drain_timeout: Duration,
    /// Drain allowed after Ctrl-C.
    pub interrupt_drain: Duration,
    /// Requests generated ahead of their send time.
    pub lookahead: usize,
    pub metrics: MetricsOptions,
    /// Per-request records, one JSON object per line, written as requests finish.
    pub records: Option<PathBuf>,
    pub seed: u64,
    /// End the run once more than this fraction of a phase's finished requests failed
    /// (checked from [`ERROR_RATE_MIN_FINISHED`] finished requests on).
    pub max_error_rate: Option<f64>,
    /// The live counters of the running phase, also read by a progress display.
    pub live: LiveView,
    /// Sharded run: send only this shard's stripe of each phase's requests.
    pub shard: Option<crate::shard::ShardPlan>,
    /// Log of every request generated for sending (phase, index, offset, body digest), so
    /// `runner merge` can compute the digest of the union of shards.
    pub stream_log: Option<PathBuf>,
}

/// Finished requests a phase needs before `max_error_rate` is checked, so one early
/// failure cannot end a run.
pub const ERROR_RATE_MIN_FINISHED: u64 = 20;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("cannot write request records to {path}: {source}")]
    Records {
        path: String,
        source: std::io::Error,
    },
    #[error("the scenario thread stopped unexpectedly")]
    ScenarioThread,
    #[error("the statistics collector stopped unexpectedly")]
    Collector,
}

/// Why a phase stopped sending.
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// Its dataset or `max_requests` ran out.
    Exhausted,
    MaxDuration,
    ScenarioStop,
    Interrupted,
    /// The scenario failed while the dispatcher waited; the run ends with its error (never
    /// kept in a phase's result).
    ScenarioFailed,
    /// Too many of its finished requests failed: the run ends here.
    MaxErrorRate {
        failed: u64,
        finished: u64,
        limit: f64,
    },
}

impl StopReason {
    pub fn describe(&self) -> String {
        match self {
            StopReason::Exhausted => "all requests sent".into(),
            StopReason::MaxDuration => "maximum duration reached".into(),
            StopReason::ScenarioStop => "the scenario's stop condition held".into(),
            StopReason::Interrupted => "interrupted".into(),
            StopReason::ScenarioFailed => "the scenario failed".into(),
            StopReason::MaxErrorRate {
                failed,
                finished,
                limit,
            } => format!(
                "error rate {:.1} % ({failed} of {finished} finished requests failed) exceeded --max-error-rate {}",
                100.0 * *failed as f64 / (*finished).max(1) as f64,
                limit
            ),
        }
    }

    /// The run does not go on to its next phase.
    pub fn ends_run(&self) -> bool {
        matches!(
            self,
            StopReason::Interrupted | StopReason::ScenarioFailed | StopReason::MaxErrorRate { .. }
        )
    }
}

pub struct PhaseResult {
    pub spec: PhaseSpec,
    pub summary: PhaseSummary,
    pub stop: StopReason,
    /// Requests still running at the drain limit, cut and counted as cancelled.
    pub cut: u64,
}

pub struct RunResult {
    pub phases: Vec<PhaseResult>,
    /// sha256 over every request sent: phase, index, scheduled offset and body.
    pub digest: String,
    pub interrupted: bool,
    /// Results the scenario reported with `note` (an SLO search's answer).
    pub notes: Vec<(String, NoteValue)>,
    /// What ended the run early (the scenario failed, requests.jsonl could not be
    /// written): the phases above are what finished before it, to report, then the error.
    pub failure: Option<EngineError>,
}

struct Planned {
    index: u64,
    /// Seconds from phase start; `None` in closed loop (sent when a slot frees).
    offset: Option<f64>,
    prepared: Prepared,
    digest: [u8; 32],
    input_tokens: u64,
    tag: Option<String>,
    session: Option<String>,
    warmup: bool,
}

enum FromScenario {
    Request(Box<Planned>),
    /// The phase's dataset or request budget is exhausted.
    Exhausted,
    /// Acknowledges `ToScenario::EndPhase`: nothing more of this phase follows.
    Closed,
    /// The answer to `ToScenario::NextPhase`: the next phase, or `None` to end the run.
    NextPhase(Option<Box<PhaseSpec>>),
    Failed(ScenarioError),
}

enum ToScenario {
    /// Generate the requests of this phase (its position in the run, and its spec).
    Start(usize, Box<PhaseSpec>),
    Outcome(Outcome),
    EndPhase,
    /// Between phases: ask an adaptive scenario for its next phase.
    NextPhase(Vec<PhaseReport>),
}

/// Live counters shared with the scenario thread for its `stop` function.
struct Live {
    snapshot: Snapshot,
    /// The running phase, for a progress display (adaptive phases are not known ahead).
    spec: Option<PhaseSpec>,
    phase_start: Instant,
    ttft: hdrhistogram::Histogram<u64>,
    e2el: hdrhistogram::Histogram<u64>,
}

impl Live {
    /// The snapshot a `stop` function sees now.
    fn current(&self) -> Snapshot {
        let mut s = self.snapshot.clone();
        s.elapsed_s = self.phase_start.elapsed().as_secs_f64();
        s.in_flight = s.sent.saturating_sub(s.completed + s.failed);
        s.ttft_p50_ms = self.ttft.value_at_quantile(0.5) as f64 / 1000.0;
        s.ttft_p99_ms = self.ttft.value_at_quantile(0.99) as f64 / 1000.0;
        s.e2el_p99_ms = self.e2el.value_at_quantile(0.99) as f64 / 1000.0;
        s
    }
}

/// A handle on the live counters of the running phase, for a progress display: cloned
/// into [`EngineConfig`] before the run and read while it goes on.
#[derive(Clone)]
pub struct LiveView(Arc<Mutex<Live>>);

impl LiveView {
    pub fn new() -> LiveView {
        LiveView(Arc::new(Mutex::new(Live {
            snapshot: Snapshot::default(),
            spec: None,
            phase_start: Instant::now(),
            ttft: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
            e2el: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
        })))
    }

    /// The counters of the running phase now (the same snapshot a `stop` function sees).
    pub fn snapshot(&self) -> Snapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).current()
    }

    /// The running phase's spec, once one has started.
    pub fn phase_spec(&self) -> Option<PhaseSpec> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spec
            .clone()
    }
}

impl Default for LiveView {
    fn default() -> Self {
        LiveView::new()
    }
}

enum Collect {
    Record(Box<RequestRecord>, Option<Box<Outcome>>),
    EndPhase {
        info: PhaseInfo,
        reply: oneshot::Sender<(PhaseSummary, DecisionLatencies)>,
    },
}

/// What ends a phase early, besides its duration.
struct Signals {
    /// Ctrl-C or SIGTERM.
    interrupt: watch::Receiver<bool>,
    /// The scenario's `stop` function held.
    stop: watch::Receiver<bool>,
    /// The collector saw the error rate pass `max_error_rate`.
    error_rate: watch::Receiver<Option<StopReason>>,
    /// The scenario failed: its error is queued behind the requests generated ahead, and
    /// the dispatcher may be waiting on one of those (a send far ahead).
    failed: watch::Receiver<bool>,
}

impl Signals {
    /// The first reason to stop. A source whose sender is gone (no `--max-error-rate`: the
    /// collector holds none) never fires, and it must not end this wait either: a select
    /// branch that completed on the closed channel and then waited forever would hide an
    /// interrupt behind it for as long as the caller waits (a send 1e9 s ahead).
    async fn stopped(&mut self) -> StopReason {
        let Signals {
            interrupt,
            stop,
            error_rate,
            failed,
        } = self;
        let scenario_failed = async {
            if failed.wait_for(|f| *f).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let interrupted = async {
            if interrupt.wait_for(|i| *i).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let stopped = async {
            if stop.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let too_many_errors = async {
            match error_rate.wait_for(|r| r.is_some()).await {
                Ok(r) => r.clone().unwrap_or(StopReason::ScenarioStop),
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = interrupted => StopReason::Interrupted,
            _ = stopped => StopReason::ScenarioStop,
            r = too_many_errors => r,
            _ = scenario_failed => StopReason::ScenarioFailed,
        }
    }
}

/// Runs every phase of a configured scenario: `phases` (what its `phases` returned), then
/// for an adaptive scenario each phase its `next_phase` gives. `interrupt` turning true
/// stops sending, drains briefly and ends the run with what finished.
pub async fn run(
    mut scenario: Box<dyn Scenario>,
    phases: Vec<PhaseSpec>,
    client: Client,
    tokenizer: Arc<Tokenizer>,
    config: EngineConfig,
    interrupt: watch::Receiver<bool>,
) -> Result<RunResult, EngineError> {
    let records = match &config.records {
        Some(path) => Some(RecordFile::create(path.clone())?),
        None => None,
    };
    let wants_responses = scenario.wants_responses();
    let adaptive = scenario.has_next_phase();
    let scenario_name = scenario.describe().name.clone();
    let live = config.live.0.clone();

    // Scenario thread.
    let (req_tx, mut req_rx) = mpsc::channel::<FromScenario>(config.lookahead.max(1));
    let (cmd_tx, cmd_rx) = std_mpsc::channel::<ToScenario>();
    let primed = Arc::new(tokio::sync::Notify::new());
    // The scenario's stop request bypasses the request queue, which may hold many
    // requests generated ahead that must not be sent any more.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (error_rate_tx, error_rate_rx) = watch::channel(None);
    let (failed_tx, failed_rx) = watch::channel(false);
    let mut signals = Signals {
        interrupt,
        stop: stop_rx,
        error_rate: error_rate_rx,
        failed: failed_rx,
    };
    let context = ThreadContext {
        stop: stop_tx,
        failed: failed_tx,
        config: config.clone(),
        tokenizer: tokenizer.clone(),
        live: live.clone(),
        primed: primed.clone(),
    };
    let scenario_thread = std::thread::Builder::new()
        .name("scenario".into())
        .spawn(move || {
            scenario_loop(&mut *scenario, &context, cmd_rx, req_tx);
            scenario.notes()
        })
        .map_err(|_| EngineError::ScenarioThread)?;

    // Collector task.
    let (rec_tx, rec_rx) = mpsc::unbounded_channel::<Collect>();
    let collector = tokio::spawn(collect(
        rec_rx,
        records,
        config.metrics.clone(),
        config.max_error_rate.map(|limit| (limit, error_rate_tx)),
        live.clone(),
        if wants_responses {
            Some(cmd_tx.clone())
        } else {
            None
        },
    ));

    let mut digest = Sha256::new();
    let mut results = Vec::new();
    let mut interrupted = false;
    let mut failure = None;
    let mut queued: VecDeque<PhaseSpec> = phases.into();
    let mut history: Vec<PhaseReport> = Vec::new();
    for p in 0.. {
        let spec = match queued.pop_front() {
            Some(spec) => spec,
            None if adaptive && p >= MAX_PHASES => {
                failure = Some(EngineError::Scenario(ScenarioError::Invalid {
                    file: scenario_name.clone(),
                    function: "next_phase".into(),
                    message: format!(
                        "the run reached {MAX_PHASES} phases; return () (\"done\") to end it"
                    ),
                }));
                break;
            }
            None if adaptive => {
                // A signal need not wait for `next_phase` to answer.
                let mut interrupt = signals.interrupt.clone();
                let asked = tokio::select! {
                    a = ask_next_phase(&cmd_tx, &mut req_rx, &history) => a,
                    Ok(_) = interrupt.wait_for(|i| *i) => {
                        interrupted = true;
                        break;
                    }
                };
                match asked {
                    Ok(Some(spec)) => spec,
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            None => break,
        };
        let spec = &spec;
        if cmd_tx
            .send(ToScenario::Start(p, Box::new(spec.clone())))
            .is_err()
        {
            failure = Some(EngineError::ScenarioThread);
            break;
        }
        {
            let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
            l.snapshot = Snapshot {
                phase: p,
                ..Snapshot::default()
            };
            l.spec = Some(spec.clone());
            l.phase_start = Instant::now();
            l.ttft.reset();
            l.e2el.reset();
        }
        // The phase clock starts once the queue holds requests generated ahead (or the
        // dataset is that short), so the first sends never wait for guest code.
        // Ctrl-C need not wait for a slow scenario: the phase then stops at once.
        let mut interrupt = signals.interrupt.clone();
        tokio::select! {
            _ = tokio::time::timeout(MAX_PRIMING, primed.notified()) => {}
            _ = interrupt.wait_for(|i| *i) => {}
        }
        let phase_start = Instant::now();
        live.lock().unwrap_or_else(|e| e.into_inner()).phase_start = phase_start;
        let outcome = dispatch_phase(
            p,
            spec,
            phase_start,
            &mut req_rx,
            &client,
            &tokenizer,
            &config,
            &rec_tx,
            &live,
            &mut digest,
            &mut signals,
            wants_responses,
        )
        .await;
        let (stop, cut, duration) = match outcome {
            Ok(v) => v,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        // Close the phase on the scenario thread and discard requests generated ahead.
        // After a signal the scenario may be deep in a long call (a huge prompt, a guest at
        // its time limit): it gets a moment, then the run reports without it.
        let _ = cmd_tx.send(ToScenario::EndPhase);
        let closing = close_phase(&mut req_rx);
        let closed = match stop {
            StopReason::Interrupted => tokio::time::timeout(SCENARIO_GRACE, closing)
                .await
                .unwrap_or(Ok(())),
            _ => closing.await,
        };
        if let Err(e) = closed {
            failure = Some(e);
        }
        let info = PhaseInfo {
            name: spec.name.clone(),
            duration_ns: duration.as_nanos() as u64,
            max_concurrency: spec.concurrency_limit(),
            request_rate: spec.arrival.rate(),
            burstiness: spec.arrival.burstiness(),
        };
        let (reply, summary) = oneshot::channel();
        if rec_tx.send(Collect::EndPhase { info, reply }).is_err() {
            failure = Some(EngineError::Collector);
            break;
        }
        let Ok((summary, latencies)) = summary.await else {
            failure = Some(EngineError::Collector);
            break;
        };
        history.push(phase_report(p, spec, &summary, &latencies));
        let was_interrupted = stop == StopReason::Interrupted;
        let ends_run = stop.ends_run();
        results.push(PhaseResult {
            spec: spec.clone(),
            summary,
            stop,
            cut,
        });
        if failure.is_some() {
            break;
        }
        interrupted |= was_interrupted;
        if ends_run {
            break;
        }
    }
    drop(cmd_tx);
    drop(req_rx);
    drop(rec_tx);
    let written = collector.await.unwrap_or(Ok(()));
    let notes = if interrupted {
        join_within(scenario_thread, SCENARIO_GRACE).await
    } else {
        scenario_thread.join().unwrap_or_default()
    };
    Ok(RunResult {
        phases: results,
        digest: hex::encode(digest.finalize()),
        interrupted,
        notes,
        failure: failure.or(written.err()),
    })
}

/// Discards what the scenario generated ahead, up to its acknowledgement of the phase's end.
async fn close_phase(req_rx: &mut mpsc::Receiver<FromScenario>) -> Result<(), EngineError> {
    while let Some(msg) = req_rx.recv().await {
        match msg {
            FromScenario::Closed => break,
            FromScenario::Failed(e) => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// The scenario's notes once its thread has ended, if it ends within `limit`; otherwise
/// the thread is left to the process's exit (it is inside a call that cannot be stopped).
async fn join_within(
    thread: std::thread::JoinHandle<Vec<(String, NoteValue)>>,
    limit: Duration,
) -> Vec<(String, NoteValue)> {
    let start = Instant::now();
    while !thread.is_finished() {
        if start.elapsed() >= limit {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    thread.join().unwrap_or_default()
}

/// Asks the scenario thread for an adaptive scenario's next phase.
async fn ask_next_phase(
    cmd_tx: &std_mpsc::Sender<ToScenario>,
    req_rx: &mut mpsc::Receiver<FromScenario>,
    history: &[PhaseReport],
) -> Result<Option<PhaseSpec>, EngineError> {
    cmd_tx
        .send(ToScenario::NextPhase(history.to_vec()))
        .map_err(|_| EngineError::ScenarioThread)?;
    // Requests of the last phase were discarded up to its `Closed`; the answer is next.
    loop {
        match req_rx.recv().await {
            Some(FromScenario::NextPhase(spec)) => return Ok(spec.map(|s| *s)),
            Some(FromScenario::Failed(e)) => return Err(e.into()),
            Some(_) => continue,
            None => return Err(EngineError::ScenarioThread),
        }
    }
}

/// What `next_phase` learns of a finished phase.
fn phase_report(
    index: usize,
    spec: &PhaseSpec,
    s: &PhaseSummary,
    latencies: &DecisionLatencies,
) -> PhaseReport {
    let summary = |d: &Distribution| LatencySummary {
        mean: d.mean,
        p50: d.percentile(50.0).unwrap_or(d.median),
        p90: d.percentile(90.0).unwrap_or(0.0),
        p99: d.percentile(99.0).unwrap_or(0.0),
    };
    PhaseReport {
        index,
        name: spec.name.clone(),
        warmup: spec.warmup,
        request_rate: spec.arrival.rate(),
        max_concurrency: spec.concurrency_limit(),
        duration_s: s.duration_s,
        completed: s.completed,
        failed: s.failed,
        request_throughput: s.request_throughput,
        output_throughput: s.output_throughput,
        goodput: s.goodput,
        ttft: summary(&latencies.ttft),
        tpot: summary(&latencies.tpot),
        itl: summary(&latencies.itl),
        e2el: summary(&latencies.e2el),
    }
}
