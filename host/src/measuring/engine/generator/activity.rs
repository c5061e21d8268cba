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
use std::sync::Arc;
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

/// The engine's end of the commands' channel.
#[derive(Clone)]
pub(in crate::measuring::engine) struct Commands {
    tx: std_mpsc::Sender<ToScenario>,
    state: Arc<State>,
}

/// The thread's end of the commands' channel.
pub(in crate::measuring::engine) struct CommandInbox {
    rx: std_mpsc::Receiver<ToScenario>,
    state: Arc<State>,
}

/// The commands' channel of a scenario thread.
pub(super) fn channel() -> (Commands, CommandInbox) {
    let (tx, rx) = std_mpsc::channel();
    let state = Arc::new(State::default());
    let inbox = CommandInbox {
        rx,
        state: state.clone(),
    };
    (Commands { tx, state }, inbox)
}

impl Commands {
    pub(in crate::measuring::engine) fn send(
        &self,
        cmd: ToScenario,
    ) -> Result<(), std_mpsc::SendError<ToScenario>> {
        self.state.pending.fetch_add(1, Ordering::SeqCst);
        let sent = self.tx.send(cmd);
        if sent.is_err() {
            self.state.pending.fetch_sub(1, Ordering::SeqCst);
        }
        sent
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

    pub(super) fn recv_timeout(
        &self,
        wait: Duration,
        wants_room: bool,
    ) -> Result<ToScenario, std_mpsc::RecvTimeoutError> {
        let got = self.blocked(wants_room, || self.rx.recv_timeout(wait));
        self.took(got.is_ok());
        got
    }
}

impl Drop for CommandInbox {
    fn drop(&mut self) {
        self.state.gone.store(true, Ordering::SeqCst);
        clock::poke();
    }
}
