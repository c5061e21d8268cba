"""Long context, written in Python: the twin of scenarios/long_context.rhai (the "Long
Context" profile of the GPUStack Qwen3.5-9B H100 tuning report: random 32000-token
prompts, 100 output tokens, 100 requests at 1 req/s, seed 42). Same parameters, same host
calls in the same order, so the same seed sends the same bytes.

Build: sdk/python/build.sh scenarios/python/long_context.py long_context.wasm
"""

from bench_scenario import (
    Description,
    Phase,
    Request,
    Scenario,
    export,
    param_f64,
    param_u32,
    param_u64,
    synthetic_text,
)


class LongContext(Scenario):
    @staticmethod
    def describe():
        return (
            Description(
                "long_context",
                "Long prompts, short answers: prefill-bound serving (GPUStack 'Long Context' profile).",
            )
            .param("requests", 100, "number of requests")
            .param("input_tokens", 32000, "prompt length, tokens")
            .param("output_tokens", 100, "tokens generated per request (ignore_eos)")
            .param("rate", 1.0, "offered request rate, req/s")
            .param(
                "burstiness",
                1.0,
                "gamma shape of the gaps between requests: 1 = Poisson, larger = more regular",
            )
            .param("seed", 42, "random seed of prompts and arrivals")
        )

    def __init__(self):
        self.input_tokens = param_u32("input_tokens")
        self.output_tokens = param_u64("output_tokens")

    def phases(self):
        return [
            Phase("long context")
            .gamma(param_f64("rate"), param_f64("burstiness"))
            .max_requests(param_u64("requests"))
        ]

    def next_request(self, phase, index):
        n = self.input_tokens
        return (
            Request.text(synthetic_text(n))
            .input_tokens(n)
            .max_tokens(self.output_tokens)
            .ignore_eos()
        )


Workload = export(LongContext)
