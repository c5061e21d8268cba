// Long context, written in JavaScript: the twin of scenarios/long_context.rhai (the "Long
// Context" profile of the GPUStack Qwen3.5-9B H100 tuning report: random 32000-token
// prompts, 100 output tokens, 100 requests at 1 req/s, seed 42). Same parameters, same
// host calls in the same order, so the same seed sends the same bytes.
//
// Build: node sdk/js/build.mjs scenarios/js/long_context.js long_context.wasm

import {
  Description,
  Phase,
  Request,
  Scenario,
  exportScenario,
  paramF64,
  paramU32,
  paramU64,
  syntheticText,
} from "../../sdk/js/bench_scenario/index.js";

class LongContext extends Scenario {
  static describe() {
    return new Description(
      "long_context",
      "Long prompts, short answers: prefill-bound serving (GPUStack 'Long Context' profile).",
    )
      .param("requests", 100n, "number of requests")
      .param("input_tokens", 32000n, "prompt length, tokens")
      .param("output_tokens", 100n, "tokens generated per request (ignore_eos)")
      .param("rate", 1.0, "offered request rate, req/s")
      .param(
        "burstiness",
        1.0,
        "gamma shape of the gaps between requests: 1 = Poisson, larger = more regular",
      )
      .param("seed", 42n, "random seed of prompts and arrivals");
  }

  constructor() {
    super();
    this.inputTokens = paramU32("input_tokens");
    this.outputTokens = paramU64("output_tokens");
  }

  phases() {
    return [
      new Phase("long context")
        .gamma(paramF64("rate"), paramF64("burstiness"))
        .maxRequests(paramU64("requests")),
    ];
  }

  nextRequest(phase, index) {
    const n = this.inputTokens;
    return Request.text(syntheticText(n))
      .inputTokens(n)
      .maxTokens(this.outputTokens)
      .ignoreEos();
  }
}

export const workload = exportScenario(LongContext);
