//! A wall-clock limit on each script call, host calls included. Rhai counts operations,
//! and a host call (`synthetic_text` of a million tokens) is one operation of any length:
//! a loop of them would run for hours within the operation limit. The same callback
//! checks the call's heap growth ([`super::limits`]) at every operation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rhai::{Dynamic, Engine};

use super::limits::{self, CallHeap};

/// Setup calls (top level, `describe`, `phases`, `next_phase`) may load a dataset.
pub const SETUP_LIMIT: Duration = Duration::from_secs(60);
/// Calls made for each request or response.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// What `on_progress` returns to stop a script, recognised in its error.
pub const TOKEN: &str = "runner: call time limit";

/// How often (in operations) the clock is read: a few microseconds of work apart.
const CHECK_EVERY: u64 = 1024;

/// The deadline of the call in progress, shared with the engine's progress callback.
#[derive(Clone)]
pub struct CallDeadline {
    epoch: Instant,
    /// Nanoseconds after `epoch`; `u64::MAX` outside a call.
    at_ns: Arc<AtomicU64>,
    heap: CallHeap,
}

impl CallDeadline {
    /// A deadline watched by `engine`.
    pub fn install(engine: &mut Engine) -> CallDeadline {
        let deadline = CallDeadline {
            epoch: Instant::now(),
            at_ns: Arc::new(AtomicU64::new(u64::MAX)),
            heap: CallHeap::new(),
        };
        let watched = deadline.clone();
        engine.on_progress(move |ops| {
            if watched.heap.passed() {
                return Some(Dynamic::from(limits::TOKEN));
            }
            (ops % CHECK_EVERY == 0 && watched.passed()).then(|| Dynamic::from(TOKEN))
        });
        deadline
    }

    /// The limit of a call to `function`.
    pub fn limit_of(function: &str) -> Duration {
        if limits::is_setup(function) {
            SETUP_LIMIT
        } else {
            REQUEST_LIMIT
        }
    }

    /// Starts the clock of a call to `function`.
    pub fn start(&self, function: &str) {
        let at = self.epoch.elapsed() + Self::limit_of(function);
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        self.at_ns.store(ns, Ordering::Relaxed);
        self.heap.start(function);
    }

    fn passed(&self) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        now > self.at_ns.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_deadline_is_terminated() {
        let mut engine = Engine::new();
        let deadline = CallDeadline::install(&mut engine);
        deadline.start("stop");
        // Already past: the first check stops the loop.
        deadline.at_ns.store(0, Ordering::Relaxed);
        let err = engine
            .eval::<i64>("let x = 0; loop { x += 1; }")
            .unwrap_err();
        assert!(
            matches!(*err, rhai::EvalAltResult::ErrorTerminated(ref t, _) if t.to_string() == TOKEN),
            "{err}"
        );
        // A new call gets its own time.
        deadline.start("stop");
        assert_eq!(engine.eval::<i64>("40 + 2").unwrap(), 42);
    }
}
