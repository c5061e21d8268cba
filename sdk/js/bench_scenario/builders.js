// Builders for the WIT records, so a scenario reads as
// `Request.text(p).maxTokens(100).ignoreEos()` rather than an object with ten fields.
// Each builder's `wit()` gives the record the component returns (u64 fields as BigInt).

import { ScenarioError, toValue } from "./host.js";

// What `nextRequest` returns when it has nothing to send: the phase's dataset is
// exhausted (DONE), or the next request needs an answer still in flight (WAIT; only with
// the on-response hook).
export const DONE = Object.freeze({ tag: "done" });
export const WAIT = Object.freeze({ tag: "wait" });

/** A count for a u64 field: a non-negative integer number or BigInt. */
function u64(what, n) {
  const ok = typeof n === "bigint" ? n >= 0n : Number.isSafeInteger(n) && n >= 0;
  if (!ok) {
    throw new ScenarioError(`${what}: need an integer >= 0, got ${n}`);
  }
  return BigInt(n);
}

/** Name, description, parameters and thresholds of a scenario. */
export class Description {
  constructor(name, description) {
    this.name = name;
    this.description = description;
    this.params = [];
    this.thresholds = [];
  }

  /** Declares a parameter. The default's type is the parameter's type: `100n` an
   * integer, `1.0` a number, `true`, `"text"`; `-p NAME=VALUE` must parse as it. */
  param(name, value, help) {
    this.params.push({ name, default: toValue(value), help });
    return this;
  }

  /** A pass/fail check at the end of the run, as `--threshold` takes it:
   * `"p99_ttft_ms<500"`. A failed one makes the run exit with 99. */
  threshold(check) {
    this.thresholds.push(check);
    return this;
  }

  wit(hooks) {
    return {
      name: this.name,
      description: this.description,
      params: [...this.params],
      hooks,
      thresholds: [...this.thresholds],
    };
  }
}

/** A phase whose requests all start at once, with no limits; chain the methods below. */
export class Phase {
  constructor(name) {
    this.name = name;
    this.arrival = { tag: "burst" };
    this.limits = {};
    this.isWarmup = false;
  }

  /** All requests at once. */
  burst() {
    this.arrival = { tag: "burst" };
    return this;
  }

  /** Poisson arrivals at `rate` requests per second. */
  poisson(rate) {
    this.arrival = { tag: "poisson", val: rate };
    return this;
  }

  /** Gamma gaps: mean 1/rate, shape `burstiness` (1 = Poisson). */
  gamma(rate, burstiness) {
    this.arrival = { tag: "gamma", val: { rate, burstiness } };
    return this;
  }

  /** One request every 1/rate seconds. */
  constant(rate) {
    this.arrival = { tag: "constant", val: rate };
    return this;
  }

  /** Closed loop: keep `concurrency` requests in flight. */
  closed(concurrency) {
    this.arrival = { tag: "closed", val: u64("closed", concurrency) };
    return this;
  }

  /** Gaps from `Scenario.arrival` (see `gaps`). */
  custom() {
    this.arrival = { tag: "custom" };
    return this;
  }

  maxRequests(n) {
    this.limits.maxRequests = u64("maxRequests", n);
    return this;
  }

  maxConcurrency(n) {
    this.limits.maxConcurrency = u64("maxConcurrency", n);
    return this;
  }

  /** Stop sending after this many seconds; in-flight requests drain. */
  maxDuration(seconds) {
    this.limits.maxDuration = seconds;
    return this;
  }

  /** Send and record, but leave the phase out of the statistics. */
  warmup() {
    this.isWarmup = true;
    return this;
  }

  /** A phase of `n` root sessions driven by `Scenario.sessionStep` (set `static
   * SESSIONS = true`); the arrival process times their starts, and a closed loop keeps
   * that many sessions open at once. */
  sessions(n) {
    this.limits.sessions = u64("sessions", n);
    return this;
  }

  wit() {
    return {
      name: this.name,
      arrival: this.arrival,
      maxConcurrency: this.limits.maxConcurrency,
      maxRequests: this.limits.maxRequests,
      maxDuration: this.limits.maxDuration,
      warmup: this.isWarmup,
      sessions: this.limits.sessions,
    };
  }
}

/** Chat messages, as the WIT record: `Message.user("hi")`. An assistant turn that called
 * tools, and a tool's result, are sent in OpenAI's chat shape. */
export const Message = Object.freeze({
  new: (role, content) => ({ role, content, toolCalls: [] }),
  system: (content) => Message.new("system", content),
  user: (content) => Message.new("user", content),
  assistant: (content) => Message.new("assistant", content),
  /** An assistant turn that called these tools (`{ id, name, arguments }` records, as an
   * outcome's `toolCalls` holds them), with empty content. */
  assistantToolCalls: (calls) => ({ role: "assistant", content: "", toolCalls: [...calls] }),
  /** The model's answer as the turn that continues a history: its text, and its tool
   * calls when it made any (Rhai's `assistant_turn(outcome)`). */
  assistantTurn: (outcome) => ({ role: "assistant", content: outcome.text, toolCalls: [...outcome.toolCalls] }),
  /** The result of the tool call `callId`, sent as a `tool` message. */
  toolResult: (callId, content) => ({ role: "tool", content, toolCalls: [], toolCallId: callId }),
});

/** A tool the model may call: `parameters` its arguments' JSON Schema, an object or the
 * text of a JSON object (see `sessions.ToolSchema`). */
export function tool(name, description, parameters) {
  const parametersJson = typeof parameters === "string" ? parameters : JSON.stringify(parameters);
  return { name, description, parametersJson };
}

/** A tool call record (`arguments` as JSON text). */
export function toolCall(id, name, args) {
  return { id, name, arguments: args };
}

/** One request; start with `Request.text`, `Request.tokens` or `Request.chat`, and set
 * `maxTokens` (the runner refuses a request without it). */
export class Request {
  constructor(prompt) {
    this.r = { prompt, maxTokens: 0n, ignoreEos: false, stream: true, headers: [], tools: [] };
  }

  /** A text prompt (the completions endpoint, or one user message with `--api chat`). */
  static text(prompt) {
    return new Request({ tag: "text", val: prompt });
  }

  /** A prompt of token ids of the run's tokenizer. */
  static tokens(ids) {
    return new Request({ tag: "tokens", val: Uint32Array.from(ids) });
  }

  /** A conversation, sent to the chat endpoint. */
  static chat(messages) {
    return new Request({ tag: "messages", val: [...messages] });
  }

  /** A batch of texts to embed in one request (`--api embeddings`): at least one, at
   * most 2048. Set `maxTokens` all the same (1 will do). */
  static embeddings(inputs) {
    return new Request({ tag: "inputs", val: [...inputs].map(String) });
  }

  maxTokens(n) {
    this.r.maxTokens = u64("maxTokens", n);
    return this;
  }

  /** Generate exactly `maxTokens` (the server ignores end-of-sequence). */
  ignoreEos() {
    this.r.ignoreEos = true;
    return this;
  }

  /** Ask for the whole answer at once instead of a stream (no TTFT or ITL then). */
  noStream() {
    this.r.stream = false;
    return this;
  }

  /** Extra JSON body fields: an object, or the text of a JSON object. */
  extraJson(fields) {
    this.r.extraJson = typeof fields === "string" ? fields : JSON.stringify(fields);
    return this;
  }

  tag(tag) {
    this.r.tag = tag;
    return this;
  }

  session(session) {
    this.r.session = session;
    return this;
  }

  /** Send at this offset from the phase start, seconds (trace replay). */
  at(seconds) {
    this.r.at = seconds;
    return this;
  }

  /** Send this long after the previous request's scheduled time, seconds. */
  delay(seconds) {
    this.r.delay = seconds;
    return this;
  }

  /** The prompt's length in tokens, used when the server reports no usage. */
  inputTokens(n) {
    this.r.inputTokens = u64("inputTokens", n);
    return this;
  }

  /** An HTTP header of this request only, sent after the run's `--header`s (a router's
   * session-affinity key, a tenant id); call again for more, at most 64. */
  header(name, value) {
    this.r.headers = [...this.r.headers, { name, value }];
    return this;
  }

  /** Give up on the request once `n` (> 0) output tokens have arrived; counted as
   * cancelled, not failed. With `cancelAfterMs`: whichever comes first. */
  cancelAfterTokens(n) {
    this.r.cancel = { ...this.r.cancel, afterTokens: u64("cancelAfterTokens", n) };
    return this;
  }

  /** Give up on the request this many milliseconds (> 0) after it was sent. */
  cancelAfterMs(ms) {
    this.r.cancel = { ...this.r.cancel, afterMs: ms };
    return this;
  }

  /** Send to the `--target` at this index (from 0, in the order given) instead of the
   * next one round-robin. */
  target(index) {
    this.r.target = index;
    return this;
  }

  /** A tool the model may call (`tool(...)` or `new ToolSchema(...).build()`); call
   * again for more. */
  tool(t) {
    this.r.tools.push(t);
    return this;
  }

  /** Tools the model may call, after any given before. */
  tools(ts) {
    this.r.tools.push(...ts);
    return this;
  }

  /** The WIT `request` record. */
  record() {
    return { ...this.r, tools: [...this.r.tools] };
  }

  wit() {
    return { tag: "request", val: this.record() };
  }
}

/** What `sessionStep` returns when the session is over. */
export const END = Object.freeze({ tag: "end" });

/** What `sessionStep` returns: `Step.send(request, after)`, `Step.fanOut(names)` or
 * `END` (a `Request` alone is sent at once). */
export const Step = Object.freeze({
  /** Send `request` `after` seconds after the session's previous step ended (think
   * time, a tool's latency). */
  send: (request, after = 0) => ({
    tag: "send",
    val: { request: request instanceof Request ? request.record() : request, after: Number(after) },
  }),
  /** Open these children now; the session's next step comes once all have ended. */
  fanOut: (names) => ({ tag: "fan-out", val: [...names].map(String) }),
});

/** Failed over finished requests so far in a `stop` snapshot (0 before any finished). */
export function errorRate(snapshot) {
  const finished = snapshot.completed + snapshot.failed;
  return finished === 0n ? 0 : Number(snapshot.failed) / Number(finished);
}

/** The server metric `name` at the latest scrape in a `stop` snapshot
 * (`"vllm:num_requests_waiting"`), or undefined when the server does not export it or is
 * not scraped. */
export function serverValue(snapshot, name) {
  return snapshot.server.find((v) => v.name === name)?.value;
}

/** The server metric `name` over a finished phase of `nextPhase`'s history (`last`,
 * `mean`, `max`), or undefined. */
export function serverStat(summary, name) {
  return summary.server.find((s) => s.name === name);
}
