//! A precise timer, shared by the dispatcher (send times) and the simulated engine (token times).
//!
//! tokio's timer wheel ticks in whole milliseconds and rounds deadlines up, so its sleeps end
//! 0–2 ms late; that bias would land on every simulated TTFT. This timer is one OS thread
//! that waits on a condition variable (a futex: tens of µs of slack) until the earliest
//! deadline and then wakes every task that is due, in one batch.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Instant;

/// Owns the clock thread; dropping it stops and joins the thread.
pub struct Timer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What tasks use to sleep; cheap to clone.
#[derive(Clone)]
pub struct TimerHandle(Option<Arc<Shared>>);

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    due: BinaryHeap<Reverse<Entry>>,
    stop: bool,
}

struct Entry {
    at: Instant,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a waker panicked elsewhere; the heap is still sound.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Timer {
    /// Start the clock thread; when the thread cannot be spawned the handle falls back to
    /// tokio's timer, which is only less precise.
    pub fn start() -> Timer {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        // In virtual time the run's clock wakes sleepers itself: no thread.
        if super::clock::is_virtual() {
            return Timer {
                shared,
                thread: None,
            };
        }
        let thread = std::thread::Builder::new()
            .name("runner-clock".to_string())
            .spawn(move || run(&thread_shared))
            .ok();
        Timer { shared, thread }
    }

    pub fn handle(&self) -> TimerHandle {
        TimerHandle(self.thread.as_ref().map(|_| Arc::clone(&self.shared)))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    // The kernel lets a sleeping thread's timer fire up to its "timer slack" late (50 µs
    // by default, see prctl(2) PR_SET_TIMERSLACK) to batch wake-ups; this thread's one
    // job is to wake on time. Without the call it is only that much less precise.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_timerslack(1);
    let mut ready = Vec::new();
    let mut state = shared.lock();
    loop {
        let now = Instant::now();
        while state.due.peek().is_some_and(|e| e.0.at <= now) {
            if let Some(Reverse(entry)) = state.due.pop() {
                ready.push(entry.waker);
            }
        }
        if !ready.is_empty() {
            // Wake outside the lock so woken tasks can register their next deadline.
            drop(state);
            ready.drain(..).for_each(Waker::wake);
            state = shared.lock();
            continue;
        }
        if state.stop {
            return;
        }
        state = match state.due.peek().map(|e| e.0.at - now) {
            Some(wait) => {
                shared
                    .changed
                    .wait_timeout(state, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}

impl TimerHandle {
    /// Sleep until `at`, to within tens of microseconds.
    pub async fn sleep_until(&self, at: tokio::time::Instant) {
        if super::clock::is_virtual() {
            return super::clock::sleep_until(at.into_std()).await;
        }
        match &self.0 {
            Some(shared) => {
                Sleep {
                    shared,
                    at: at.into_std(),
                }
                .await
            }
            None => tokio::time::sleep_until(at).await,
        }
    }
}

struct Sleep<'a> {
    shared: &'a Shared,
    at: Instant,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let mut state = self.shared.lock();
        let earliest = state.due.peek().is_none_or(|e| self.at < e.0.at);
        state.due.push(Reverse(Entry {
            at: self.at,
            waker: cx.waker().clone(),
        }));
        drop(state);
        if earliest {
            self.shared.changed.notify_one();
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sleeps_end_on_time() {
        let clock = Timer::start();
        let handle = clock.handle();
        let start = tokio::time::Instant::now();
        let mut late = Vec::new();
        for ms in [3u64, 1, 7, 5, 5] {
            let h = handle.clone();
            late.push(tokio::spawn(async move {
                let at = start + Duration::from_millis(ms);
                h.sleep_until(at).await;
                tokio::time::Instant::now().checked_duration_since(at)
            }));
        }
        for task in late {
            let lateness = tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("woken")
                .expect("sleep task")
                .expect("never early");
            // Typically tens of microseconds; the bound only allows for a loaded machine.
            assert!(lateness < Duration::from_millis(50), "{lateness:?}");
        }
        drop(clock);
    }
}
