//! Long context, written with the Rust SDK: the twin of scenarios/long_context.rhai (the
//! "Long Context" profile of the GPUStack Qwen3.5-9B H100 tuning report: random
//! 32000-token prompts, 100 output tokens, 100 requests at 1 req/s, seed 42). Same
//! parameters, same host calls in the same order, so the same seed sends the same bytes.

use bench_scenario_sdk::prelude::*;

struct LongContext {
    input_tokens: u32,
    output_tokens: u64,
}

impl Scenario for LongContext {
    fn describe() -> Description {
        Description::new(
            "long_context",
            "Long prompts, short answers: prefill-bound serving (GPUStack 'Long Context' profile).",
        )
        .param("requests", 100, "number of requests")
        .param("input_tokens", 32000, "prompt length, tokens")
        .param(
            "output_tokens",
            100,
            "tokens generated per request (ignore_eos)",
        )
        .param("rate", 1.0, "offered request rate, req/s")
        .param(
            "burstiness",
            1.0,
            "gamma shape of the gaps between requests: 1 = Poisson, larger = more regular",
        )
        .param("seed", 42, "random seed of prompts and arrivals")
    }

    fn new() -> Result<Self, String> {
        Ok(LongContext {
            input_tokens: param_u32("input_tokens")?,
            output_tokens: param_u64("output_tokens")?,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        Ok(vec![Phase::new("long context")
            .gamma(param_f64("rate")?, param_f64("burstiness")?)
            .max_requests(param_u64("requests")?)])
    }

    fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
        let n = self.input_tokens;
        Ok(Request::text(synthetic_text(n))
            .input_tokens(u64::from(n))
            .max_tokens(self.output_tokens)
            .ignore_eos()
            .into())
    }
}

export_scenario!(LongContext);
