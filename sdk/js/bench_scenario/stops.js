// Common stop conditions for `Scenario.stop`: build one in the constructor, then return
// `this.stopWhen.check(snapshot)`.
//
//     const stop = new StopWhen().p99TtftAboveMs(500).errorRateAbove(0.05);

import { errorRate, serverValue } from "./builders.js";

/** A set of conditions, any of which ends the phase. Latency and error-rate conditions
 * are judged only once `minCompleted` requests have finished (10 by default), so one slow
 * first request does not end a phase. */
export class StopWhen {
  constructor() {
    this.limits = {};
    this.server = [];
    this.least = 10;
  }

  p99TtftAboveMs(ms) {
    this.limits.p99TtftMs = ms;
    return this;
  }

  p99E2elAboveMs(ms) {
    this.limits.p99E2elMs = ms;
    return this;
  }

  /** When more than this share of finished requests failed (0.05 = 5 %). */
  errorRateAbove(rate) {
    this.limits.errorRate = rate;
    return this;
  }

  failuresAtLeast(n) {
    this.limits.failures = n;
    return this;
  }

  afterSeconds(seconds) {
    this.limits.seconds = seconds;
    return this;
  }

  afterOutputTokens(n) {
    this.limits.outputTokens = n;
    return this;
  }

  /** When the server metric `name` passes `limit` at a scrape (KV-cache use,
   * `"vllm:kv_cache_usage_perc"` above 0.95). A metric the server does not export never
   * fires. */
  serverAbove(name, limit) {
    this.server.push([name, limit]);
    return this;
  }

  /** Requests that must finish before latency and error-rate conditions count. */
  minCompleted(n) {
    this.least = n;
    return this;
  }

  /** Why the phase should stop now, or undefined. The snapshot's counts are BigInt. */
  reason(s) {
    const l = this.limits;
    const completed = Number(s.completed);
    const failed = Number(s.failed);
    const output = Number(s.outputTokens);
    if (l.seconds !== undefined && s.elapsed >= l.seconds) {
      return `ran ${s.elapsed.toFixed(1)} s (limit ${l.seconds} s)`;
    }
    if (l.outputTokens !== undefined && output >= l.outputTokens) {
      return `${output} output tokens (limit ${l.outputTokens})`;
    }
    if (l.failures !== undefined && failed >= l.failures) {
      return `${failed} failed requests (limit ${l.failures})`;
    }
    for (const [name, limit] of this.server) {
      const value = serverValue(s, name);
      if (value !== undefined && value > limit) {
        return `server ${name} ${value} above ${limit}`;
      }
    }
    if (completed + failed < this.least) {
      return undefined;
    }
    const rate = errorRate(s);
    if (l.errorRate !== undefined && rate > l.errorRate) {
      return `error rate ${rate.toFixed(3)} above ${l.errorRate}`;
    }
    if (l.p99TtftMs !== undefined && s.ttftP99Ms > l.p99TtftMs) {
      return `p99 TTFT ${s.ttftP99Ms.toFixed(1)} ms above ${l.p99TtftMs} ms`;
    }
    if (l.p99E2elMs !== undefined && s.e2elP99Ms > l.p99E2elMs) {
      return `p99 E2EL ${s.e2elP99Ms.toFixed(1)} ms above ${l.p99E2elMs} ms`;
    }
    return undefined;
  }

  /** Whether any condition holds. */
  check(s) {
    return this.reason(s) !== undefined;
  }
}
