//! The scenario thread: generates each phase's requests ahead of their send time, feeds
//! outcomes back to the scenario and evaluates its stop condition. Guest code runs only
//! here, never on the I/O path.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

use super::{EngineConfig, FromScenario, Live, Planned, ToScenario};
use crate::client::prepare;
use crate::scenario::{ArrivalSpec, Next, Prompt, RequestSpec, Scenario, ScenarioError};
use crate::schedule::Schedule;
use crate::shard::StreamEntry;
use crate::tokenizer::Tokenizer;

/// How often a scenario's `stop` function sees a fresh snapshot.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(20);
/// What the scenario thread makes of one `next_request` call.
enum Generated {
    Planned(Box<Planned>),
    Wait,
    Done,
}

/// Asks the scenario for request `index` of phase `p` and plans it.
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
) -> Result<Generated, ScenarioError> {
    let request = match scenario.next_request(p, index)? {
        Next::Request(r) => r,
        Next::Wait => return Ok(Generated::Wait),
        Next::Done => return Ok(Generated::Done),
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
        .map(|planned| Generated::Planned(Box::new(planned)))
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
        ToScenario::Start(..) | ToScenario::NextPhase(_) => Ok(false),
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
    let prepared = prepare(&spec, config.api, &config.model, config.usage)?;
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
        warmup: false,
    })
}

/// What the scenario thread shares with the dispatcher.
pub(super) struct ThreadContext {
    /// Set when the scenario's `stop` function ends the current phase.
    pub(super) stop: watch::Sender<bool>,
    /// Set when the scenario failed, before its error is queued: the dispatcher must not
    /// wait for requests ahead of it.
    pub(super) failed: watch::Sender<bool>,
    pub(super) config: EngineConfig,
    pub(super) tokenizer: Arc<Tokenizer>,
    pub(super) live: Arc<Mutex<Live>>,
    /// Signalled once per phase when the queue is full (or the phase has no more requests).
    pub(super) primed: Arc<tokio::sync::Notify>,
}

/// The scenario thread: waits for a phase to start, generates its requests ahead of time,
/// feeds back outcomes and evaluates the scenario's stop condition.
pub(super) fn scenario_loop(
    scenario: &mut dyn Scenario,
    context: &ThreadContext,
    cmd_rx: std_mpsc::Receiver<ToScenario>,
    req_tx: mpsc::Sender<FromScenario>,
) {
    let ThreadContext {
        stop,
        failed,
        config,
        tokenizer,
        live,
        primed,
    } = context;
    let fail = |e: ScenarioError| {
        primed.notify_one();
        failed.send_replace(true);
        let _ = req_tx.blocking_send(FromScenario::Failed(e));
    };
    let closed = || {
        let _ = req_tx.blocking_send(FromScenario::Closed);
    };
    let name = scenario.describe().name.clone();
    // A log that cannot be written leaves the merge without this shard's stream; the run
    // itself goes on (the CLI created the file, so this is rare).
    let mut stream_log = config
        .stream_log
        .as_ref()
        .and_then(|path| std::fs::File::create(path).ok())
        .map(std::io::BufWriter::new);
    while let Ok(cmd) = cmd_rx.recv() {
        let (p, spec) = match cmd {
            ToScenario::Start(p, spec) => (p, spec),
            // Between phases: an adaptive scenario picks the next one.
            ToScenario::NextPhase(history) => {
                let answer = match scenario.next_phase(&history) {
                    Ok(spec) => FromScenario::NextPhase(spec.map(Box::new)),
                    Err(e) => FromScenario::Failed(e),
                };
                if req_tx.blocking_send(answer).is_err() {
                    return;
                }
                continue;
            }
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
        let spec = &*spec;
        let mut schedule = Schedule::new(&spec.arrival, config.seed, p);
        let custom = matches!(spec.arrival, ArrivalSpec::Custom);
        let mut index = 0u64;
        // Requests of this phase sent to the dispatcher (a shard skips the others' stripes).
        let mut queued = 0u64;
        let takes_part = config.shard.as_ref().is_none_or(|s| s.takes_part(p));
        let mut exhausted = false;
        let mut stop_sent = false;
        let mut last_check = Instant::now();
        let mut priming = true;
        // A scenario that answered `Wait` is asked again once an outcome arrives; it
        // can only be woken while one of its requests is still to finish.
        let mut waiting = false;
        let mut answered = 0u64;
        loop {
            if waiting && answered >= queued {
                return fail(ScenarioError::Invalid {
                    file: name.clone(),
                    function: "next_request".into(),
                    message: format!(
                        "asked to wait for a response in phase {}, but none of its {index} requests is still in flight",
                        p + 1
                    ),
                });
            }
            // Primed: the queue is full, or nothing more can be generated for now.
            if priming && (exhausted || stop_sent || waiting || req_tx.capacity() == 0) {
                priming = false;
                primed.notify_one();
            }
            // Commands first: outcomes in order, and the end of the phase.
            let mut ended = false;
            while let Ok(cmd) = cmd_rx.try_recv() {
                if matches!(cmd, ToScenario::Outcome(_)) {
                    waiting = false;
                    answered += 1;
                }
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
            // `max_requests` counts global indices: a shard stops where the single run would.
            if !exhausted
                && !stop_sent
                && (!takes_part || spec.max_requests.is_some_and(|m| index >= m))
            {
                exhausted = true;
                let _ = req_tx.blocking_send(FromScenario::Exhausted);
            }
            // With nothing more to generate, or the queue full (the generator is far
            // enough ahead), wait a little, waking at once for an outcome or the end.
            let permit = if exhausted || stop_sent || waiting {
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
                    Ok(cmd) => {
                        if matches!(cmd, ToScenario::Outcome(_)) {
                            waiting = false;
                            answered += 1;
                        }
                        match apply(cmd, scenario) {
                            Ok(true) => {
                                closed();
                                break;
                            }
                            Ok(false) => {}
                            Err(e) => return fail(e),
                        }
                    }
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
                Ok(Generated::Planned(mut planned)) => {
                    if config.shard.as_ref().is_some_and(|s| !s.owns(p, index)) {
                        // Another shard's request: generated for the same stream, not sent.
                        index += 1;
                        continue;
                    }
                    if let Some(log) = stream_log.as_mut() {
                        log_entry(log, p, &planned);
                    }
                    planned.warmup = spec.warmup;
                    queued += 1;
                    permit.send(FromScenario::Request(planned))
                }
                Ok(Generated::Wait) => {
                    waiting = true;
                    continue;
                }
                Ok(Generated::Done) => {
                    exhausted = true;
                    permit.send(FromScenario::Exhausted);
                    continue;
                }
                Err(e) => {
                    primed.notify_one();
                    failed.send_replace(true);
                    permit.send(FromScenario::Failed(e));
                    return;
                }
            }
            index += 1;
        }
    }
}

/// Appends one request's digest entry to the stream log (see [`StreamEntry`]).
fn log_entry(log: &mut impl std::io::Write, phase: usize, planned: &Planned) {
    let entry = StreamEntry {
        phase,
        index: planned.index,
        offset_ns: planned
            .offset
            .map(|o| (o * 1e9).round() as i64)
            .unwrap_or(-1),
        body_sha256: hex::encode(planned.digest),
    };
    if let Ok(mut line) = serde_json::to_vec(&entry) {
        line.push(b'\n');
        let _ = log.write_all(&line);
    }
}
