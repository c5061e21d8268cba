//! The prefix-cache hit rate a workload meant beside the one the server achieved. A
//! scenario states what it meant with `note("intended_prefix_hit_rate", 0.7)` (a share,
//! 0 to 1); each measured phase whose server counters give a hit rate is compared with it,
//! and a gap over [`WARN_POINTS`] is a warning: the cache was smaller than the workload
//! assumed, evicted under load, off, or already warm from an earlier run.

use super::run_report::RunReport;
use crate::workloads::scenario::NoteValue;

/// The note a scenario states its intended hit rate with.
pub const NOTE_KEY: &str = "intended_prefix_hit_rate";
/// Percentage points between intended and achieved that earn a warning.
pub const WARN_POINTS: f64 = 10.0;

/// One measured phase's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefixIntent {
    pub phase: String,
    /// Shares, 0 to 1.
    pub intended: f64,
    pub achieved: f64,
}

impl PrefixIntent {
    /// Percentage points from intended to achieved.
    pub fn gap_points(&self) -> f64 {
        (self.achieved - self.intended) * 100.0
    }

    /// More than [`WARN_POINTS`] apart; exactly that many is not (0.8 - 0.7 is
    /// 10.000000000000009 points in binary floating point).
    pub fn warns(&self) -> bool {
        self.gap_points().abs() > WARN_POINTS + 1e-9
    }
}

/// The intended rate the scenario noted, when it is a share in [0, 1].
fn intended(report: &RunReport) -> Option<f64> {
    let (_, value) = report.notes.iter().find(|(k, _)| k == NOTE_KEY)?;
    let share = match value {
        NoteValue::Float(v) => *v,
        NoteValue::Int(v) => *v as f64,
        _ => return None,
    };
    (0.0..=1.0).contains(&share).then_some(share)
}

/// Each measured phase with a server hit rate, beside the intended one (none without a
/// note).
pub fn compare(report: &RunReport) -> Vec<PrefixIntent> {
    let Some(intended) = intended(report) else {
        return Vec::new();
    };
    report
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .filter_map(|p| {
            // The server's counters, else its answers' usage.
            let achieved = p
                .server
                .as_ref()
                .and_then(|s| s.prefix_cache_hit_rate)
                .or_else(|| p.summary.prefix_cache.as_ref().map(|c| c.hit_rate))?;
            Some(PrefixIntent {
                phase: p.summary.name.clone(),
                intended,
                achieved,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_over_ten_points_warns_either_way() {
        let at = |intended, achieved| PrefixIntent {
            phase: "p".into(),
            intended,
            achieved,
        };
        assert!(!at(0.7, 0.65).warns());
        assert!(!at(0.7, 0.8).warns());
        assert!(at(0.7, 0.55).warns());
        assert!(at(0.2, 0.75).warns());
        assert!((at(0.7, 0.55).gap_points() + 15.0).abs() < 1e-9);
    }
}
