//! The engine that drives a run: the scenario runs on its own OS thread and generates
//! requests ahead of their send time into a bounded queue; a tokio dispatcher sends each
//! on time (or when a concurrency slot frees); each request runs in its own task and hands
//! its record to a collector task that keeps the statistics, writes the JSONL records and
//! feeds outcomes back to the scenario. Guest code never runs on the I/O path.
//!
//! - `phases`: the run loop, phase after phase (and an adaptive scenario's `next_phase`).
//! - `generator`: the scenario thread, one phase's generation at a time.
//!   Its `sessions`: a phase of sessions on that thread, each step asked when the last ends.
//! - `dispatch`: one phase's sends, then its drain.
//! - `record` and `record_builder`: a finished exchange to its record, off the I/O threads.
//! - `collect` and `record_file`: statistics, requests.jsonl, outcomes back to the scenario.
//! - `live` and `signals`: the running phase's counters, and what stops a phase early.
//!   `window`: its last few seconds, for a live display.

mod collect;
mod dispatch;
mod generator;
mod live;
mod phases;
mod record;
mod record_builder;
mod record_file;
mod signals;
mod window;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use crate::measuring::client::{Api, Client, Prepared, RequestExtras, UsageRequest};
use crate::measuring::digest::RequestKey;
use crate::measuring::metrics::record::RequestRecord;
use crate::measuring::metrics::{DecisionLatencies, MetricsOptions, PhaseInfo, PhaseSummary};
use crate::workloads::scenario::{
    NoteValue, Outcome, PhaseReport, PhaseSpec, Scenario, ScenarioError,
};
use crate::workloads::tokenizer::Tokenizer;

use collect::Collector;
use dispatch::RunContext;
use generator::ThreadContext;
pub use live::LiveView;
use phases::{Finished, PhaseLoop, SCENARIO_GRACE};
pub use record::AnswerTextBudget;
use record_builder::Backlog;
use record_file::RecordFile;
use signals::Signals;
pub use window::{WindowQuantiles, WindowStats, WINDOW};

/// Most phases one run may have: an adaptive scenario whose `next_phase` never answers
/// "done" ends with an error here instead of running until someone notices.
pub const MAX_PHASES: usize = 10_000;

/// Which of a phase's requests this process sends, when it is one shard of a run: the
/// engine asks, `crate::sharding::shard::ShardPlan` answers (the engine does not know how
/// shards split a phase).
pub trait RequestStripe: Send + Sync + std::fmt::Debug {
    /// Whether this process sends anything in `phase`.
    fn takes_part(&self, phase: usize) -> bool;
    /// Whether global request `index` of `phase` is this process's to send.
    fn owns(&self, phase: usize, index: u64) -> bool;
}

/// What hears of every finished request besides the statistics (`--otlp`'s exporter).
/// Called on the record builders, never on the threads that send and time requests; it
/// must not wait.
pub trait RecordTap: Send + Sync {
    /// `record` finished; its phase's clock read zero at `phase_started`.
    fn finished(&self, record: &RequestRecord, phase_started: std::time::SystemTime);
}

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
    pub shard: Option<std::sync::Arc<dyn RequestStripe>>,
    /// Log of every request generated for sending (phase, index, offset, body digest), so
    /// `runner merge` can compute the digest of the union of shards.
    pub stream_log: Option<PathBuf>,
    /// How many `--target`s the requests go to (round-robin, or as each request names).
    pub targets: usize,
    /// The model of each target, when they were discovered one by one (else `model`).
    pub target_models: Vec<String>,
    /// The header every request of a session carries with the session's own value, for
    /// routers and KV-aware schedulers (`--session-header`, vLLM's `X-Session-ID`).
    pub session_header: Option<String>,
    /// The most `session_step` calls one session may take (`--max-steps-per-session`).
    pub max_steps_per_session: u32,
    /// The calls to the servers around each phase: prefix-cache resets, the profiler.
    pub control: Arc<crate::servers::control::ServerControl>,
    /// Hears of every finished request (`--otlp`).
    pub record_tap: Option<Arc<dyn RecordTap>>,
    /// Keep each answer's text in its record (`--keep-answer-text`), within this budget.
    pub answer_text: Option<Arc<record::AnswerTextBudget>>,
}

/// The default bound on one session's steps. The bundled agentic scenarios take at most
/// 41 (agentic_coding's 40 turns and its end) and a trace replay one per turn; 1,000
/// leaves long agents room while a scenario that never ends its sessions (its test for a
/// join true on every step) stops after 1,000 requests a session instead of running until
/// Ctrl-C. A fan-out that never ends is bounded likewise (100,000 sessions open at once).
pub const MAX_STEPS_PER_SESSION: u32 = 1000;

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
    /// Writing requests.jsonl failed part-way (a full disk): the file holds the first
    /// `written` whole records of `total`.
    #[error("requests.jsonl was cut: {written} of {total} request records written to {path}, {lost} lost ({source})")]
    RecordsCut {
        path: String,
        written: u64,
        total: u64,
        lost: u64,
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

pub struct FinishedPhase {
    pub spec: PhaseSpec,
    pub summary: PhaseSummary,
    pub stop: StopReason,
    /// Requests still running at the drain limit, cut and counted as cancelled.
    pub cut: u64,
    /// The server's metrics over the phase, when they were scraped.
    pub server: Option<crate::servers::server_metrics::ServerPhase>,
}

pub struct RunResult {
    pub phases: Vec<FinishedPhase>,
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
    /// sha256 of the body.
    body_sha256: [u8; 32],
    input_tokens: u64,
    tag: Option<String>,
    session: Option<String>,
    warmup: bool,
    /// Its own headers and cancel point.
    extras: RequestExtras,
    /// The index of the target it goes to.
    target: usize,
    /// Its session and step, when a session sent it (written into its record).
    session_record: crate::measuring::metrics::SessionRecord,
    /// The offset its digest key takes: its `offset`, except a session's later steps,
    /// whose send time depends on when the previous answer ended; they take the wait the
    /// session asked for, which does not.
    key_offset: Option<f64>,
}

impl Planned {
    /// The request's identity in the run digest.
    fn key(&self, phase: usize) -> RequestKey {
        RequestKey::new(phase, self.index, self.key_offset, self.body_sha256)
    }
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
    /// In virtual time: the moment the thread asked to look again at has come.
    Wake,
}

enum Collect {
    Record(Box<RequestRecord>, Option<Box<Outcome>>),
    EndPhase {
        info: PhaseInfo,
        reply: oneshot::Sender<(PhaseSummary, DecisionLatencies)>,
    },
    /// No more records are awaited.
    Close,
}

/// Runs every phase of a configured scenario: `phases` (what its `phases` returned), then
/// for an adaptive scenario each phase its `next_phase` gives, sending to `clients` (one
/// per `--target`). `interrupt` turning true stops sending, drains briefly and ends the run
/// with what finished.
pub async fn run(
    scenario: Box<dyn Scenario>,
    phases: Vec<PhaseSpec>,
    clients: Vec<Client>,
    tokenizer: Arc<Tokenizer>,
    config: EngineConfig,
    interrupt: watch::Receiver<bool>,
) -> Result<RunResult, EngineError> {
    let records = match &config.records {
        Some(path) => Some(RecordFile::create(path.clone())?),
        None => None,
    };
    // A session's next step is asked when its last request ends.
    let wants_outcomes = scenario.wants_responses() || scenario.has_sessions();
    let adaptive = scenario.has_next_phase();
    let scenario_name = scenario.describe().name.clone();
    let live = config.live.0.clone();
    // The scenario's stop request bypasses the request queue, which may hold many
    // requests generated ahead that must not be sent any more.
    let (signals, raise) = Signals::new(interrupt);
    let context = ThreadContext {
        stop: raise.stop,
        failed: raise.failed,
        config: config.clone(),
        tokenizer: tokenizer.clone(),
        live: live.clone(),
    };
    let link = generator::spawn(scenario, context)?;
    let (rec_tx, rec_rx) = mpsc::unbounded_channel::<Collect>();
    let outcomes = wants_outcomes.then(|| link.commands.clone());
    let collector = Collector::new(&config, records, raise.error_rate, live.clone(), outcomes);
    let collector = tokio::spawn(collector.run(rec_rx));
    let backlog = Backlog::new();
    let mut phases = PhaseLoop {
        run: RunContext {
            clients: &clients,
            tokenizer: &tokenizer,
            config: &config,
            records: &rec_tx,
            live: &live,
            wants_outcomes,
            backlog: &backlog,
        },
        scenario: link,
        signals,
        adaptive,
        scenario_name,
        queued: phases.into(),
        done: Finished::default(),
    };
    phases.run_all().await;
    // Closing the channels ends the scenario thread and, once it has every record, the
    // collector.
    let scenario_thread = phases.scenario.close();
    let done = phases.done;
    // Records a signal left unbuilt may still be counting on the builders: the collector
    // stops here rather than wait for them.
    if backlog.abandoned() {
        let _ = rec_tx.send(Collect::Close);
    }
    drop(rec_tx);
    let written = collector.await.unwrap_or(Ok(()));
    let notes = if done.interrupted {
        join_within(scenario_thread, SCENARIO_GRACE).await
    } else {
        scenario_thread.join().unwrap_or_default()
    };
    Ok(RunResult {
        phases: done.results,
        digest: done.digest.finish(),
        interrupted: done.interrupted,
        notes,
        failure: done.failure.or(written.err()),
    })
}

/// The scenario's notes once its thread has ended, if it ends within `limit`; otherwise
/// the thread is left to the process's exit (it is inside a call that cannot be stopped).
async fn join_within(thread: generator::Notes, limit: Duration) -> Vec<(String, NoteValue)> {
    let start = Instant::now();
    while !thread.is_finished() {
        if start.elapsed() >= limit {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    thread.join().unwrap_or_default()
}
