//! The run's clock: the real one, or (`--virtual-time`) a simulated one that jumps to the
//! next deadline whenever nothing can run. Every time stamp and sleep on the measured
//! path (the dispatcher, the client, the simulator) reads this seam, so one engine runs in
//! both modes.
//!
//! The virtual clock is installed once per process, before its runtime starts, and read
//! from any thread. It advances only from the park hook of the run's single-threaded
//! runtime (`Builder::on_thread_park`: tokio calls it when no task is ready, and does not
//! park when the hook woke one, see tokio's runtime/scheduler/current_thread `park`), and
//! only while no work held outside the runtime (the scenario thread: [`Clock::hold_while`])
//! could still wake it at the present instant. Unit tests never install it: the default
//! is the real clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

static VIRTUAL: OnceLock<Arc<Clock>> = OnceLock::new();

/// Work outside the runtime that may still act at the present instant (true: hold).
type Busy = Box<dyn Fn() -> bool + Send + Sync>;

/// The simulated clock: a fixed origin plus the time simulated so far.
pub struct Clock {
    origin: Instant,
    elapsed_ns: AtomicU64,
    due: Mutex<BinaryHeap<Reverse<Due>>>,
    holds: Mutex<Vec<(u64, Busy)>>,
    next_hold: AtomicU64,
    /// Wakes the runtime (so that it parks again and the hook runs) when a hold ends.
    poked: Notify,
    /// Set while the hook finds nothing due and nothing held.
    idle: AtomicBool,
}

/// How long (real time) a run in virtual time may find nothing due and nothing at work
/// before it is declared stuck: far beyond any real wait a virtual run has (its
/// preflight's loopback calls, a scenario's first requests).
const STUCK_AFTER: Duration = Duration::from_secs(30);
const STUCK_TICK: Duration = Duration::from_secs(1);

/// The line a stuck run ends with.
#[derive(Debug, thiserror::Error)]
#[error("the run in virtual time is stuck: no request, timer or scenario call is pending, so its clock cannot move (please report this with the scenario)")]
pub struct Stuck;

/// A sleeper's deadline; its waker lives in the sleep itself, so a sleep polled again
/// is not queued twice and a dropped one is skipped.
struct Due {
    at: Instant,
    slot: Weak<Mutex<Option<Waker>>>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

/// A deadline of [`Clock::mark`]; dropping it withdraws the deadline.
pub struct Mark {
    _slot: Arc<Mutex<Option<Waker>>>,
}

/// Removes its hold from the clock when dropped.
pub struct HoldGuard {
    clock: &'static Clock,
    id: u64,
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        self.clock.holds_lock().retain(|(id, _)| *id != self.id);
        self.clock.poke();
    }
}

/// Makes this process's clock virtual; the first call wins.
pub fn install_virtual() -> Arc<Clock> {
    VIRTUAL.get_or_init(|| Arc::new(Clock::new())).clone()
}

/// The virtual clock, when this process runs in virtual time.
pub fn virtual_clock() -> Option<&'static Arc<Clock>> {
    VIRTUAL.get()
}

pub fn is_virtual() -> bool {
    VIRTUAL.get().is_some()
}

/// Now, on the run's clock.
pub fn now() -> Instant {
    match VIRTUAL.get() {
        Some(clock) => clock.now(),
        None => Instant::now(),
    }
}

/// Now, as tokio's type (the simulator keeps its times in it).
pub fn tokio_now() -> tokio::time::Instant {
    tokio::time::Instant::from_std(now())
}

/// Time since `earlier` on the run's clock (zero if `earlier` is later).
pub fn since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}

/// Sleeps until `at` on the run's clock (tokio's timer in real time).
pub async fn sleep_until(at: Instant) {
    match VIRTUAL.get() {
        Some(clock) => {
            VirtualSleep {
                clock,
                at,
                slot: None,
            }
            .await
        }
        None => tokio::time::sleep_until(at.into()).await,
    }
}

pub async fn sleep(wait: Duration) {
    match now().checked_add(wait) {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `Err(())` when `limit` passed on the run's clock before `work` ended.
pub async fn timeout<F: Future>(limit: Duration, work: F) -> Result<F::Output, ()> {
    tokio::select! {
        biased;
        out = work => Ok(out),
        () = sleep(limit) => Err(()),
    }
}

/// Wakes the virtual clock's runtime so its park hook looks again; nothing in real time.
pub fn poke() {
    if let Some(clock) = VIRTUAL.get() {
        clock.poke();
    }
}

impl Clock {
    fn new() -> Clock {
        Clock {
            origin: Instant::now(),
            elapsed_ns: AtomicU64::new(0),
            due: Mutex::default(),
            holds: Mutex::default(),
            next_hold: AtomicU64::new(0),
            poked: Notify::new(),
            idle: AtomicBool::new(false),
        }
    }

    pub fn now(&self) -> Instant {
        self.origin + Duration::from_nanos(self.elapsed_ns.load(Ordering::Acquire))
    }

    fn due_lock(&self) -> MutexGuard<'_, BinaryHeap<Reverse<Due>>> {
        // A poisoned lock only means a waker panicked elsewhere; the heap is still sound.
        self.due.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn holds_lock(&self) -> MutexGuard<'_, Vec<(u64, Busy)>> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps the clock still while `busy` says work outside the runtime can still act at
    /// the present instant; whoever ends that work calls [`poke`].
    pub fn hold_while(&'static self, busy: impl Fn() -> bool + Send + Sync + 'static) -> HoldGuard {
        let id = self.next_hold.fetch_add(1, Ordering::Relaxed);
        self.holds_lock().push((id, Box::new(busy)));
        HoldGuard { clock: self, id }
    }

    fn poke(&self) {
        self.poked.notify_one();
    }

    /// Runs on the runtime for as long as it lives: each poke wakes the runtime once.
    /// Returns when the run is stuck ([`STUCK_AFTER`] with nothing to advance to).
    pub async fn answer_pokes(self: Arc<Self>) -> Stuck {
        // Counted in this task's own ticks, so time the runtime spent not running (between
        // two `block_on`s) is never taken for a stuck run.
        let mut idle_ticks = 0;
        loop {
            let woken = tokio::time::timeout(STUCK_TICK, self.poked.notified());
            let idle = woken.await.is_err() && self.idle.load(Ordering::Acquire);
            idle_ticks = if idle { idle_ticks + 1 } else { 0 };
            if idle_ticks * STUCK_TICK >= STUCK_AFTER {
                return Stuck;
            }
        }
    }

    /// A deadline for work outside the runtime: the clock stops at `at` and calls `waker`,
    /// unless the mark was dropped before.
    pub fn mark(&self, at: Instant, waker: Waker) -> Mark {
        let slot = Arc::new(Mutex::new(Some(waker)));
        self.due_lock().push(Reverse(Due {
            at,
            slot: Arc::downgrade(&slot),
        }));
        Mark { _slot: slot }
    }

    /// Notes whether the hook found nothing to do (see [`STUCK_AFTER`]).
    fn note_idle(&self, idle: bool) {
        self.idle.store(idle, Ordering::Release);
    }

    /// The park hook: with nothing held, moves to the earliest deadline and wakes every
    /// sleeper due then. Returns whether it woke anyone.
    pub fn advance_when_idle(&self) -> bool {
        if self.holds_lock().iter().any(|(_, busy)| busy()) {
            self.note_idle(false);
            return false;
        }
        let mut due = self.due_lock();
        // Sleeps dropped before their time (a timeout whose work ended) are no deadline.
        while due.peek().is_some_and(|d| d.0.slot.strong_count() == 0) {
            due.pop();
        }
        let Some(next) = due.peek().map(|d| d.0.at) else {
            drop(due);
            self.note_idle(true);
            return false;
        };
        self.note_idle(false);
        let offset = next.saturating_duration_since(self.origin).as_nanos() as u64;
        self.elapsed_ns.fetch_max(offset, Ordering::AcqRel);
        let now = self.now();
        let mut ready = Vec::new();
        while due.peek().is_some_and(|d| d.0.at <= now) {
            let slot = due.pop().and_then(|d| d.0.slot.upgrade());
            if let Some(waker) = slot.and_then(|s| lock(&s).take()) {
                ready.push(waker);
            }
        }
        drop(due);
        let woke = !ready.is_empty();
        ready.into_iter().for_each(Waker::wake);
        woke
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct VirtualSleep {
    clock: &'static Clock,
    at: Instant,
    slot: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Future for VirtualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.clock.now() >= this.at {
            return Poll::Ready(());
        }
        match &this.slot {
            Some(slot) => *lock(slot) = Some(cx.waker().clone()),
            None => {
                let slot = Arc::new(Mutex::new(Some(cx.waker().clone())));
                this.clock.due_lock().push(Reverse(Due {
                    at: this.at,
                    slot: Arc::downgrade(&slot),
                }));
                this.slot = Some(slot);
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A clock of the test's own: the process's clock stays real for the other tests.
    fn own_clock() -> &'static Clock {
        Box::leak(Box::new(Clock::new()))
    }

    fn sleep_on(clock: &'static Clock, at: Instant) -> VirtualSleep {
        VirtualSleep {
            clock,
            at,
            slot: None,
        }
    }

    #[test]
    fn time_jumps_to_each_deadline_once_nothing_holds_it() {
        let clock = own_clock();
        let rt = tokio::runtime::Builder::new_current_thread()
            .on_thread_park(move || {
                clock.advance_when_idle();
            })
            .build()
            .expect("runtime");
        let held = Arc::new(AtomicBool::new(true));
        let busy = held.clone();
        let _hold = clock.hold_while(move || busy.load(Ordering::SeqCst));
        let origin = clock.now();
        let woke = rt.block_on(async move {
            let late = tokio::spawn(async move {
                sleep_on(clock, origin + Duration::from_secs(600)).await;
                clock.now()
            });
            let soon = tokio::spawn(async move {
                sleep_on(clock, origin + Duration::from_millis(1500)).await;
                clock.now()
            });
            // A sleep dropped before its time is no deadline to stop at.
            let dropped = sleep_on(clock, origin + Duration::from_millis(1));
            let _ = futures_util::poll!(Box::pin(dropped));
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(clock.now(), origin, "held: the clock stays");
            held.store(false, Ordering::SeqCst);
            (soon.await.expect("soon"), late.await.expect("late"))
        });
        assert_eq!(woke.0 - origin, Duration::from_millis(1500));
        assert_eq!(woke.1 - origin, Duration::from_secs(600));
    }

    #[test]
    fn the_default_clock_is_the_real_one() {
        // No test installs the virtual clock: `now` reads the machine's.
        let before = Instant::now();
        assert!(now() >= before);
        assert!(!is_virtual());
    }
}
