//! The SDK twin of `scenarios/kv_guard.rhai`: raise the request rate phase by phase
//! (multiplied by `growth`) until the server's own metrics say it is full: KV-cache use
//! above `kv_limit`, or more than `waiting_limit` requests waiting, at any scrape of a
//! phase. The last rate whose phase stayed under both is reported with `note` as
//! `last_rate_that_held`, with `limit_crossed_at` and `crossed_by`. Each finished phase's
//! summary carries the server's metrics by name (`server`: last, mean, max), which the
//! runner scrapes from the target's `/metrics`.

use bench_scenario_sdk::prelude::*;

/// KV-cache use (0 to 1) and waiting requests, by server: vLLM (and its older name),
/// SGLang, llama.cpp, TGI.
const KV_NAMES: [&str; 4] = [
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];
const WAITING_NAMES: [&str; 4] = [
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
    "tgi_queue_size",
];

struct KvGuard {
    growth: f64,
    max_rate: f64,
    max_phases: usize,
    phase_duration: f64,
    kv_limit: f64,
    waiting_limit: f64,
    input_tokens: u32,
    output_tokens: u64,
    /// The last rate whose phase stayed under both limits.
    held: Option<f64>,
}

/// A rate as the Rhai original prints it (`4.0`, `5.5`).
fn show(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.1}")
    } else {
        x.to_string()
    }
}

/// The phase's maximum of the first of `names` the server exports.
fn phase_max(server: &[ServerStat], names: &[&str]) -> Option<f64> {
    names
        .iter()
        .find_map(|n| server.iter().find(|s| s.name == *n))
        .map(|s| s.max)
}

impl KvGuard {
    fn rate_phase(&self, rate: f64) -> Phase {
        Phase::new(&format!("{} req/s", show(rate)))
            .poisson(rate)
            .max_duration(self.phase_duration)
            .max_requests((rate * self.phase_duration).ceil() as u64 + 1)
    }

    /// Which limit the phase crossed, if any.
    fn crossed(&self, kv: Option<f64>, waiting: Option<f64>) -> Option<&'static str> {
        let kv = kv.is_some_and(|v| v > self.kv_limit);
        let waiting = waiting.is_some_and(|v| v > self.waiting_limit);
        match (kv, waiting) {
            (true, true) => Some("kv_cache+waiting"),
            (true, false) => Some("kv_cache"),
            (false, true) => Some("waiting"),
            (false, false) => None,
        }
    }
}

impl Scenario for KvGuard {
    fn describe() -> Description {
        Description::new(
            "kv_guard",
            "Raises the rate until the server's KV cache or queue passes a limit; reports the last rate that held.",
        )
        .param("start_rate", 2.0, "rate of the first phase, req/s")
        .param("growth", 1.5, "factor between the rates of consecutive phases (> 1)")
        .param("max_rate", 1000.0, "highest rate tried, req/s")
        .param("max_phases", 12, "most phases the search runs")
        .param("phase_duration", 20.0, "seconds each rate is offered")
        .param("kv_limit", 0.9, "KV-cache use (0 to 1) that must not be passed")
        .param("waiting_limit", 8, "requests waiting in the server's queue that must not be passed")
        .param("input_tokens", 512, "prompt length, tokens")
        .param("output_tokens", 128, "tokens generated per request (ignore_eos)")
        .param("seed", 42, "random seed of the prompts and arrivals")
    }

    const NEXT_PHASE: bool = true;

    fn new() -> Result<Self, String> {
        Ok(KvGuard {
            growth: param_f64("growth")?,
            max_rate: param_f64("max_rate")?,
            max_phases: usize::try_from(param_i64("max_phases")?).unwrap_or(0),
            phase_duration: param_f64("phase_duration")?,
            kv_limit: param_f64("kv_limit")?,
            waiting_limit: param_i64("waiting_limit")? as f64,
            input_tokens: param_u32("input_tokens")?,
            output_tokens: param_u64("output_tokens")?,
            held: None,
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
        if self.max_phases < 1 {
            return Err("max_phases must be at least 1".into());
        }
        if self.phase_duration <= 0.0 {
            return Err("phase_duration must be > 0".into());
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
        let kv = phase_max(&last.server, &KV_NAMES);
        let waiting = phase_max(&last.server, &WAITING_NAMES);
        if kv.is_none() && waiting.is_none() {
            log("the server exports no known KV-cache or queue metric (is /metrics reachable? see --server-metrics)");
            note("last_rate_that_held", "unknown")?;
            return Ok(None);
        }
        let text = |v: Option<f64>| v.map_or("n/a".to_string(), |v| v.to_string());
        log(&format!(
            "{} req/s: KV-cache use max {}, waiting max {}",
            show(rate),
            text(kv),
            text(waiting)
        ));
        if let Some(by) = self.crossed(kv, waiting) {
            match self.held {
                Some(held) => note("last_rate_that_held", held)?,
                None => note("last_rate_that_held", "none")?,
            }
            note("limit_crossed_at", rate)?;
            note("crossed_by", by)?;
            return Ok(None);
        }
        self.held = Some(rate);
        note("last_rate_that_held", rate)?;
        let next = rate * self.growth;
        if next > self.max_rate || history.len() >= self.max_phases {
            note("limit_crossed_at", "none")?;
            return Ok(None);
        }
        Ok(Some(self.rate_phase(next)))
    }
}

export_scenario!(KvGuard);
