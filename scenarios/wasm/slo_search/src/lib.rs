//! The SDK twin of `scenarios/slo_search.rhai`: the highest request rate whose p99 TTFT
//! and p99 TPOT meet the SLOs, found by bracketing (multiply or divide the rate by
//! `growth`) and bisection over phases, each offering one rate for `phase_duration`
//! seconds. Adaptive: after each phase `next_phase` sees every finished phase and picks
//! the next rate. The answer and its bracket are logged and reported with `note`
//! (`max_rate_under_slo`, `bracket_low`, `bracket_high`, `converged`, `phases`). The same
//! seed, parameters and phase results give the same phases and requests as the Rhai
//! original.

use bench_scenario_sdk::prelude::*;

struct SloSearch {
    ttft_slo_ms: f64,
    tpot_slo_ms: f64,
    growth: f64,
    max_rate: f64,
    tolerance: f64,
    max_phases: usize,
    phase_duration: f64,
    arrival: String,
    input_tokens: u32,
    output_tokens: u64,
    /// The highest rate seen to meet the SLOs, and the lowest seen to miss them.
    lo: Option<f64>,
    hi: Option<f64>,
}

/// A rate as the Rhai original prints it (`5.0`, `21.25`), for phase names and logs.
fn show(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.1}")
    } else {
        x.to_string()
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn show_bound(x: Option<f64>) -> String {
    x.map_or_else(|| "()".to_string(), show)
}

fn bound_value(x: Option<f64>) -> Value {
    x.map_or_else(|| Value::from("none"), Value::from)
}

impl SloSearch {
    /// One phase offering `rate` req/s for phase_duration seconds.
    fn rate_phase(&self, rate: f64) -> Phase {
        let phase = Phase::new(&format!("{} req/s", show(rate)));
        let phase = if self.arrival == "poisson" {
            phase.poisson(rate)
        } else {
            phase.constant(rate)
        };
        phase
            .max_duration(self.phase_duration)
            .max_requests((rate * self.phase_duration).ceil() as u64 + 1)
    }
}

impl Scenario for SloSearch {
    fn describe() -> Description {
        Description::new(
            "slo_search",
            "Finds the highest request rate whose p99 TTFT and p99 TPOT meet SLOs, by bracketing and bisection over phases.",
        )
        .param("ttft_slo_ms", 500.0, "p99 TTFT limit, ms")
        .param("tpot_slo_ms", 50.0, "p99 TPOT limit, ms")
        .param("start_rate", 1.0, "rate of the first phase, req/s")
        .param("growth", 2.0, "factor between rates while bracketing (> 1)")
        .param("max_rate", 1000.0, "highest rate tried, req/s")
        .param("tolerance", 0.05, "stop once the bracket is narrower than this share of its lower end")
        .param("max_phases", 8, "most phases the search runs")
        .param("phase_duration", 30.0, "seconds each rate is offered")
        .param("arrival", "constant", "arrival process of each phase: constant or poisson")
        .param("input_tokens", 256, "prompt length, tokens")
        .param("output_tokens", 128, "tokens generated per request (ignore_eos)")
        .param("seed", 42, "random seed of the prompts and arrivals")
    }

    const NEXT_PHASE: bool = true;

    fn new() -> Result<Self, String> {
        Ok(SloSearch {
            ttft_slo_ms: param_f64("ttft_slo_ms")?,
            tpot_slo_ms: param_f64("tpot_slo_ms")?,
            growth: param_f64("growth")?,
            max_rate: param_f64("max_rate")?,
            tolerance: param_f64("tolerance")?,
            max_phases: usize::try_from(param_i64("max_phases")?).unwrap_or(0),
            phase_duration: param_f64("phase_duration")?,
            arrival: param_str("arrival")?,
            input_tokens: param_u32("input_tokens")?,
            output_tokens: param_u64("output_tokens")?,
            lo: None,
            hi: None,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        let start = param_f64("start_rate")?;
        if start <= 0.0 {
            return Err("start_rate must be > 0".into());
        }
        if self.growth <= 1.0 {
            return Err("growth must be > 1".into());
        }
        if self.max_rate < start {
            return Err("max_rate must be >= start_rate".into());
        }
        if self.tolerance <= 0.0 {
            return Err("tolerance must be > 0".into());
        }
        if self.max_phases < 1 {
            return Err("max_phases must be at least 1".into());
        }
        if self.phase_duration <= 0.0 {
            return Err("phase_duration must be > 0".into());
        }
        if self.arrival != "constant" && self.arrival != "poisson" {
            return Err("arrival must be constant or poisson".into());
        }
        Ok(vec![self.rate_phase(start)])
    }

    fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
        Ok(Request::text(synthetic_text(self.input_tokens))
            .input_tokens(u64::from(self.input_tokens))
            .max_tokens(self.output_tokens)
            .ignore_eos()
            .into())
    }

    fn next_phase(&mut self, history: Vec<PhaseSummary>) -> Result<Option<Phase>, String> {
        let last = history
            .last()
            .ok_or("next_phase without a finished phase")?;
        let rate = last
            .request_rate
            .ok_or("a phase of the search has no request rate")?;
        let meets = last.failed == 0
            && last.completed > 0
            && last.ttft.p99 <= self.ttft_slo_ms
            && last.tpot.p99 <= self.tpot_slo_ms;
        let verdict = if meets { "meets" } else { "misses" };
        log(&format!(
            "{} req/s: p99 TTFT {} ms, p99 TPOT {} ms, {} failed: {verdict} the SLOs",
            show(rate),
            round2(last.ttft.p99),
            round2(last.tpot.p99),
            last.failed
        ));
        if meets {
            if self.lo.is_none_or(|lo| rate > lo) {
                self.lo = Some(rate);
            }
        } else if self.hi.is_none_or(|hi| rate < hi) {
            self.hi = Some(rate);
        }

        let mut converged = false;
        let mut next = match (self.lo, self.hi) {
            (None, _) => Some(rate / self.growth),
            (Some(lo), None) => (lo < self.max_rate).then(|| (lo * self.growth).min(self.max_rate)),
            (Some(lo), Some(hi)) if hi - lo <= self.tolerance * lo => {
                converged = true;
                None
            }
            (Some(lo), Some(hi)) => Some((lo + hi) / 2.0),
        };
        if history.len() >= self.max_phases {
            next = None;
        }

        note("max_rate_under_slo", bound_value(self.lo))?;
        note("bracket_low", bound_value(self.lo))?;
        note("bracket_high", bound_value(self.hi))?;
        note("converged", converged)?;
        note("phases", history.len() as i64)?;
        let Some(next) = next else {
            let answer = self.lo.map_or_else(
                || "no rate met them".to_string(),
                |lo| format!("{} req/s", show(lo)),
            );
            log(&format!(
                "highest rate meeting p99 TTFT <= {} ms and p99 TPOT <= {} ms: {answer} (bracket [{}, {}), {} phases)",
                show(self.ttft_slo_ms),
                show(self.tpot_slo_ms),
                show_bound(self.lo),
                show_bound(self.hi),
                history.len()
            ));
            return Ok(None);
        };
        Ok(Some(self.rate_phase(next)))
    }
}

export_scenario!(SloSearch);
