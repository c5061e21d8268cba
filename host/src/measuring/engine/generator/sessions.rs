//! A phase of sessions on the scenario thread. The phase's arrival process times when its
//! root sessions start (a closed loop keeps that many open at once); each session's first
//! step is asked when it starts, each later one when its last request ends (or, after a
//! fan-out, when its last child ends), and the wait the step asks for (think time, a tool's
//! latency) is scheduled here, not polled by the scenario. Steps wait in a queue ordered by
//! send time and go to the dispatcher, which sends in queue order, shortly before they are
//! due: a session whose tool answers in 0.5 s is never held behind one that waits 30 s.
//!
//! What makes a sessions run reproducible, and splittable into shards: each request's index
//! is a hash of its session's id and step, not the order sessions happened to interleave in;
//! its digest key takes the wait it asked for rather than its send time; its random draws
//! come from its session's own stream (`HostContext::enter_session`); and a shard runs
//! whole root sessions, chosen by a hash of their id (children go where their root goes).

use crate::both_sides::clock;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::{plan, Flow, ScenarioThread, QUEUE_FULL_WAIT, STOP_CHECK_INTERVAL};
use crate::measuring::digest::RequestKey;
use crate::measuring::engine::{FromScenario, Planned, ToScenario};
use crate::measuring::metrics::SessionRecord;
use crate::measuring::schedule::Schedule;
use crate::workloads::scenario::{
    ArrivalSpec, Outcome, PhaseSpec, RequestSpec, ScenarioError, SessionState, Step,
};

/// How long before its send time a step goes to the dispatcher: enough for the
/// dispatcher to wait for it on its own clock, short enough that a step asked later but
/// due sooner seldom finds one ahead of it.
const RELEASE_AHEAD_S: f64 = 0.05;
/// Sessions open at once (roots and children): a fan-out that never ends is an error, not
/// a machine out of memory.
const MAX_OPEN_SESSIONS: usize = 100_000;
/// The longest session id (a child's holds its ancestors' names).
const MAX_SESSION_ID_BYTES: usize = 1024;
/// A session open this long (seconds on the run's clock) is warned of, once a run: far
/// beyond the bundled agents' (40 turns of at most 30 s tools, about 20 minutes).
const LONG_SESSION_S: f64 = 3600.0;
/// The shortest look-ahead in virtual time: a step due in less than a nanosecond's
/// rounding must still move the clock, or the thread would wake at the same instant.
const MIN_LOOK_AGAIN: Duration = Duration::from_micros(1);

/// A session that has started and not ended.
#[derive(Default)]
struct Open {
    /// Steps asked so far.
    step: u32,
    /// Requests sent so far.
    turns: u32,
    parent: Option<String>,
    /// After a fan-out: its children, in the order they were opened, and how many of
    /// them have not ended.
    children: Vec<String>,
    children_left: usize,
    /// The children it joins at its next step: all of them, in the order they were
    /// opened (the order they ended depends on the server's timing, which must not reach
    /// the request stream).
    joined: Vec<String>,
    /// Its last answer called tools, so the wait before its next request is a tool's.
    tool_wait: bool,
    /// The first step of a root in an open loop: its scheduled start.
    start: Option<f64>,
    /// When it opened, seconds into the phase (for the warning of a long session).
    opened: f64,
}

/// A planned request waiting for its send time.
struct Due {
    /// Seconds from the phase start; `None`: as soon as a slot frees.
    offset: Option<f64>,
    /// Order of planning, among steps due at the same time.
    seq: u64,
    planned: Box<Planned>,
}

impl Due {
    fn sort_key(&self) -> (f64, u64) {
        sort_key(self.offset, self.seq)
    }
}

/// Steps due sooner first; a step due as soon as a slot frees before any timed one;
/// among equal times, the one planned first.
fn sort_key(offset: Option<f64>, seq: u64) -> (f64, u64) {
    (offset.unwrap_or(f64::NEG_INFINITY), seq)
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.sort_key(), other.sort_key());
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
    }
}

/// Where a step's wait is counted from: when the request before it ended (or, for a
/// root, its scheduled start), seconds into the phase; `None` for a closed loop's root,
/// which starts when a slot frees.
type Base = Option<f64>;

/// One phase of sessions being generated.
pub(super) struct SessionGenerator<'t, 'a> {
    thread: &'t mut ScenarioThread<'a>,
    phase: usize,
    spec: &'t PhaseSpec,
    schedule: Schedule,
    /// Root sessions of the phase, and the next one to start.
    roots: u64,
    next_root: u64,
    /// Closed loop: root sessions open at once.
    root_cap: Option<u64>,
    open_roots: u64,
    sessions: HashMap<String, Open>,
    due: BinaryHeap<Reverse<Due>>,
    seq: u64,
    /// The session of each request in flight, by its index.
    in_flight: HashMap<u64, String>,
    /// A shard's stream log of this phase, written in index order at the phase's end
    /// (`runner merge` reads each log in that order, as a single run's digest takes it).
    logged: Vec<RequestKey>,
    /// The scenario's `stop` held: nothing more is asked.
    stopped: bool,
    exhausted: bool,
    priming: bool,
    last_stop_check: Instant,
}

impl<'t, 'a> SessionGenerator<'t, 'a> {
    pub(super) fn new(
        thread: &'t mut ScenarioThread<'a>,
        phase: usize,
        spec: &'t PhaseSpec,
    ) -> Self {
        let context = thread.context;
        context.stop.send_replace(false);
        let takes_part = context
            .config
            .shard
            .as_ref()
            .is_none_or(|s| s.takes_part(phase));
        let root_cap = match spec.arrival {
            ArrivalSpec::Closed { concurrency } => Some(concurrency),
            _ => None,
        };
        SessionGenerator {
            schedule: Schedule::new(&spec.arrival, context.config.seed, phase),
            thread,
            phase,
            spec,
            roots: if takes_part {
                spec.sessions.unwrap_or(0)
            } else {
                0
            },
            next_root: 0,
            root_cap,
            open_roots: 0,
            sessions: HashMap::new(),
            due: BinaryHeap::new(),
            seq: 0,
            in_flight: HashMap::new(),
            logged: Vec::new(),
            stopped: false,
            exhausted: false,
            priming: true,
            last_stop_check: clock::now(),
        }
    }

    /// Generates until the phase ends (or the thread must).
    pub(super) fn run(mut self) -> Flow {
        loop {
            let flow = match self.round() {
                Ok(flow) => flow,
                Err(e) => self.thread.fail(e),
            };
            if !matches!(flow, Flow::Continue) {
                self.logged.sort_by_key(|k| k.index);
                for key in std::mem::take(&mut self.logged) {
                    self.thread.log_key(&key);
                }
                return flow;
            }
        }
    }

    /// One round: commands, the stop condition, new roots, releases; then a short wait.
    fn round(&mut self) -> Result<Flow, ScenarioError> {
        while let Ok(cmd) = self.thread.commands.try_recv() {
            match cmd {
                ToScenario::Outcome(o) => self.on_outcome(o)?,
                other => {
                    let flow = self.thread.apply(other);
                    if !matches!(flow, Flow::Continue) {
                        return Ok(flow);
                    }
                }
            }
        }
        self.check_stop()?;
        // Until neither starts nor releases anything: a release makes room for roots, and
        // a root due now must not wait for the next round (in virtual time the clock may
        // jump ahead while the thread waits).
        loop {
            let before = (self.next_root, self.due.len());
            if !self.stopped {
                self.start_roots()?;
            }
            if let Flow::Quit = self.release() {
                return Ok(Flow::Quit);
            }
            if (self.next_root, self.due.len()) == before {
                break;
            }
        }
        if self.priming {
            self.priming = false;
            self.thread.primed.notify_one();
        }
        if !self.exhausted && self.all_ended() {
            self.exhausted = true;
            if self.thread.send_blocking(FromScenario::Exhausted).is_err() {
                return Ok(Flow::Quit);
            }
        }
        Ok(self.wait_for_command())
    }

    fn all_ended(&self) -> bool {
        self.next_root >= self.roots && self.sessions.is_empty() && self.due.is_empty()
    }

    /// Waits a little for a command; at once on an outcome or the end of the phase. In
    /// virtual time the clock stops when the next step comes due (see [`Self::next_look`]),
    /// so a session's wait of 1,000 s is one jump, not 500,000 looks 2 ms apart.
    fn wait_for_command(&mut self) -> Flow {
        let (look_again, wants_room) = self.next_look();
        match self
            .thread
            .commands
            .recv_timeout(QUEUE_FULL_WAIT, wants_room, look_again)
        {
            Ok(ToScenario::Outcome(o)) => match self.on_outcome(o) {
                Ok(()) => Flow::Continue,
                Err(e) => self.thread.fail(e),
            },
            Ok(cmd) => self.thread.apply(cmd),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Flow::Continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Flow::Quit,
        }
    }

    /// When time next matters here: the first queued step comes within [`RELEASE_AHEAD_S`]
    /// of its send time, or the scenario's `stop` is due a look (a full queue: shortly).
    /// And whether a step is due already, held back by a full queue: then free slots wake
    /// the thread.
    fn next_look(&self) -> (Option<Duration>, bool) {
        let stop_look =
            (self.thread.scenario.has_stop() && !self.stopped).then_some(STOP_CHECK_INTERVAL);
        let Some(Reverse(head)) = self.due.peek() else {
            return (stop_look, false);
        };
        let until = head
            .offset
            .map_or(0.0, |o| o - RELEASE_AHEAD_S - self.now());
        if until <= 0.0 {
            // As before virtual time jumped: looked at again soon, as the queue drains.
            return (Some(QUEUE_FULL_WAIT), true);
        }
        let head_look = Duration::try_from_secs_f64(until)
            .ok()
            .map(|d| d.max(MIN_LOOK_AGAIN));
        let look = match (head_look, stop_look) {
            (Some(h), Some(s)) => Some(h.min(s)),
            (h, s) => h.or(s),
        };
        (look, false)
    }

    /// Seconds since the phase started (while it primes, since it was announced).
    fn now(&self) -> f64 {
        let live = self.thread.context.live.lock();
        let live = live.unwrap_or_else(|e| e.into_inner());
        clock::since(live.phase_start).as_secs_f64()
    }

    /// Asks the scenario's `stop` function, at most every [`STOP_CHECK_INTERVAL`].
    fn check_stop(&mut self) -> Result<(), ScenarioError> {
        if !self.thread.scenario.has_stop()
            || self.stopped
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
            self.stopped = true;
            context.stop.send_replace(true);
        }
        Ok(())
    }

    /// Starts root sessions: in an open loop as far ahead as the lookahead allows, in a
    /// closed loop while fewer than its width are open.
    fn start_roots(&mut self) -> Result<(), ScenarioError> {
        let lookahead = self.thread.context.config.lookahead.max(1);
        while self.next_root < self.roots && self.due.len() < lookahead {
            if self.root_cap.is_some_and(|cap| self.open_roots >= cap) {
                break;
            }
            let root = self.next_root;
            self.next_root += 1;
            // Every shard draws every root's start, so each start is the single run's.
            let start = match self.root_cap {
                Some(_) => None,
                None => Some(self.next_start(root)?),
            };
            let id = root.to_string();
            if !self.owns(&id) {
                continue;
            }
            self.open_roots += 1;
            let open = Open {
                start,
                opened: self.now(),
                ..Open::default()
            };
            self.sessions.insert(id.clone(), open);
            self.advance(&id, None, start)?;
        }
        Ok(())
    }

    /// The scheduled start of root session `root` in an open loop.
    fn next_start(&mut self, root: u64) -> Result<f64, ScenarioError> {
        let gap = match self.spec.arrival {
            ArrivalSpec::Custom => Some(self.thread.scenario.arrival(self.phase, root)?),
            _ => None,
        };
        Ok(self.schedule.next(gap, None, None))
    }

    /// Whether this process runs root session `id` (always, unsharded).
    fn owns(&self, id: &str) -> bool {
        let config = &self.thread.context.config;
        config.shard.as_ref().is_none_or(|s| {
            s.owns(
                self.phase,
                session_hash(config.seed, self.phase, id, None) >> 1,
            )
        })
    }

    /// A request ended: its session's next step.
    fn on_outcome(&mut self, o: Outcome) -> Result<(), ScenarioError> {
        let Some(id) = self.in_flight.remove(&o.index) else {
            return Ok(());
        };
        if self.stopped {
            return Ok(());
        }
        let end = o.end_s;
        if let Some(open) = self.sessions.get_mut(&id) {
            open.tool_wait = !o.tool_calls.is_empty();
        }
        self.advance(&id, Some(o), Some(end))
    }

    /// Asks session `id` for its next step and carries it out.
    fn advance(
        &mut self,
        id: &str,
        last: Option<Outcome>,
        base: Base,
    ) -> Result<(), ScenarioError> {
        let Some((step, opened)) = self.sessions.get(id).map(|o| (o.step, o.opened)) else {
            return Ok(());
        };
        self.watch_length(id, step, opened)?;
        let Some(open) = self.sessions.get_mut(id) else {
            return Ok(());
        };
        let state = SessionState {
            phase: self.phase,
            id: id.to_string(),
            step: open.step,
            last,
            joined: std::mem::take(&mut open.joined),
        };
        open.step += 1;
        match self.thread.scenario.session_step(&state)? {
            Step::Send { request, after } => self.send(id, state.step, *request, after, base),
            Step::FanOut(names) => self.fan_out(id, &names, base),
            Step::End => self.end(id, base),
        }
    }

    /// Bounds a session's steps (`--max-steps-per-session`: a scenario that never ends its
    /// sessions would send until stopped) and warns, once a run, of a session past a tenth
    /// of the bound or open [`LONG_SESSION_S`].
    fn watch_length(&mut self, id: &str, step: u32, opened: f64) -> Result<(), ScenarioError> {
        let bound = self.thread.context.config.max_steps_per_session.max(1);
        let phase = &self.spec.name;
        if step >= bound {
            return Err(ScenarioError::Runaway {
                file: self.thread.name.clone(),
                message: format!(
                    "session {id} of phase `{phase}` reached {bound} steps, the most one may take: its session_step never ended it (return () to end a session; s.kind tells \"answer\" from \"join\"); --max-steps-per-session N raises the bound"
                ),
            });
        }
        let open_s = self.now() - opened;
        let long = step == (bound / 10).max(1) || open_s >= LONG_SESSION_S;
        if long && !self.thread.warned_long_session {
            self.thread.warned_long_session = true;
            crate::errln!(
                "warning: session {id} of phase `{phase}` has taken {step} steps in {open_s:.0} s; the run ends once a session reaches {bound} (--max-steps-per-session): does its session_step return () to end it?"
            );
        }
        Ok(())
    }

    /// Plans a session's request and queues it for its send time.
    fn send(
        &mut self,
        id: &str,
        step: u32,
        mut request: RequestSpec,
        after: f64,
        base: Base,
    ) -> Result<(), ScenarioError> {
        let offset = match base {
            Some(b) => Some(b + after),
            None if after > 0.0 => Some(self.now() + after),
            None => None,
        };
        let context = self.thread.context;
        let config = &context.config;
        if let Some(name) = &config.session_header {
            request
                .headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            request
                .headers
                .push((name.clone(), session_header_value(self.phase, id)));
        }
        request.session = Some(id.to_string());
        let index = session_hash(config.seed, self.phase, id, Some(step)) >> 11;
        let mut planned =
            plan(request, index, offset, config, &context.tokenizer).map_err(|message| {
                ScenarioError::Invalid {
                    file: self.thread.name.clone(),
                    function: "session_step".into(),
                    message,
                }
            })?;
        planned.warmup = self.spec.warmup;
        let Some(open) = self.sessions.get_mut(id) else {
            return Ok(());
        };
        planned.key_offset = Some(open.start.take().unwrap_or(0.0) + after);
        planned.session_record = SessionRecord {
            session: Some(id.to_string()),
            session_step: Some(step),
            turn: Some(open.turns),
            wait_ns: Some((after * 1e9).round() as u64),
            tool_wait: open.tool_wait,
        };
        open.turns += 1;
        self.in_flight.insert(index, id.to_string());
        self.seq += 1;
        self.due.push(Reverse(Due {
            offset,
            seq: self.seq,
            planned: Box::new(planned),
        }));
        Ok(())
    }

    /// Opens a session's children and asks each for its first step.
    fn fan_out(&mut self, id: &str, names: &[String], base: Base) -> Result<(), ScenarioError> {
        if self.sessions.len() + names.len() > MAX_OPEN_SESSIONS {
            return Err(self.invalid(format!(
                "session {id} fans out past {MAX_OPEN_SESSIONS} sessions open at once"
            )));
        }
        let children: Vec<String> = names.iter().map(|n| format!("{id}/{n}")).collect();
        if let Some(long) = children.iter().find(|c| c.len() > MAX_SESSION_ID_BYTES) {
            return Err(self.invalid(format!(
                "a child's id is {} bytes, over {MAX_SESSION_ID_BYTES} (fan-outs nested too deep?)",
                long.len()
            )));
        }
        if let Some(open) = self.sessions.get_mut(id) {
            open.children_left = children.len();
            open.children = children.clone();
        }
        let opened = self.now();
        for child in &children {
            let open = Open {
                parent: Some(id.to_string()),
                opened,
                ..Open::default()
            };
            self.sessions.insert(child.clone(), open);
        }
        for child in &children {
            self.advance(child, None, base)?;
        }
        Ok(())
    }

    /// A session ended: its parent hears of it once its last child ended; a closed loop's
    /// slot frees with a root.
    fn end(&mut self, id: &str, base: Base) -> Result<(), ScenarioError> {
        let Some(open) = self.sessions.remove(id) else {
            return Ok(());
        };
        let Some(parent) = open.parent else {
            self.open_roots = self.open_roots.saturating_sub(1);
            return Ok(());
        };
        let Some(p) = self.sessions.get_mut(&parent) else {
            return Ok(());
        };
        p.children_left = p.children_left.saturating_sub(1);
        if p.children_left == 0 {
            p.joined = std::mem::take(&mut p.children);
            self.advance(&parent, None, base)?;
        }
        Ok(())
    }

    /// Hands the dispatcher every step due within [`RELEASE_AHEAD_S`], in send order,
    /// while its queue has room.
    fn release(&mut self) -> Flow {
        if self.due.is_empty() {
            return Flow::Continue;
        }
        let horizon = self.now() + RELEASE_AHEAD_S;
        while let Some(Reverse(head)) = self.due.peek() {
            if head.offset.is_some_and(|o| o > horizon) {
                break;
            }
            let permit = match self.thread.queue.clone().try_reserve_owned() {
                Ok(permit) => permit,
                Err(mpsc::error::TrySendError::Full(_)) => break,
                Err(mpsc::error::TrySendError::Closed(_)) => return Flow::Quit,
            };
            let Some(Reverse(due)) = self.due.pop() else {
                break;
            };
            if self.thread.logs_stream() {
                self.logged.push(due.planned.key(self.phase));
            }
            permit.send(FromScenario::Request(due.planned));
        }
        Flow::Continue
    }

    fn invalid(&self, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.thread.name.clone(),
            function: "session_step".into(),
            message,
        }
    }
}

/// A session's (or, with `step`, one of its requests') place in the run: sha256 over
/// the run's seed, the phase, the session's id and the step, as a number.
fn session_hash(seed: u64, phase: usize, id: &str, step: Option<u32>) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update((phase as u64).to_le_bytes());
    h.update((id.len() as u64).to_le_bytes());
    h.update(id.as_bytes());
    if let Some(step) = step {
        h.update(step.to_le_bytes());
    }
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 of 32 bytes"))
}

/// The session-affinity header's value: the same for every request of a session, and
/// different for any two sessions of the run (a child is a session of its own).
fn session_header_value(phase: usize, id: &str) -> String {
    format!("p{phase}-s{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_indices_are_the_sessions_and_steps_not_the_order() {
        let a = session_hash(42, 0, "3", Some(1)) >> 11;
        assert_eq!(a, session_hash(42, 0, "3", Some(1)) >> 11);
        assert_ne!(a, session_hash(42, 0, "3", Some(2)) >> 11);
        assert_ne!(a, session_hash(42, 0, "31", Some(1)) >> 11);
        assert_ne!(a, session_hash(42, 1, "3", Some(1)) >> 11);
        assert_ne!(a, session_hash(43, 0, "3", Some(1)) >> 11);
        // An index fits a JSON number any reader holds exactly (53 bits).
        assert!(a < 1 << 53);
    }

    #[test]
    fn steps_due_sooner_leave_first() {
        let mut keys = [
            sort_key(Some(30.0), 1),
            sort_key(Some(0.5), 2),
            sort_key(None, 3),
            sort_key(Some(0.5), 4),
        ];
        keys.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let order: Vec<u64> = keys.iter().map(|k| k.1).collect();
        assert_eq!(order, [3, 2, 4, 1]);
    }

    #[test]
    fn a_session_header_is_its_own() {
        assert_eq!(session_header_value(0, "7"), "p0-s7");
        assert_ne!(session_header_value(0, "7"), session_header_value(0, "7/a"));
        assert_ne!(session_header_value(0, "7"), session_header_value(1, "7"));
    }
}
