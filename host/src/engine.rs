//! The run loop. The scenario runs on its own OS thread and generates requests ahead of
//! their send time into a bounded queue; a tokio dispatcher sends each on time (or when a
//! concurrency slot frees); each request runs in its own task and hands its record to a
//! collector task that keeps the statistics, writes the JSONL records and feeds outcomes
//! back to the scenario. Guest code never runs on the I/O path.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::client::{prepare, Api, Client, Prepared};
use crate::metrics::record::{Chunk, RequestRecord};
use crate::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, PhaseSummary};
use crate::scenario::{Outcome, PhaseSpec, Prompt, RequestSpec, Scenario, ScenarioError, Snapshot};
use crate::schedule::Schedule;
use crate::tokenizer::Tokenizer;

/// Longest wait for the scenario to fill its queue before a phase's clock starts.
const MAX_PRIMING: Duration = Duration::from_secs(60);

/// How often a scenario's `stop` function sees a fresh snapshot.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(20);

#[derive(Clone)]
pub struct EngineConfig {
    pub api: Api,
    pub model: String,
    pub include_usage: bool,
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
}

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
}

/// Why a phase stopped sending.
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// Its dataset or `max_requests` ran out.
    Exhausted,
    MaxDuration,
    ScenarioStop,
    Interrupted,
}

impl StopReason {
    pub fn describe(&self) -> &'static str {
        match self {
            StopReason::Exhausted => "all requests sent",
            StopReason::MaxDuration => "maximum duration reached",
            StopReason::ScenarioStop => "the scenario's stop condition held",
            StopReason::Interrupted => "interrupted",
        }
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
}

enum FromScenario {
    Request(Box<Planned>),
    /// The phase's dataset or request budget is exhausted.
    Exhausted,
    /// Acknowledges `ToScenario::EndPhase`: nothing more of this phase follows.
    Closed,
    Failed(ScenarioError),
}

enum ToScenario {
    Start(usize),
    Outcome(Outcome),
    EndPhase,
}

/// Live counters shared with the scenario thread for its `stop` function.
struct Live {
    snapshot: Snapshot,
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

enum Collect {
    Record(Box<RequestRecord>, Option<Box<Outcome>>),
    EndPhase {
        info: PhaseInfo,
        reply: oneshot::Sender<PhaseSummary>,
    },
}

/// What ends a phase early, besides its duration.
struct Signals {
    /// Ctrl-C or SIGTERM.
    interrupt: watch::Receiver<bool>,
    /// The scenario's `stop` function held.
    stop: watch::Receiver<bool>,
}

impl Signals {
    async fn stopped(&mut self) -> StopReason {
        tokio::select! {
            biased;
            _ = self.interrupt.wait_for(|i| *i) => StopReason::Interrupted,
            _ = self.stop.wait_for(|s| *s) => StopReason::ScenarioStop,
        }
    }
}

/// Runs every phase of a configured scenario. `interrupt` turning true stops sending,
/// drains briefly and ends the run with what finished.
pub async fn run(
    mut scenario: Box<dyn Scenario>,
    phases: Vec<PhaseSpec>,
    client: Client,
    tokenizer: Arc<Tokenizer>,
    config: EngineConfig,
    interrupt: watch::Receiver<bool>,
) -> Result<RunResult, EngineError> {
    let records = match &config.records {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|source| EngineError::Records {
                path: path.display().to_string(),
                source,
            })?,
        )),
        None => None,
    };
    let wants_responses = scenario.wants_responses();
    let live = Arc::new(Mutex::new(Live {
        snapshot: Snapshot::default(),
        phase_start: Instant::now(),
        ttft: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
        e2el: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
    }));

    // Scenario thread.
    let (req_tx, mut req_rx) = mpsc::channel::<FromScenario>(config.lookahead.max(1));
    let (cmd_tx, cmd_rx) = std_mpsc::channel::<ToScenario>();
    let primed = Arc::new(tokio::sync::Notify::new());
    // The scenario's stop request bypasses the request queue, which may hold many
    // requests generated ahead that must not be sent any more.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut signals = Signals {
        interrupt,
        stop: stop_rx,
    };
    let context = ThreadContext {
        stop: stop_tx,
        phases: phases.clone(),
        config: config.clone(),
        tokenizer: tokenizer.clone(),
        live: live.clone(),
        primed: primed.clone(),
    };
    let scenario_thread = std::thread::Builder::new()
        .name("scenario".into())
        .spawn(move || scenario_loop(&mut *scenario, &context, cmd_rx, req_tx))
        .map_err(|_| EngineError::ScenarioThread)?;

    // Collector task.
    let (rec_tx, rec_rx) = mpsc::unbounded_channel::<Collect>();
    let collector = tokio::spawn(collect(
        rec_rx,
        records,
        config.records.clone(),
        config.metrics.clone(),
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
    for (p, spec) in phases.iter().enumerate() {
        if cmd_tx.send(ToScenario::Start(p)).is_err() {
            failure = Some(EngineError::ScenarioThread);
            break;
        }
        {
            let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
            l.snapshot = Snapshot {
                phase: p,
                ..Snapshot::default()
            };
            l.phase_start = Instant::now();
            l.ttft.reset();
            l.e2el.reset();
        }
        // The phase clock starts once the queue holds requests generated ahead (or the
        // dataset is that short), so the first sends never wait for guest code.
        let _ = tokio::time::timeout(MAX_PRIMING, primed.notified()).await;
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
        let _ = cmd_tx.send(ToScenario::EndPhase);
        while let Some(msg) = req_rx.recv().await {
            match msg {
                FromScenario::Closed => break,
                FromScenario::Failed(e) => {
                    failure = Some(e.into());
                    break;
                }
                _ => {}
            }
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
            failure = Some(EngineError::ScenarioThread);
            break;
        }
        let Ok(summary) = summary.await else {
            failure = Some(EngineError::ScenarioThread);
            break;
        };
        let was_interrupted = stop == StopReason::Interrupted;
        results.push(PhaseResult {
            spec: spec.clone(),
            summary,
            stop,
            cut,
        });
        if failure.is_some() {
            break;
        }
        if was_interrupted {
            interrupted = true;
            break;
        }
    }
    drop(cmd_tx);
    drop(req_rx);
    drop(rec_tx);
    let written = collector.await.unwrap_or(Ok(()));
    let _ = scenario_thread.join();
    if let Some(e) = failure {
        return Err(e);
    }
    written?;
    Ok(RunResult {
        phases: results,
        digest: hex(&digest.finalize()),
        interrupted,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[allow(clippy::too_many_arguments)]
async fn dispatch_phase(
    phase: usize,
    spec: &PhaseSpec,
    phase_start: Instant,
    req_rx: &mut mpsc::Receiver<FromScenario>,
    client: &Client,
    tokenizer: &Arc<Tokenizer>,
    config: &EngineConfig,
    rec_tx: &mpsc::UnboundedSender<Collect>,
    live: &Arc<Mutex<Live>>,
    digest: &mut Sha256,
    signals: &mut Signals,
    wants_responses: bool,
) -> Result<(StopReason, u64, Duration), EngineError> {
    let slots = spec
        .concurrency_limit()
        .map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS as u64) as usize)));
    let deadline = spec
        .max_duration
        .map(|d| tokio::time::Instant::from_std(phase_start + d));
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
    let until_deadline = async { tokio::time::sleep_until(deadline.unwrap_or(far)).await };
    tokio::pin!(until_deadline);
    let mut released_at = phase_start;

    let stop = loop {
        let msg = tokio::select! {
            biased;
            r = signals.stopped() => break r,
            _ = &mut until_deadline => break StopReason::MaxDuration,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            m = req_rx.recv() => m,
        };
        let planned = match msg {
            None => return Err(EngineError::ScenarioThread),
            Some(FromScenario::Failed(e)) => return Err(e.into()),
            Some(FromScenario::Exhausted) => break StopReason::Exhausted,
            Some(FromScenario::Closed) => break StopReason::Exhausted,
            Some(FromScenario::Request(p)) => p,
        };
        let ideal = planned
            .offset
            .map(|o| phase_start + Duration::from_secs_f64(o));
        if let Some(at) = ideal {
            if at > Instant::now() {
                tokio::select! {
                    biased;
                    r = signals.stopped() => break r,
                    _ = &mut until_deadline => break StopReason::MaxDuration,
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                }
            }
        }
        // Lateness measures the client only. Under a concurrency cap a request cannot leave
        // before a slot frees, and, requests leaving in order, not before the one ahead
        // of it got its slot: its schedule moves to the last moment the cap released the
        // dispatcher.
        let permit: Option<OwnedSemaphorePermit> = match &slots {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    let p = tokio::select! {
                        biased;
                        r = signals.stopped() => break r,
                        _ = &mut until_deadline => break StopReason::MaxDuration,
                        p = sem.clone().acquire_owned() => p,
                    };
                    released_at = Instant::now();
                    p.ok()
                }
            },
        };
        let scheduled = ideal.unwrap_or_else(Instant::now).max(released_at);
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            break StopReason::MaxDuration;
        }
        digest.update((phase as u64).to_le_bytes());
        digest.update(planned.index.to_le_bytes());
        digest.update(
            planned
                .offset
                .map(|o| (o * 1e9).round() as i64)
                .unwrap_or(-1)
                .to_le_bytes(),
        );
        digest.update(planned.digest);
        live.lock().unwrap_or_else(|e| e.into_inner()).snapshot.sent += 1;

        let client = client.clone();
        let tokenizer = tokenizer.clone();
        let rec_tx = rec_tx.clone();
        let mut cancel = cancel_rx.clone();
        tasks.spawn(async move {
            let sent = Instant::now();
            let exchange = client.execute(&planned.prepared, &mut cancel).await;
            drop(permit);
            let (record, outcome) = build_record(
                phase,
                &planned,
                phase_start,
                scheduled,
                sent,
                exchange,
                &tokenizer,
                wants_responses,
            );
            let _ = rec_tx.send(Collect::Record(Box::new(record), outcome.map(Box::new)));
        });
    };

    // Drain. Requests of a phase that ran out of work are all part of it: wait for every
    // one (each is bounded by the request timeout). A phase stopped by time or by its stop
    // condition lets in-flight requests finish up to the drain limit, then cuts them.
    let drain = match stop {
        StopReason::Exhausted => None,
        StopReason::Interrupted => Some(config.interrupt_drain),
        StopReason::MaxDuration | StopReason::ScenarioStop => Some(config.drain_timeout),
    };
    let wait_all = async {
        loop {
            tokio::select! {
                biased;
                // An interrupt during the drain cuts what is left at once.
                _ = signals.interrupt.wait_for(|i| *i), if stop != StopReason::Interrupted => return false,
                r = tasks.join_next() => if r.is_none() { return true },
            }
        }
    };
    let drained = match drain {
        Some(limit) => tokio::time::timeout(limit, wait_all).await.unwrap_or(false),
        None => wait_all.await,
    };
    let mut cut = 0;
    if !drained {
        cut = tasks.len() as u64;
        let _ = cancel_tx.send(true);
        while tasks.join_next().await.is_some() {}
    }
    let stop = if !drained && stop != StopReason::Interrupted && *signals.interrupt.borrow() {
        StopReason::Interrupted
    } else {
        stop
    };
    Ok((stop, cut, phase_start.elapsed()))
}

#[allow(clippy::too_many_arguments)]
fn build_record(
    phase: usize,
    planned: &Planned,
    phase_start: Instant,
    scheduled: Instant,
    sent: Instant,
    ex: crate::client::Exchange,
    tokenizer: &Tokenizer,
    wants_responses: bool,
) -> (RequestRecord, Option<Outcome>) {
    let ns = |t: Instant| t.saturating_duration_since(phase_start).as_nanos() as u64;
    let usage_output = ex.completion_tokens.filter(|&n| n > 0);
    // One token per chunk when the server's count agrees; else count each chunk's text.
    let per_chunk_ones = usage_output == Some(ex.chunks.len() as u64);
    let chunks: Vec<Chunk> = ex
        .chunks
        .iter()
        .map(|&(t, a, b)| Chunk {
            t_ns: ns(t),
            tokens: if per_chunk_ones {
                1
            } else {
                (tokenizer.count(&ex.text[a..b]) as u32).max(1)
            },
        })
        .collect();
    let output_tokens =
        usage_output.unwrap_or_else(|| chunks.iter().map(|c| c.tokens as u64).sum());
    let input_tokens = ex
        .prompt_tokens
        .filter(|&n| n > 0)
        .unwrap_or(planned.input_tokens);
    let record = RequestRecord {
        phase,
        index: planned.index,
        tag: planned.tag.clone(),
        scheduled_ns: ns(scheduled),
        sent_ns: ns(sent),
        first_byte_ns: ex.first_byte.map(ns),
        chunks,
        end_ns: ns(ex.end),
        input_tokens,
        output_tokens: if ex.error.is_none() { output_tokens } else { 0 },
        output_tokens_from_usage: usage_output.is_some(),
        http_status: ex.status,
        error: ex.error,
    };
    let outcome = wants_responses.then(|| Outcome {
        phase,
        index: planned.index,
        tag: planned.tag.clone(),
        session: planned.session.clone(),
        ok: record.succeeded(),
        error: record.error.as_ref().map(|e| e.message.clone()),
        text: ex.text,
        ttft_ms: record.ttft_ns().unwrap_or(0) as f64 / 1e6,
        e2el_ms: record.e2el_ns().unwrap_or(0) as f64 / 1e6,
        input_tokens: record.input_tokens,
        output_tokens: record.output_tokens,
    });
    (record, outcome)
}

async fn collect(
    mut rx: mpsc::UnboundedReceiver<Collect>,
    mut records: Option<std::io::BufWriter<std::fs::File>>,
    path: Option<PathBuf>,
    options: MetricsOptions,
    live: Arc<Mutex<Live>>,
    outcomes: Option<std_mpsc::Sender<ToScenario>>,
) -> Result<(), EngineError> {
    let mut acc = PhaseAccumulator::new(&options);
    let mut write_error = None;
    while let Some(msg) = rx.recv().await {
        match msg {
            Collect::Record(record, outcome) => {
                if let (Some(w), None) = (records.as_mut(), &write_error) {
                    let line = serde_json::to_vec(&*record).unwrap_or_default();
                    if let Err(e) = w.write_all(&line).and_then(|_| w.write_all(b"\n")) {
                        write_error = Some(e);
                    }
                }
                acc.record(&record);
                {
                    let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                    if record.succeeded() {
                        l.snapshot.completed += 1;
                        l.snapshot.output_tokens += record.output_tokens;
                        if let (Some(t), Some(e)) = (record.ttft_ns(), record.e2el_ns()) {
                            let _ = l.ttft.record((t / 1000).max(1));
                            let _ = l.e2el.record((e / 1000).max(1));
                        }
                    } else {
                        l.snapshot.failed += 1;
                    }
                }
                if let (Some(tx), Some(o)) = (&outcomes, outcome) {
                    let _ = tx.send(ToScenario::Outcome(*o));
                }
            }
            Collect::EndPhase { info, reply } => {
                if let Some(w) = records.as_mut() {
                    if let Err(e) = w.flush() {
                        write_error.get_or_insert(e);
                    }
                }
                let _ = reply.send(acc.summarize(&info));
                acc = PhaseAccumulator::new(&options);
            }
        }
    }
    if let Some(w) = records.as_mut() {
        if let Err(e) = w.flush() {
            write_error.get_or_insert(e);
        }
    }
    match write_error {
        Some(source) => Err(EngineError::Records {
            path: path.map(|p| p.display().to_string()).unwrap_or_default(),
            source,
        }),
        None => Ok(()),
    }
}

/// Asks the scenario for request `index` of phase `p` and plans it; `None` ends the dataset.
#[allow(clippy::too_many_arguments)]
fn next_planned(
    scenario: &mut dyn Scenario,
    p: usize,
    index: u64,
    custom: bool,
    schedule: &mut Schedule,
    config: &EngineConfig,
    tokenizer: &Tokenizer,
    name: &str,
) -> Result<Option<Planned>, ScenarioError> {
    let Some(request) = scenario.next_request(p, index)? else {
        return Ok(None);
    };
    let offset = if schedule.is_closed_loop() && request.at.is_none() && request.delay.is_none() {
        None
    } else {
        let gap = if custom {
            Some(scenario.arrival(p, index)?)
        } else {
            None
        };
        Some(schedule.next(gap, request.at, request.delay))
    };
    plan(request, index, offset, config, tokenizer)
        .map(Some)
        .map_err(|message| ScenarioError::Invalid {
            file: name.to_string(),
            function: "next_request".into(),
            message,
        })
}

/// Applies one command during a phase; true when the phase ended.
fn apply(cmd: ToScenario, scenario: &mut dyn Scenario) -> Result<bool, ScenarioError> {
    match cmd {
        ToScenario::Outcome(o) => scenario.on_response(&o).map(|_| false),
        ToScenario::EndPhase => Ok(true),
        ToScenario::Start(_) => Ok(false),
    }
}

/// Prepares one request off the I/O path: body, digest, prompt length.
fn plan(
    spec: RequestSpec,
    index: u64,
    offset: Option<f64>,
    config: &EngineConfig,
    tokenizer: &Tokenizer,
) -> Result<Planned, String> {
    let prepared = prepare(&spec, config.api, &config.model, config.include_usage)?;
    let digest: [u8; 32] = Sha256::digest(&prepared.body).into();
    let input_tokens = spec.input_tokens.unwrap_or_else(|| match &spec.prompt {
        Prompt::Text(t) => tokenizer.count(t) as u64,
        Prompt::Tokens(ids) => ids.len() as u64,
        Prompt::Messages(m) => m
            .iter()
            .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
            .map(|c| tokenizer.count(c) as u64)
            .sum(),
    });
    Ok(Planned {
        index,
        offset,
        prepared,
        digest,
        input_tokens,
        tag: spec.tag,
        session: spec.session,
    })
}

/// What the scenario thread shares with the dispatcher.
struct ThreadContext {
    /// Set when the scenario's `stop` function ends the current phase.
    stop: watch::Sender<bool>,
    phases: Vec<PhaseSpec>,
    config: EngineConfig,
    tokenizer: Arc<Tokenizer>,
    live: Arc<Mutex<Live>>,
    /// Signalled once per phase when the queue is full (or the phase has no more requests).
    primed: Arc<tokio::sync::Notify>,
}

/// The scenario thread: waits for a phase to start, generates its requests ahead of time,
/// feeds back outcomes and evaluates the scenario's stop condition.
fn scenario_loop(
    scenario: &mut dyn Scenario,
    context: &ThreadContext,
    cmd_rx: std_mpsc::Receiver<ToScenario>,
    req_tx: mpsc::Sender<FromScenario>,
) {
    let ThreadContext {
        stop,
        phases,
        config,
        tokenizer,
        live,
        primed,
    } = context;
    let fail = |e: ScenarioError| {
        primed.notify_one();
        let _ = req_tx.blocking_send(FromScenario::Failed(e));
    };
    let closed = || {
        let _ = req_tx.blocking_send(FromScenario::Closed);
    };
    let name = scenario.describe().name.clone();
    while let Ok(cmd) = cmd_rx.recv() {
        let p = match cmd {
            ToScenario::Start(p) => p,
            other => match apply(other, scenario) {
                Ok(true) => {
                    closed();
                    continue;
                }
                Ok(false) => continue,
                Err(e) => return fail(e),
            },
        };
        stop.send_replace(false);
        let spec = &phases[p];
        let mut schedule = Schedule::new(&spec.arrival, config.seed, p);
        let custom = matches!(spec.arrival, crate::scenario::ArrivalSpec::Custom);
        let mut index = 0u64;
        let mut exhausted = false;
        let mut stop_sent = false;
        let mut last_check = Instant::now();
        let mut priming = true;
        loop {
            if priming && (exhausted || stop_sent || req_tx.capacity() == 0) {
                priming = false;
                primed.notify_one();
            }
            // Commands first: outcomes in order, and the end of the phase.
            let mut ended = false;
            while let Ok(cmd) = cmd_rx.try_recv() {
                match apply(cmd, scenario) {
                    Ok(e) => ended = e,
                    Err(e) => return fail(e),
                }
                if ended {
                    break;
                }
            }
            if ended {
                closed();
                break;
            }
            if scenario.has_stop() && !stop_sent && last_check.elapsed() >= STOP_CHECK_INTERVAL {
                last_check = Instant::now();
                let snapshot = live.lock().unwrap_or_else(|e| e.into_inner()).current();
                match scenario.stop(&snapshot) {
                    Ok(true) => {
                        stop_sent = true;
                        stop.send_replace(true);
                    }
                    Ok(false) => {}
                    Err(e) => return fail(e),
                }
            }
            if !exhausted && !stop_sent && spec.max_requests.is_some_and(|m| index >= m) {
                exhausted = true;
                let _ = req_tx.blocking_send(FromScenario::Exhausted);
            }
            // With nothing more to generate, or the queue full (the generator is far
            // enough ahead), wait a little, waking at once for an outcome or the end.
            let permit = if exhausted || stop_sent {
                None
            } else {
                match req_tx.try_reserve() {
                    Ok(permit) => Some(permit),
                    Err(mpsc::error::TrySendError::Full(())) => None,
                    Err(mpsc::error::TrySendError::Closed(())) => return,
                }
            };
            let Some(permit) = permit else {
                let wait = if exhausted || stop_sent {
                    STOP_CHECK_INTERVAL
                } else {
                    Duration::from_millis(2)
                };
                match cmd_rx.recv_timeout(wait) {
                    Ok(cmd) => match apply(cmd, scenario) {
                        Ok(true) => {
                            closed();
                            break;
                        }
                        Ok(false) => {}
                        Err(e) => return fail(e),
                    },
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                }
                continue;
            };
            match next_planned(
                scenario,
                p,
                index,
                custom,
                &mut schedule,
                config,
                tokenizer,
                &name,
            ) {
                Ok(Some(planned)) => permit.send(FromScenario::Request(Box::new(planned))),
                Ok(None) => {
                    exhausted = true;
                    permit.send(FromScenario::Exhausted);
                    continue;
                }
                Err(e) => {
                    primed.notify_one();
                    permit.send(FromScenario::Failed(e));
                    return;
                }
            }
            index += 1;
        }
    }
}
