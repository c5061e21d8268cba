// Gaps between requests for phases with custom arrivals (`Phase.custom`), drawn from the
// run's seeded generator: return one of these from `Scenario.arrival`, or mix them (an
// on/off process switches between two Poisson rates).

import { ScenarioError, exponential, gamma as drawGamma } from "./host.js";

/** A Poisson process at `rate` requests per second: exponential gaps, mean 1/rate. */
export function poisson(rate) {
  return exponential(rate);
}

/** Gamma gaps with mean 1/rate and shape `burstiness` (1 is Poisson, larger is more
 * regular), as vLLM's `--burstiness`. */
export function gamma(rate, burstiness) {
  if (!(rate > 0 && burstiness > 0)) {
    throw new ScenarioError(`gaps.gamma(${rate}, ${burstiness}): rate and burstiness must be > 0`);
  }
  return drawGamma(burstiness, 1 / (rate * burstiness));
}

/** One request every 1/rate seconds. */
export function constant(rate) {
  if (!(rate > 0 && Number.isFinite(rate))) {
    throw new ScenarioError(`gaps.constant(${rate}): rate must be > 0`);
  }
  return 1 / rate;
}
