//! The scenario thread: generates each phase's requests ahead of their send time, feeds
//! outcomes back to the scenario and evaluates its stop condition. Guest code runs only
//! here, never on the I/O path.

mod activity;
mod sessions;

use crate::both_sides::clock;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};

use crate::both_sides::clock::HoldGuard;
pub(super) use activity::Commands;
use activity::{CommandInbox, ThreadGone};

use super::live::Live;
use super::{EngineConfig, EngineError, FromScenario, Planned, ToScenario};
use crate::measuring::client::{prepare, RequestExtras};
use crate::measuring::digest::{RequestKey, StreamEntry};
use crate::measuring::schedule::Schedule;
use crate::workloads::scenario::{
    ArrivalSpec, Next, NoteValue, PhaseSpec, Prompt, RequestSpec, Scenario, ScenarioError,
};
use crate::workloads::tokenizer::Tokenizer;

/// How often a scenario's `stop` function sees a fresh snapshot.
pub(super) const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(20);

/// How long the generator sleeps with its queue full before it looks again (an outcome
/// or the end of the phase wakes it at once).
pub(super) const QUEUE_FULL_WAIT: Duration = Duration::from_millis(2);

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
}

/// The engine's side of the scenario thread.
pub(super) struct ScenarioLink {
    pub(super) commands: Commands,
    /// Requests generated ahead, and the thread's answers, in order.
    pub(super) queue: mpsc::Receiver<FromScenario>,
    /// Signalled once per phase when the queue is full (or the phase has no more requests).
    pub(super) primed: Arc<Notify>,
    thread: Notes,
    /// In virtual time, the clock waits for the thread while it is at work.
    _clock_hold: Option<HoldGuard>,
}

/// The scenario thread: it ends when its commands close, and hands back the scenario's
/// notes.
pub(super) type Notes = std::thread::JoinHandle<Vec<(String, NoteValue)>>;

impl ScenarioLink {
    /// Closes the channels, which ends the thread once its current call returns.
    pub(super) fn close(self) -> Notes {
        self.thread
    }
}

/// Starts the scenario thread.
pub(super) fn spawn(
    mut scenario: Box<dyn Scenario>,
    context: ThreadContext,
) -> Result<ScenarioLink, EngineError> {
    let (req_tx, queue) = mpsc::channel(context.config.lookahead.max(1));
    let (commands, cmd_rx) = activity::channel();
    let _clock_hold = commands.hold_clock(&req_tx);
    let primed = Arc::new(Notify::new());
    let thread_primed = primed.clone();
    let thread = std::thread::Builder::new()
        .name("scenario".into())
        .spawn(move || {
            let name = scenario.describe().name.clone();
            // Its channels close and its stream log is flushed before the notes are read.
            ScenarioThread {
                scenario: &mut *scenario,
                name,
                context: &context,
                commands: cmd_rx,
                queue: req_tx,
                primed: thread_primed,
                stream_log: None,
                warned_long_session: false,
            }
            .run();
            scenario.notes()
        })
        .map_err(|_| EngineError::ScenarioThread)?;
    Ok(ScenarioLink {
        commands,
        queue,
        primed,
        thread,
        _clock_hold,
    })
}

/// What happens after a command or a generated request.
pub(super) enum Flow {
    /// Go on with the phase.
    Continue,
    /// The phase ended (acknowledged to the engine).
    PhaseEnded,
    /// The thread ends: the scenario failed (the error is queued) or the engine is gone.
    Quit,
}

/// The scenario and the thread's ends of its channels.
pub(super) struct ScenarioThread<'a> {
    pub(super) scenario: &'a mut dyn Scenario,
    /// The scenario's name, for errors.
    pub(super) name: String,
    pub(super) context: &'a ThreadContext,
    pub(super) commands: CommandInbox,
    pub(super) queue: mpsc::Sender<FromScenario>,
    pub(super) primed: Arc<Notify>,
    /// The stream log of a sharded run (`EngineConfig::stream_log`).
    stream_log: Option<BufWriter<File>>,
    /// A long session was warned of (once a run: `sessions::SessionGenerator`).
    pub(super) warned_long_session: bool,
}

impl ScenarioThread<'_> {
    /// Waits for a phase to start, generates it, and so on until the engine is gone.
    fn run(mut self) {
        // A log that cannot be written leaves the merge without this shard's stream; the run
        // itself goes on (the CLI created the file, so this is rare).
        self.stream_log = self
            .context
            .config
            .stream_log
            .as_ref()
            .and_then(|path| File::create(path).ok())
            .map(BufWriter::new);
        while let Ok(cmd) = self.commands.recv() {
            let flow = match cmd {
                ToScenario::Start(p, spec) if spec.sessions.is_some() => {
                    sessions::SessionGenerator::new(&mut self, p, &spec).run()
                }
                ToScenario::Start(p, spec) => PhaseGenerator::new(&mut self, p, &spec).run(),
                // Between phases: an adaptive scenario picks the next one.
                ToScenario::NextPhase(history) => {
                    let answer = match self.scenario.next_phase(&history) {
                        Ok(spec) => FromScenario::NextPhase(spec.map(Box::new)),
                        Err(e) => FromScenario::Failed(e),
                    };
                    match self.send_blocking(answer) {
                        Ok(()) => Flow::Continue,
                        Err(_) => Flow::Quit,
                    }
                }
                other => self.apply(other),
            };
            if let Flow::Quit = flow {
                return;
            }
        }
    }

    /// Applies a command that is not a phase start; the phase's end is acknowledged.
    pub(super) fn apply(&mut self, cmd: ToScenario) -> Flow {
        let result = match cmd {
            // A scenario of sessions hears of its requests without `on_response`: an
            // outcome of another phase's session, or of a phase without sessions, has
            // nowhere to go.
            ToScenario::Outcome(o) if self.scenario.wants_responses() => {
                self.scenario.on_response(&o).map(|()| Flow::Continue)
            }
            ToScenario::Outcome(_) => Ok(Flow::Continue),
            ToScenario::EndPhase => Ok(Flow::PhaseEnded),
            ToScenario::Wake => Ok(Flow::Continue),
            ToScenario::Start(..) | ToScenario::NextPhase(_) => Ok(Flow::Continue),
        };
        match result {
            Ok(Flow::PhaseEnded) => {
                let _ = self.send_blocking(FromScenario::Closed);
                Flow::PhaseEnded
            }
            Ok(flow) => flow,
            Err(e) => self.fail(e),
        }
    }

    /// Queues the scenario's error behind the requests generated ahead, after telling the
    /// dispatcher not to wait for those.
    pub(super) fn fail(&self, e: ScenarioError) -> Flow {
        self.primed.notify_one();
        self.context.failed.send_replace(true);
        let _ = self.send_blocking(FromScenario::Failed(e));
        Flow::Quit
    }

    /// Queues `answer`, waiting for a slot when the queue is full.
    pub(super) fn send_blocking(&self, answer: FromScenario) -> Result<(), ThreadGone> {
        self.commands
            .blocked(true, || self.queue.blocking_send(answer))
            .map_err(|_| ThreadGone)
    }

    /// Appends one request's line to the stream log (see [`StreamEntry`]).
    pub(super) fn log(&mut self, phase: usize, planned: &Planned) {
        self.log_key(&planned.key(phase));
    }

    /// Whether this run keeps a stream log (a shard's).
    pub(super) fn logs_stream(&self) -> bool {
        self.stream_log.is_some()
    }

    /// Appends one request's key to the stream log.
    pub(super) fn log_key(&mut self, key: &RequestKey) {
        let Some(log) = self.stream_log.as_mut() else {
            return;
        };
        if let Ok(mut line) = serde_json::to_vec(&StreamEntry::from(key)) {
            line.push(b'\n');
            let _ = log.write_all(&line);
        }
    }
}

/// Whether more of a phase's requests can be generated.
#[derive(Clone, Copy, PartialEq)]
enum Supply {
    Open,
    /// The dataset or the request budget ran out (the dispatcher was told).
    Exhausted,
    /// The scenario's `stop` held (the dispatcher was told).
    Stopped,
}

/// One phase's generation on the scenario thread.
struct PhaseGenerator<'t, 'a> {
    thread: &'t mut ScenarioThread<'a>,
    phase: usize,
    spec: &'t PhaseSpec,
    schedule: Schedule,
    /// Global index of the next request to ask for.
    index: u64,
    /// Requests of this phase sent to the dispatcher (a shard skips the others' stripes).
    queued: u64,
    /// Outcomes of this phase's requests received.
    answered: u64,
    /// This shard sends something in this phase (always, unsharded).
    takes_part: bool,
    supply: Supply,
    /// The scenario answered `Wait`: it is asked again once an outcome arrives, so one of
    /// its requests must still be in flight.
    waiting: bool,
    /// The engine has not yet been told the queue is primed.
    priming: bool,
    last_stop_check: Instant,
}

impl<'t, 'a> PhaseGenerator<'t, 'a> {
    fn new(thread: &'t mut ScenarioThread<'a>, phase: usize, spec: &'t PhaseSpec) -> Self {
        let context = thread.context;
        let config = &context.config;
        let schedule = Schedule::new(&spec.arrival, config.seed, phase);
        let takes_part = config.shard.as_ref().is_none_or(|s| s.takes_part(phase));
        context.stop.send_replace(false);
        PhaseGenerator {
            thread,
            phase,
            spec,
            schedule,
            index: 0,
            queued: 0,
            answered: 0,
            takes_part,
            supply: Supply::Open,
            waiting: false,
            priming: true,
            last_stop_check: clock::now(),
        }
    }

    /// Generates until the phase ends (or the thread must).
    fn run(mut self) -> Flow {
        loop {
            let flow = self.step();
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
    }

    /// One round: commands, the stop condition, then one request when the queue has room.
    fn step(&mut self) -> Flow {
        if self.waiting && self.answered >= self.queued {
            return self.thread.fail(ScenarioError::Invalid {
                file: self.thread.name.clone(),
                function: "next_request".into(),
                message: format!(
                    "asked to wait for a response in phase {}, but none of its {} requests is still in flight",
                    self.phase + 1,
                    self.index
                ),
            });
        }
        let idle = self.supply != Supply::Open || self.waiting;
        if self.priming && (idle || self.thread.queue.capacity() == 0) {
            self.priming = false;
            self.thread.primed.notify_one();
        }
        // Commands first: outcomes in order, and the end of the phase.
        while let Ok(cmd) = self.thread.commands.try_recv() {
            let flow = self.command(cmd);
            if !matches!(flow, Flow::Continue) {
                return flow;
            }
        }
        if let Err(e) = self.check_stop() {
            return self.thread.fail(e);
        }
        // `max_requests` counts global indices: a shard stops where the single run would.
        if self.supply == Supply::Open
            && (!self.takes_part || self.spec.max_requests.is_some_and(|m| self.index >= m))
        {
            self.supply = Supply::Exhausted;
            let _ = self.thread.send_blocking(FromScenario::Exhausted);
        }
        self.generate()
    }

    /// Applies one command during the phase.
    fn command(&mut self, cmd: ToScenario) -> Flow {
        if matches!(cmd, ToScenario::Outcome(_)) {
            self.waiting = false;
            self.answered += 1;
        }
        self.thread.apply(cmd)
    }

    /// Asks the scenario's `stop` function, at most every [`STOP_CHECK_INTERVAL`].
    fn check_stop(&mut self) -> Result<(), ScenarioError> {
        if !self.thread.scenario.has_stop()
            || self.supply == Supply::Stopped
            || clock::since(self.last_stop_check) < STOP_CHECK_INTERVAL
        {
            return Ok(());
        }
        self.last_stop_check = clock::now();
        let context = self.thread.context;
        let snapshot = context
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .current();
        if self.thread.scenario.stop(&snapshot)? {
            self.supply = Supply::Stopped;
            context.stop.send_replace(true);
        }
        Ok(())
    }

    /// Generates the next request when there is room in the queue; otherwise waits a
    /// little, waking at once for an outcome or the end of the phase.
    fn generate(&mut self) -> Flow {
        let permit = if self.supply != Supply::Open || self.waiting {
            None
        } else {
            // Owned: the scenario is asked for the request while the slot is held.
            match self.thread.queue.clone().try_reserve_owned() {
                Ok(permit) => Some(permit),
                Err(mpsc::error::TrySendError::Full(_)) => None,
                Err(mpsc::error::TrySendError::Closed(_)) => return Flow::Quit,
            }
        };
        let Some(permit) = permit else {
            return self.wait_for_command();
        };
        match self.next_planned() {
            Ok(Generated::Planned(mut planned)) => {
                let context = self.thread.context;
                let shard = context.config.shard.as_ref();
                // Another shard's request: generated for the same stream, not sent.
                if shard.is_none_or(|s| s.owns(self.phase, self.index)) {
                    self.thread.log(self.phase, &planned);
                    planned.warmup = self.spec.warmup;
                    self.queued += 1;
                    permit.send(FromScenario::Request(planned));
                }
                self.index += 1;
            }
            Ok(Generated::Wait) => self.waiting = true,
            Ok(Generated::Done) => {
                self.supply = Supply::Exhausted;
                permit.send(FromScenario::Exhausted);
            }
            Err(e) => {
                self.thread.primed.notify_one();
                self.thread.context.failed.send_replace(true);
                permit.send(FromScenario::Failed(e));
                return Flow::Quit;
            }
        }
        Flow::Continue
    }

    /// Nothing to generate now: waits for a command, a little.
    fn wait_for_command(&mut self) -> Flow {
        let wait = match self.supply {
            Supply::Open => QUEUE_FULL_WAIT,
            Supply::Exhausted | Supply::Stopped => STOP_CHECK_INTERVAL,
        };
        let wants_room = self.supply == Supply::Open && !self.waiting;
        // A scenario's `stop` is asked as often on the simulated clock as on the real one.
        let look_again = self
            .thread
            .scenario
            .has_stop()
            .then_some(STOP_CHECK_INTERVAL);
        match self
            .thread
            .commands
            .recv_timeout(wait, wants_room, look_again)
        {
            Ok(cmd) => self.command(cmd),
            Err(std_mpsc::RecvTimeoutError::Timeout) => Flow::Continue,
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Flow::Quit,
        }
    }

    /// Asks the scenario for the request at `index` and plans it.
    fn next_planned(&mut self) -> Result<Generated, ScenarioError> {
        let (phase, index) = (self.phase, self.index);
        let scenario = &mut *self.thread.scenario;
        let request = match scenario.next_request(phase, index)? {
            Next::Request(r) => *r,
            Next::Wait => return Ok(Generated::Wait),
            Next::Done => return Ok(Generated::Done),
        };
        let closed = self.schedule.is_closed_loop();
        let offset = if closed && request.at.is_none() && request.delay.is_none() {
            None
        } else {
            let gap = match self.spec.arrival {
                ArrivalSpec::Custom => Some(scenario.arrival(phase, index)?),
                _ => None,
            };
            Some(self.schedule.next(gap, request.at, request.delay))
        };
        let context = self.thread.context;
        plan(request, index, offset, &context.config, &context.tokenizer)
            .map(|planned| Generated::Planned(Box::new(planned)))
            .map_err(|message| ScenarioError::Invalid {
                file: self.thread.name.clone(),
                function: "next_request".into(),
                message,
            })
    }
}

/// What the scenario thread makes of one `next_request` call.
enum Generated {
    Planned(Box<Planned>),
    Wait,
    Done,
}

/// Prepares one request off the I/O path: body, digest, prompt length.
pub(super) fn plan(
    spec: RequestSpec,
    index: u64,
    offset: Option<f64>,
    config: &EngineConfig,
    tokenizer: &Tokenizer,
) -> Result<Planned, String> {
    let target = target_of(spec.target, index, config.targets)?;
    let model = config.target_models.get(target).unwrap_or(&config.model);
    let prepared = prepare(&spec, config.api, model, config.usage)?;
    let extras = RequestExtras::of(&spec).map_err(|e| e.to_string())?;
    let body_sha256 = RequestKey::body_digest(&prepared.body);
    let input_tokens = spec.input_tokens.unwrap_or_else(|| match &spec.prompt {
        Prompt::Text(t) => tokenizer.count(t) as u64,
        Prompt::Tokens(ids) => ids.len() as u64,
        Prompt::Messages(m) => m
            .iter()
            .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
            .map(|c| tokenizer.count(c) as u64)
            .sum(),
        Prompt::Inputs(texts) => texts.iter().map(|t| tokenizer.count(t) as u64).sum(),
    });
    Ok(Planned {
        index,
        offset,
        prepared,
        body_sha256,
        input_tokens,
        // A scenario may tag a request with what a server echoed.
        tag: spec.tag.map(crate::safeguards::redact::string),
        session: spec.session,
        warmup: false,
        extras,
        target,
        session_record: Default::default(),
        key_offset: offset,
    })
}

/// The target a request goes to: the one it names, else round-robin by its index in the
/// phase (so every shard of a run picks as the single run would).
fn target_of(named: Option<usize>, index: u64, targets: usize) -> Result<usize, String> {
    let targets = targets.max(1);
    match named {
        Some(t) if t < targets => Ok(t),
        Some(t) => Err(format!(
            "the request names target {t}, but the run has {targets} --target{} (indices 0 to {})",
            if targets == 1 { "" } else { "s" },
            targets - 1
        )),
        None => Ok((index % targets as u64) as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_round_robin_unless_they_name_a_target() {
        let picks: Vec<usize> = (0..6).map(|i| target_of(None, i, 3).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        assert_eq!(target_of(Some(1), 0, 3), Ok(1));
        assert_eq!(target_of(None, 7, 1), Ok(0));
        let e = target_of(Some(2), 0, 2).unwrap_err();
        assert!(e.contains("target 2") && e.contains("0 to 1"), "{e}");
        assert!(target_of(Some(1), 0, 1)
            .unwrap_err()
            .contains("1 --target "));
    }
}
