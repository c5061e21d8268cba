//! Whether the scenario thread is at work, for the virtual clock (`both_sides/clock.rs`):
//! while it computes, or has a command it has not yet taken, or could refill a queue the
//! dispatcher has drained, time must not jump ahead, or a phase could reach its deadline
//! while its next request is still being generated. The commands' channel counts what is
//! sent and not yet taken (counted by the sender, so no wake-up is ever missed), and the
//! thread says when it blocks and whether a free slot would wake it.
//!
//! In real time all this is a few atomic operations and nothing reads them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};
use std::time::Duration;

use tokio::sync::mpsc;

use super::super::{FromScenario, ToScenario};
use crate::both_sides::clock::{self, HoldGuard};

#[derive(Default)]
struct State {
    /// Commands sent and not yet taken by the thread.
    pending: AtomicUsize,
    /// The thread is blocked (in a wait for a command or for a queue slot).
    blocked: AtomicBool,
    /// While blocked, a free queue slot would set it generating again.
    wants_room: AtomicBool,
    /// The thread has ended.
    gone: AtomicBool,
}

/// The engine's end of the commands' channel; the channel closes (and the thread ends)
/// when the last clone is dropped.
#[derive(Clone)]
pub(in crate::measuring::engine) struct Commands {
    tx: Arc<std_mpsc::Sender<ToScenario>>,
    state: Arc<State>,
}

/// The thread's end of the commands' channel.
pub(in crate::measuring::engine) struct CommandInbox {
    rx: std_mpsc::Receiver<ToScenario>,
    state: Arc<State>,
    /// For [`ToScenario::Wake`]: weak, so that it never keeps the channel open.
    tx: Weak<std_mpsc::Sender<ToScenario>>,
}

/// The other end of a channel between the engine and the scenario thread is gone.
#[derive(Debug)]
pub(in crate::measuring::engine) struct ThreadGone;

/// The commands' channel of a scenario thread.
pub(super) fn channel() -> (Commands, CommandInbox) {
    let (tx, rx) = std_mpsc::channel();
    let tx = Arc::new(tx);
    let state = Arc::new(State::default());
    let inbox = CommandInbox {
        rx,
        state: state.clone(),
        tx: Arc::downgrade(&tx),
    };
    (Commands { tx, state }, inbox)
}

/// Sends `cmd`, counted as pending until the thread takes it.
fn send_counted(
    tx: &std_mpsc::Sender<ToScenario>,
    state: &State,
    cmd: ToScenario,
) -> Result<(), ThreadGone> {
    state.pending.fetch_add(1, Ordering::SeqCst);
    let sent = tx.send(cmd);
    if sent.is_err() {
        state.pending.fetch_sub(1, Ordering::SeqCst);
    }
    sent.map_err(|_| ThreadGone)
}

/// Wakes the thread when the virtual clock reaches the moment it asked to look again at.
struct WakeThread {
    tx: Weak<std_mpsc::Sender<ToScenario>>,
    state: Arc<State>,
}

impl Wake for WakeThread {
    fn wake(self: Arc<Self>) {
        if let Some(tx) = self.tx.upgrade() {
            let _ = send_counted(&tx, &self.state, ToScenario::Wake);
        }
    }
}

impl Commands {
    pub(in crate::measuring::engine) fn send(&self, cmd: ToScenario) -> Result<(), ThreadGone> {
        send_counted(&self.tx, &self.state, cmd)
    }

    /// In virtual time: holds the clock while the thread is at work. A queue slot wakes a
    /// blocked thread only once half the queue is free, so the clock is held once per
    /// half a queue, never for each request.
    pub(super) fn hold_clock(&self, queue: &mpsc::Sender<FromScenario>) -> Option<HoldGuard> {
        let clock = clock::virtual_clock()?;
        let state = self.state.clone();
        let refill_at = (queue.max_capacity() / 2).max(1);
        let queue = queue.downgrade();
        Some(clock.hold_while(move || {
            // `pending` first: the thread clears `blocked` before it takes a command off.
            if state.pending.load(Ordering::SeqCst) > 0 {
                return true;
            }
            if state.gone.load(Ordering::SeqCst) {
                return false;
            }
            if !state.blocked.load(Ordering::SeqCst) {
                return true;
            }
            state.wants_room.load(Ordering::SeqCst)
                && queue.upgrade().is_some_and(|q| q.capacity() >= refill_at)
        }))
    }
}

impl CommandInbox {
    /// Runs `wait` marked as blocked; `wants_room`: a free queue slot ends it.
    pub(super) fn blocked<T>(&self, wants_room: bool, wait: impl FnOnce() -> T) -> T {
        self.state.wants_room.store(wants_room, Ordering::SeqCst);
        self.state.blocked.store(true, Ordering::SeqCst);
        clock::poke();
        let out = wait();
        self.state.blocked.store(false, Ordering::SeqCst);
        out
    }

    fn took(&self, got: bool) {
        if got {
            self.state.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(super) fn recv(&self) -> Result<ToScenario, std_mpsc::RecvError> {
        let got = self.blocked(false, || self.rx.recv());
        self.took(got.is_ok());
        got
    }

    pub(super) fn try_recv(&self) -> Result<ToScenario, std_mpsc::TryRecvError> {
        let got = self.rx.try_recv();
        self.took(got.is_ok());
        got
    }

    /// Waits up to `wait` (real time) for a command. In virtual time `look_again` also
    /// stops the clock that much later and wakes the thread then (with
    /// [`ToScenario::Wake`]), so what it checks with time comes due on the simulated clock.
    pub(super) fn recv_timeout(
        &self,
        wait: Duration,
        wants_room: bool,
        look_again: Option<Duration>,
    ) -> Result<ToScenario, std_mpsc::RecvTimeoutError> {
        let _mark = look_again.and_then(|after| self.wake_after(after));
        let got = self.blocked(wants_room, || self.rx.recv_timeout(wait));
        self.took(got.is_ok());
        got
    }

    fn wake_after(&self, after: Duration) -> Option<clock::Mark> {
        let clock = clock::virtual_clock()?;
        let waker = Waker::from(Arc::new(WakeThread {
            tx: self.tx.clone(),
            state: self.state.clone(),
        }));
        Some(clock.mark(clock.now().checked_add(after)?, waker))
    }
}

impl Drop for CommandInbox {
    fn drop(&mut self) {
        self.state.gone.store(true, Ordering::SeqCst);
        clock::poke();
    }
}
