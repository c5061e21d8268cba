//! What may make a run's request stream depend on more than the seed and the parameters.
//! `next_request`, `arrival` and `phases` see only the seed, the parameters and the
//! scenario's own state, so what they send is the same on every run; these may not:
//! - `on_response`: it sees every answer and its latencies, in the order they finish;
//! - `stop`: it sees a live snapshot (elapsed time, counts, percentiles, server metrics)
//!   and ends a phase when it says so;
//! - `next_phase`: it sees every finished phase's measured statistics;
//! - a phase bounded by `max_duration` that sends under a concurrency limit (closed loop,
//!   or `max_concurrency`): how many requests leave before the deadline depends on how
//!   fast the server frees a slot.
//!
//! Each is named whenever it is there, whether or not the scenario's code reads what it
//! is given: the runner cannot tell, so it says the stream may have depended on it.

use super::{ArrivalSpec, PhaseSpec, Scenario};

/// The scenario defines `on_response`.
pub const ON_RESPONSE: &str = "on_response";
/// The scenario defines `stop`.
pub const STOP: &str = "stop";
/// The scenario defines `next_phase`.
pub const NEXT_PHASE: &str = "next_phase";
/// A phase has both a `max_duration` and a concurrency limit.
pub const DURATION_UNDER_CONCURRENCY: &str = "max_duration_with_concurrency_limit";

/// What the request stream of `scenario` running `phases` may have depended on beyond
/// its seed and parameters, in the order above; empty when nothing.
pub fn stream_dependence(scenario: &dyn Scenario, phases: &[PhaseSpec]) -> Vec<String> {
    let reasons = [
        (scenario.wants_responses(), ON_RESPONSE),
        (scenario.has_stop(), STOP),
        (scenario.has_next_phase(), NEXT_PHASE),
        (
            phases.iter().any(duration_under_concurrency),
            DURATION_UNDER_CONCURRENCY,
        ),
    ];
    reasons
        .into_iter()
        .filter(|(present, _)| *present)
        .map(|(_, name)| name.to_string())
        .collect()
}

fn duration_under_concurrency(p: &PhaseSpec) -> bool {
    let limited = p.max_concurrency.is_some() || matches!(p.arrival, ArrivalSpec::Closed { .. });
    p.max_duration.is_some() && limited
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn phase(arrival: ArrivalSpec, concurrency: Option<u64>, seconds: Option<u64>) -> PhaseSpec {
        PhaseSpec {
            name: "main".into(),
            arrival,
            max_concurrency: concurrency,
            max_requests: Some(100),
            max_duration: seconds.map(Duration::from_secs),
            warmup: false,
            sessions: None,
            control: Default::default(),
            steady_window: None,
        }
    }

    #[test]
    fn only_a_deadline_under_a_concurrency_limit_depends_on_the_server() {
        let closed = ArrivalSpec::Closed { concurrency: 4 };
        let poisson = ArrivalSpec::Poisson { rate: 5.0 };
        assert!(duration_under_concurrency(&phase(
            closed.clone(),
            None,
            Some(10)
        )));
        assert!(duration_under_concurrency(&phase(
            poisson.clone(),
            Some(8),
            Some(10)
        )));
        // Open loop with a deadline: the send times alone decide what belongs to it.
        assert!(!duration_under_concurrency(&phase(poisson, None, Some(10))));
        // Closed loop counted in requests: the same requests, whatever the server.
        assert!(!duration_under_concurrency(&phase(closed, None, None)));
    }
}
