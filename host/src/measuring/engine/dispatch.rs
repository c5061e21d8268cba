//! The dispatcher of one phase: sends each planned request on time (or when a
//! concurrency slot frees), runs it in its own task, and drains the phase at its end.

use crate::both_sides::clock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::live::Live;
use super::record::SentRequest;
use super::record_builder::Backlog;
use super::signals::Signals;
use super::{Collect, EngineConfig, EngineError, FromScenario, Planned, StopReason};
use crate::both_sides::timer::{Timer, TimerHandle};
use crate::measuring::client::Client;
use crate::measuring::digest::{RequestDigest, RequestKey};
use crate::workloads::scenario::PhaseSpec;
use crate::workloads::tokenizer::Tokenizer;

/// Waits at least this long end with [`STAY_AWAKE`] on the CPU.
const LONG_WAIT: Duration = Duration::from_millis(3);
/// How long before a send time the dispatcher stops sleeping after a long wait.
const STAY_AWAKE: Duration = Duration::from_millis(1);

/// When to wake for a send at `at`. After an idle gap the worker thread and its virtual
/// CPU are asleep, and waking them takes milliseconds on a VM (measured: trace replay's
/// p99 send lateness was 3 ms with 8-28 ms gaps), so a long wait wakes [`STAY_AWAKE`]
/// early and the request's task yields until the send time. Short waits (high rates)
/// sleep to the send time: there the worker is busy anyway, and yielding through every
/// gap would cost a core.
fn stay_awake_from(now: Instant, at: Instant) -> Instant {
    if at.duration_since(now) >= LONG_WAIT {
        at - STAY_AWAKE
    } else {
        at
    }
}

/// When a request scheduled `offset` seconds into the phase is due.
#[derive(Debug, PartialEq)]
enum SendTime {
    At(Instant),
    /// So far ahead (1e300 s) that no clock reaches it: the request waits for the phase to
    /// be stopped.
    Never,
}

fn send_time(phase_start: Instant, offset: f64) -> SendTime {
    Duration::try_from_secs_f64(offset.max(0.0))
        .ok()
        .and_then(|d| phase_start.checked_add(d))
        .map_or(SendTime::Never, SendTime::At)
}

/// What every phase's dispatcher shares: the client, where records go, the live counters.
pub(super) struct RunContext<'a> {
    /// One per `--target`, in their order.
    pub(super) clients: &'a [Client],
    pub(super) tokenizer: &'a Arc<Tokenizer>,
    pub(super) config: &'a EngineConfig,
    pub(super) records: &'a mpsc::UnboundedSender<Collect>,
    pub(super) live: &'a Arc<Mutex<Live>>,
    /// The scenario hears of each response (`on_response`): records carry an outcome.
    pub(super) wants_outcomes: bool,
    /// Records still being built.
    pub(super) backlog: &'a Backlog,
}

/// How a phase ended.
pub(super) struct PhaseEnd {
    pub(super) stop: StopReason,
    /// Requests still running at the drain limit, cut.
    pub(super) cut: u64,
    pub(super) duration: Duration,
}

/// The first reason to stop a phase: a signal, or the phase's deadline.
async fn stop_reason(signals: &mut Signals, deadline: Option<tokio::time::Instant>) -> StopReason {
    tokio::select! {
        biased;
        r = signals.stopped() => r,
        _ = until(deadline) => StopReason::MaxDuration,
    }
}

/// Returns at the phase's deadline; never without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => clock::sleep_until(d.into_std()).await,
        None => std::future::pending().await,
    }
}

/// One phase being sent.
pub(super) struct PhaseDispatch<'a> {
    run: &'a RunContext<'a>,
    phase: usize,
    start: Instant,
    /// `start` on the wall clock, for what needs absolute times (`RecordTap`).
    started_wall: SystemTime,
    signals: &'a mut Signals,
    digest: &'a mut RequestDigest,
    /// A phase of sessions: the keys of its requests, added to the digest at its end in
    /// index order (the order sessions interleave in depends on the server's timing;
    /// their indices do not).
    session_keys: Option<Vec<RequestKey>>,
    /// Concurrency slots, under a limit.
    slots: Option<Arc<Semaphore>>,
    deadline: Option<tokio::time::Instant>,
    /// Set when the drain gives up: in-flight requests are cut.
    cancel: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// The last moment a concurrency slot let a waiting request go.
    released_at: Instant,
    // tokio's timer wheel rounds deadlines up to whole milliseconds, which would show as
    // 0-2 ms of send lateness on every scheduled request; this clock thread wakes the
    // dispatcher within tens of microseconds, without spinning.
    _clock: Timer,
    timer: TimerHandle,
}

impl<'a> PhaseDispatch<'a> {
    /// Phase `phase` of the run, whose clock started at `start`.
    pub(super) fn new(
        run: &'a RunContext<'a>,
        phase: usize,
        spec: &PhaseSpec,
        start: Instant,
        signals: &'a mut Signals,
        digest: &'a mut RequestDigest,
    ) -> Self {
        let clock = Timer::start();
        PhaseDispatch {
            run,
            phase,
            start,
            started_wall: SystemTime::now()
                .checked_sub(clock::since(start))
                .unwrap_or_else(SystemTime::now),
            signals,
            digest,
            session_keys: spec.sessions.map(|_| Vec::new()),
            slots: spec
                .concurrency_limit()
                .map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS as u64) as usize))),
            deadline: spec
                .max_duration
                .and_then(|d| start.checked_add(d))
                .map(tokio::time::Instant::from_std),
            cancel: watch::channel(false).0,
            tasks: JoinSet::new(),
            released_at: start,
            timer: clock.handle(),
            _clock: clock,
        }
    }

    /// Sends the requests the scenario thread queues, each on time, until the phase
    /// stops; then drains what is in flight.
    pub(super) async fn run(
        mut self,
        queue: &mut mpsc::Receiver<FromScenario>,
    ) -> Result<PhaseEnd, EngineError> {
        let stop = self.send_all(queue).await?;
        Ok(self.drain(stop).await)
    }

    async fn send_all(
        &mut self,
        queue: &mut mpsc::Receiver<FromScenario>,
    ) -> Result<StopReason, EngineError> {
        loop {
            // A request already queued is taken before the deadline is heard: `send` tells
            // by its send time whether it still belongs to the phase.
            let msg = tokio::select! {
                biased;
                r = self.signals.stopped() => return Ok(r),
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => continue,
                m = queue.recv() => m,
                _ = until(self.deadline) => return Ok(StopReason::MaxDuration),
            };
            let planned = match msg {
                None => return Err(EngineError::ScenarioThread),
                Some(FromScenario::Failed(e)) => return Err(e.into()),
                Some(FromScenario::Exhausted) => return Ok(StopReason::Exhausted),
                // A phase answer comes only between phases; neither follows a phase's requests.
                Some(FromScenario::Closed | FromScenario::NextPhase(_)) => {
                    return Ok(StopReason::Exhausted)
                }
                Some(FromScenario::Request(p)) => p,
            };
            if let Err(stop) = self.send(planned).await {
                return Ok(stop);
            }
        }
    }

    /// Sends one request once it is due and a slot is free; the reason the phase stopped
    /// if it stopped first.
    async fn send(&mut self, planned: Box<Planned>) -> Result<(), StopReason> {
        let ideal = self.wait_for_send_time(planned.offset).await?;
        let permit = self.take_slot().await?;
        // Lateness measures the client only. Under a concurrency cap a request cannot leave
        // before a slot frees, and, requests leaving in order, not before the one ahead
        // of it got its slot: its schedule moves to the last moment the cap released the
        // dispatcher.
        let scheduled = ideal.unwrap_or_else(Instant::now).max(self.released_at);
        // A request with a send time before the deadline was let through by
        // `wait_for_send_time`, however late the client now is; one without is sent while
        // the phase lasts.
        if ideal.is_none() && self.deadline.is_some_and(|d| clock::tokio_now() >= d) {
            return Err(StopReason::MaxDuration);
        }
        let key = planned.key(self.phase);
        match &mut self.session_keys {
            Some(keys) => keys.push(key),
            None => self.digest.add(&key),
        }
        self.run
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot
            .sent += 1;
        self.spawn(planned, scheduled, permit);
        Ok(())
    }

    /// Open loop: waits for the send time (a long wait until [`STAY_AWAKE`] before it,
    /// the request's task spending the rest on the CPU), or for whatever stops the phase
    /// first; the send time. `None` in closed loop (sent when a slot frees).
    ///
    /// The send time, not the moment the client gets to it, decides whether a request
    /// belongs to its phase: one due before the deadline is sent even when the client runs
    /// late (its lateness is reported), one due at or after it never is. So the phase's
    /// request stream is the schedule's, the same on a busy machine as on a quiet one.
    async fn wait_for_send_time(
        &mut self,
        offset: Option<f64>,
    ) -> Result<Option<Instant>, StopReason> {
        let at = match offset.map(|o| send_time(self.start, o)) {
            None => return Ok(None),
            Some(SendTime::At(at)) if self.deadline.is_none_or(|d| at < d.into_std()) => at,
            // After the deadline, or beyond any clock: only a stop ends the wait.
            Some(_) => return Err(stop_reason(self.signals, self.deadline).await),
        };
        let now = clock::now();
        if at > now {
            // In virtual time the clock lands on `at` exactly: nothing to stay awake for.
            let wake = match clock::is_virtual() {
                true => at,
                false => stay_awake_from(now, at),
            };
            let wake = tokio::time::Instant::from_std(wake);
            // Due before the deadline: only a signal ends the wait, even when the client
            // wakes after the deadline.
            tokio::select! {
                biased;
                r = self.signals.stopped() => return Err(r),
                _ = self.timer.sleep_until(wake) => {}
            }
            // The last stretch of a long wait is spent on the CPU, by the request's own
            // task (`spawn`): see `stay_awake_from`.
        }
        Ok(Some(at))
    }

    /// A concurrency slot, under a limit: at once when one is free, else when one frees.
    async fn take_slot(&mut self) -> Result<Option<OwnedSemaphorePermit>, StopReason> {
        let Some(slots) = self.slots.clone() else {
            return Ok(None);
        };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let permit = tokio::select! {
            biased;
            r = stop_reason(self.signals, self.deadline) => return Err(r),
            p = slots.acquire_owned() => p,
        };
        self.released_at = clock::now();
        Ok(permit.ok())
    }

    /// Runs the request in a task of its own; its slot frees when its exchange ends.
    fn spawn(
        &mut self,
        planned: Box<Planned>,
        scheduled: Instant,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let (phase, phase_start) = (self.phase, self.start);
        // `plan` checked the index against the targets; the first is a safe fallback.
        let client = self
            .run
            .clients
            .get(planned.target)
            .unwrap_or(&self.run.clients[0]);
        let client = client.clone();
        let tokenizer = self.run.tokenizer.clone();
        let records = self.run.records.clone();
        let wants_outcome = self.run.wants_outcomes;
        let target = (self.run.clients.len() > 1).then_some(planned.target);
        let mut cancel = self.cancel.subscribe();
        let backlog = self.run.backlog.clone();
        let (tap, started_wall) = (self.run.config.record_tap.clone(), self.started_wall);
        let keep_text = self.run.config.answer_text.clone();
        self.tasks.spawn(async move {
            // Spawned up to STAY_AWAKE ahead of its send time: the dispatcher runs on the
            // runtime's calling thread, so a task it spawns waits for a parked worker to
            // wake (`perf trace` of a 5 s Poisson run on the 2-core VM: 0.21-0.95 ms from
            // the dispatcher's wake-up write to the request's write, in the 8 of 21 sends
            // that woke a worker so), and that wake now falls before the send time.
            // (In virtual time the dispatcher woke at the send time itself, and a yield
            // would never let that clock move.)
            while !clock::is_virtual() && clock::now() < scheduled {
                tokio::task::yield_now().await;
            }
            let request_id = client.request_id(format_args!("{phase}-{}", planned.index));
            let sent = clock::now();
            let exchange = client
                .execute_with(&planned.prepared, &request_id, &planned.extras, &mut cancel)
                .await;
            drop(permit);
            let request = SentRequest {
                phase,
                planned,
                request_id,
                phase_start,
                scheduled,
                sent,
                target,
            };
            // Counting tokens is CPU work on text of any size a server sends: done on the
            // record builders, never on the I/O threads that timestamp other streams'
            // chunks. The task ends with its exchange, so the drain, and the phase's
            // duration, never wait for the counting; the phase's summary does.
            backlog.build(
                move || {
                    let keep_text = keep_text.as_deref();
                    request.record(exchange, &tokenizer, wants_outcome, keep_text)
                },
                move |(record, outcome)| {
                    if let Some(tap) = &tap {
                        tap.finished(&record, started_wall);
                    }
                    let _ = records.send(Collect::Record(Box::new(record), outcome.map(Box::new)));
                },
            );
        });
    }

    /// Requests of a phase that ran out of work are all part of it: waits for every one
    /// (each is bounded by the request timeout). A phase stopped by time or by its stop
    /// condition lets in-flight requests finish up to the drain limit, then cuts them.
    async fn drain(mut self, stop: StopReason) -> PhaseEnd {
        let config = self.run.config;
        let limit = match stop {
            StopReason::Exhausted => None,
            // The run ends on an error (left in the queue for the phase's close): what is in
            // flight gets the short drain of an interrupt.
            StopReason::Interrupted | StopReason::ScenarioFailed => Some(config.interrupt_drain),
            StopReason::MaxDuration
            | StopReason::ScenarioStop
            | StopReason::MaxErrorRate { .. } => Some(config.drain_timeout),
        };
        let interrupt = &mut self.signals.interrupt;
        let tasks = &mut self.tasks;
        let wait_all = async {
            loop {
                tokio::select! {
                    biased;
                    // An interrupt during the drain cuts what is left at once.
                    _ = interrupt.wait_for(|i| *i), if stop != StopReason::Interrupted => return false,
                    r = tasks.join_next() => if r.is_none() { return true },
                }
            }
        };
        let drained = match limit {
            Some(limit) => clock::timeout(limit, wait_all).await.unwrap_or(false),
            None => wait_all.await,
        };
        let mut cut = 0;
        if !drained {
            cut = self.tasks.len() as u64;
            let _ = self.cancel.send(true);
            while self.tasks.join_next().await.is_some() {}
        }
        if let Some(mut keys) = self.session_keys.take() {
            keys.sort_by_key(|k| k.index);
            keys.iter().for_each(|k| self.digest.add(k));
        }
        let stop =
            if !drained && stop != StopReason::Interrupted && *self.signals.interrupt.borrow() {
                StopReason::Interrupted
            } else {
                stop
            };
        PhaseEnd {
            stop,
            cut,
            duration: clock::since(self.start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_times_beyond_the_clock_never_come() {
        let now = Instant::now();
        assert_eq!(
            send_time(now, 1.5),
            SendTime::At(now + Duration::from_millis(1500))
        );
        assert_eq!(send_time(now, -1.0), SendTime::At(now));
        for far in [1e300, f64::INFINITY, f64::MAX] {
            assert_eq!(send_time(now, far), SendTime::Never, "{far}");
        }
        // NaN is no time at all: sent at once rather than never (the schedule refuses it).
        assert_eq!(send_time(now, f64::NAN), SendTime::At(now));
    }

    #[test]
    fn only_long_waits_wake_early() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(stay_awake_from(now, now + ms(10)), now + ms(9));
        assert_eq!(stay_awake_from(now, now + ms(3)), now + ms(2));
        assert_eq!(stay_awake_from(now, now + ms(2)), now + ms(2));
    }
}
