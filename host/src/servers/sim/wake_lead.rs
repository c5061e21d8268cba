//! How early the batching scheduler aims its wake-up before a step's deadline, so that
//! the step's tokens reach their connections at the deadline on average, not after it.
//!
//! In real time every token leaves late: the clock thread (`both_sides/timer.rs`) wakes
//! some tens of µs after the deadline, the scheduler task after it (0.15 to 0.25 ms on
//! average on a 2-core VM, bench-results/virtual_time.md), and each connection's task
//! after that, in turn, one write after another. Steps chain on their nominal deadlines,
//! so the lateness never accumulates along a stream, but every token carries it, and a
//! first token counts it in full: the real run's mean TTFT sat 1 to 4 % above virtual
//! time's, which has none. Aiming each wake-up early by the mean of how late the recent
//! tokens reached their connections (measured where a connection takes its token, in
//! `engine.rs`) moves every step by the same amount, so the gaps between tokens (what
//! `runner calibrate` fits a twin from) keep their length. In virtual time nothing takes
//! time, and the lead stays 0.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::event::Event;

/// A token's lateness counts at most this much: more only comes from a starved task,
/// no guide to the next step.
const MAX_LATE: Duration = Duration::from_millis(1);
/// Each token's lateness weighs 1/WEIGHT in the running mean: the last few steps' tokens.
const WEIGHT: u64 = 64;

/// The running mean of how late tokens reach their connections, shared by an engine's
/// schedulers (which aim by it) and its streams (which measure it).
#[derive(Debug, Default, Clone)]
pub struct WakeLead(Arc<AtomicU64>);

/// What the scheduler hands a stream: the event, and for tokens the moment the wake-up
/// of the step that made them was aimed at (or the scheduler went to sleep, when that
/// moment had passed already).
#[derive(Debug)]
pub struct Emitted {
    pub event: Event,
    pub aimed: Option<Instant>,
}

impl WakeLead {
    fn lead(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    /// When to wake for a step that ends at `deadline`.
    pub fn aim(&self, deadline: Instant) -> Instant {
        deadline.checked_sub(self.lead()).unwrap_or(deadline)
    }

    /// Tokens of a step whose wake-up was aimed at `aimed` reached their connection at
    /// `taken`. Two connections measuring at once may lose one of their two updates:
    /// the mean stays a mean.
    pub fn observe(&self, aimed: Instant, taken: Instant) {
        let late = taken.saturating_duration_since(aimed).min(MAX_LATE);
        let late = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
        let kept = self.0.load(Ordering::Relaxed).saturating_mul(WEIGHT - 1);
        self.0
            .store(kept.saturating_add(late) / WEIGHT, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lead_settles_on_the_mean_lateness_and_keeps_within_its_bound() {
        let wake = WakeLead::default();
        let t0 = Instant::now() + Duration::from_secs(1);
        assert_eq!(wake.aim(t0), t0, "no lateness seen yet");
        for i in 0..2000u32 {
            let deadline = t0 + Duration::from_millis(8) * i;
            let aimed = wake.aim(deadline);
            // Late by 150 µs and 250 µs by turns: 200 µs on average.
            let late = Duration::from_micros(if i % 2 == 0 { 150 } else { 250 });
            wake.observe(aimed, aimed + late);
        }
        let lead = wake.lead().as_micros();
        assert!((195..=205).contains(&lead), "{lead} µs");
        assert_eq!(wake.aim(t0), t0 - wake.lead());
        // A starved task's 20 ms counts as MAX_LATE at most.
        for _ in 0..2000 {
            wake.observe(t0, t0 + Duration::from_millis(20));
        }
        assert!(wake.lead() <= MAX_LATE);
        assert!(wake.lead() >= MAX_LATE - Duration::from_micros(5));
        // On time (virtual time): the lead falls back to 0.
        for _ in 0..2000 {
            wake.observe(t0, t0);
        }
        assert_eq!(wake.lead(), Duration::ZERO);
    }
}
