//! Arrival processes: when each request of a phase should leave, as an offset from the
//! phase start. Built-in processes are computed here from a seeded generator of their own,
//! so the schedule is a pure function of (seed, phase, process) and independent of how
//! much randomness the scenario's own code consumes.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma};

use crate::workloads::scenario::ArrivalSpec;

pub struct Schedule {
    spec: ArrivalSpec,
    rng: ChaCha8Rng,
    gamma: Option<Gamma<f64>>,
    previous: f64,
    count: u64,
}

impl Schedule {
    pub fn new(spec: &ArrivalSpec, seed: u64, phase: usize) -> Schedule {
        // Separate stream per phase; the golden-ratio constant spreads nearby seeds apart.
        let stream = seed ^ (phase as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let gamma = match spec {
            // Gamma(shape k, scale 1/(rate·k)) has mean 1/rate and CV 1/√k (k = 1: Poisson),
            // as vLLM's --burstiness defines it.
            ArrivalSpec::Poisson { rate } => Gamma::new(1.0, 1.0 / rate).ok(),
            ArrivalSpec::Gamma { rate, burstiness } => {
                Gamma::new(*burstiness, 1.0 / (rate * burstiness)).ok()
            }
            _ => None,
        };
        Schedule {
            spec: spec.clone(),
            rng: ChaCha8Rng::seed_from_u64(stream),
            gamma,
            previous: 0.0,
            count: 0,
        }
    }

    /// Whether requests wait for a free slot rather than for a time.
    pub fn is_closed_loop(&self) -> bool {
        matches!(self.spec, ArrivalSpec::Closed { .. })
    }

    /// Offset in seconds of the next request. `custom_gap` is the scenario's `arrival` value
    /// for custom processes; a request's own `at` (absolute) or `delay` (relative) wins.
    /// The first request of a built-in process leaves at 0.
    pub fn next(&mut self, custom_gap: Option<f64>, at: Option<f64>, delay: Option<f64>) -> f64 {
        let first = self.count == 0;
        self.count += 1;
        let offset = if let Some(at) = at {
            at
        } else if let Some(delay) = delay {
            self.previous + delay
        } else {
            let gap = match &self.spec {
                _ if first && custom_gap.is_none() => 0.0,
                ArrivalSpec::Burst | ArrivalSpec::Closed { .. } => 0.0,
                ArrivalSpec::Constant { rate } => 1.0 / rate,
                ArrivalSpec::Poisson { .. } | ArrivalSpec::Gamma { .. } => self
                    .gamma
                    .as_ref()
                    .map(|g| g.sample(&mut self.rng))
                    .unwrap_or(0.0),
                ArrivalSpec::Custom => custom_gap.unwrap_or(0.0),
            };
            self.previous + gap
        };
        self.previous = offset;
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(spec: ArrivalSpec, seed: u64, n: usize) -> Vec<f64> {
        let mut s = Schedule::new(&spec, seed, 0);
        (0..n).map(|_| s.next(None, None, None)).collect()
    }

    #[test]
    fn constant_rate_is_evenly_spaced() {
        let o = offsets(ArrivalSpec::Constant { rate: 4.0 }, 1, 5);
        assert_eq!(o, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn poisson_has_the_requested_mean_rate_and_is_reproducible() {
        let a = offsets(ArrivalSpec::Poisson { rate: 50.0 }, 7, 20_001);
        let b = offsets(ArrivalSpec::Poisson { rate: 50.0 }, 7, 20_001);
        assert_eq!(a, b);
        let rate = 20_000.0 / a[20_000];
        assert!((rate - 50.0).abs() < 1.5, "measured rate {rate}");
        assert_ne!(a, offsets(ArrivalSpec::Poisson { rate: 50.0 }, 8, 20_001));
    }

    #[test]
    fn gamma_burstiness_changes_the_spread_not_the_mean() {
        let gaps = |k: f64| {
            let o = offsets(
                ArrivalSpec::Gamma {
                    rate: 10.0,
                    burstiness: k,
                },
                3,
                20_001,
            );
            let g: Vec<f64> = o.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = g.iter().sum::<f64>() / g.len() as f64;
            let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64;
            (mean, var.sqrt() / mean)
        };
        let (m1, cv1) = gaps(1.0);
        let (m4, cv4) = gaps(4.0);
        assert!(
            (m1 - 0.1).abs() < 0.005 && (m4 - 0.1).abs() < 0.005,
            "{m1} {m4}"
        );
        assert!(
            (cv1 - 1.0).abs() < 0.05 && (cv4 - 0.5).abs() < 0.05,
            "{cv1} {cv4}"
        );
    }

    #[test]
    fn requests_may_carry_their_own_times() {
        let mut s = Schedule::new(&ArrivalSpec::Burst, 0, 0);
        assert_eq!(s.next(None, Some(2.0), None), 2.0);
        assert_eq!(s.next(None, None, Some(0.5)), 2.5);
        assert_eq!(s.next(None, None, None), 2.5);
    }
}
