// Helpers for scenarios of sessions (`Scenario.sessionStep`): a chat history with tool
// turns (`Chat`), tool schemas (`ToolSchema`), think times and tool latencies drawn from
// named distributions (`ThinkTime`), fan-out and join (`children` and the state
// helpers), and a context that grows by blocks of synthetic tokens (`Prefix`). The same
// helpers as the Rust SDK's `sessions` module, drawing through the host's random
// functions in the same order, so twins in either language send the same requests.

import { Message, Request, tool as rawTool } from "./builders.js";
import { ScenarioError, exponential, normal, syntheticText, uniform } from "./host.js";

/** A conversation's messages, in order, with the turns an agent adds: the user's, the
 * assistant's answers and tool calls, and the tools' results. Each method returns the
 * chat, so calls chain. */
export class Chat {
  constructor() {
    this.messages = [];
  }

  push(message) {
    this.messages.push(message);
    return this;
  }

  system(content) {
    return this.push(Message.system(content));
  }

  user(content) {
    return this.push(Message.user(content));
  }

  assistant(content) {
    return this.push(Message.assistant(content));
  }

  /** An assistant turn that called these tools (empty content). */
  assistantToolCalls(calls) {
    return this.push(Message.assistantToolCalls(calls));
  }

  /** The result of the tool call `callId`. */
  toolResult(callId, content) {
    return this.push(Message.toolResult(callId, content));
  }

  /** The model's turn from a finished request: its text, and the tool calls it made
   * (Rhai's `assistant_turn(outcome)`). */
  answer(outcome) {
    return this.push(Message.assistantTurn(outcome));
  }

  get length() {
    return this.messages.length;
  }

  /** A chat request of the whole history so far (set its `maxTokens`). */
  request() {
    return Request.chat(this.messages);
  }
}

/** A tool whose arguments are an object of these properties (an object of name to JSON
 * type, "string", "integer", …), all required: Rhai's `tool(name, description, #{ path:
 * "string" })`, which lists them in name order, as this does. */
export function tool(name, description, properties) {
  const schema = new ToolSchema(name, description);
  for (const [prop, jsonType] of Object.entries(properties)) {
    schema.param(prop, jsonType);
  }
  return schema.build();
}

/** A tool's JSON Schema, built parameter by parameter: `{"type": "object",
 * "properties": {…}, "required": […]}`. `required` lists the names in name order, as
 * Rhai's `tool` does, so a twin sends the same bytes. */
export class ToolSchema {
  constructor(name, description) {
    this.name = name;
    this.description = description;
    this.properties = {};
    this.required = [];
  }

  /** A required parameter of a JSON type ("string", "integer", "number", "boolean"). */
  param(name, jsonType) {
    return this.schema(name, { type: jsonType }, true);
  }

  /** A required parameter of a JSON type, with a description for the model. */
  described(name, jsonType, description) {
    return this.schema(name, { type: jsonType, description }, true);
  }

  /** A parameter the model may leave out. */
  optional(name, jsonType) {
    return this.schema(name, { type: jsonType }, false);
  }

  /** A parameter whose schema is this object. */
  schema(name, schema, required) {
    this.properties[name] = schema;
    if (required) {
      this.required.push(name);
    }
    return this;
  }

  string(name) {
    return this.param(name, "string");
  }

  integer(name) {
    return this.param(name, "integer");
  }

  /** The schema, as an object. */
  parameters() {
    return { type: "object", properties: { ...this.properties }, required: [...this.required].sort() };
  }

  /** The tool, to pass to `Request.tool`. */
  build() {
    return rawTool(this.name, this.description, this.parameters());
  }
}

const KINDS = ["constant", "uniform", "exponential", "lognormal"];

/** A distribution of seconds (think time, a tool's latency), drawn through the host's
 * random functions so the seed fixes every draw, as Rhai's `draw(#{ dist: … })` draws:
 * `ThinkTime.named("lognormal", median, sigma).draw()`. */
export class ThinkTime {
  constructor(kind, a, b = 0) {
    if (!KINDS.includes(kind)) {
      throw new ScenarioError(
        `unknown distribution \`${kind}\`: constant, uniform, exponential or lognormal`,
      );
    }
    this.kind = kind;
    this.a = Number(a);
    this.b = Number(b);
  }

  /** `constant` (a = seconds), `uniform` (a = lo, b = hi), `exponential` (a = mean),
   * `lognormal` (a = median, b = sigma of the underlying normal). */
  static named(kind, a, b = 0) {
    return new ThinkTime(kind, a, b);
  }

  /** One draw, seconds: constant draws nothing, uniform one `uniform(lo, hi)`,
   * exponential one `exponential(1 / mean)`, lognormal `exp(normal(ln median, sigma))`. */
  draw() {
    switch (this.kind) {
      case "constant":
        return this.a;
      case "uniform":
        return uniform(this.a, this.b);
      case "exponential":
        if (!(this.a > 0 && Number.isFinite(this.a))) {
          throw new ScenarioError(`exponential think time: the mean must be > 0, got ${this.a}`);
        }
        return exponential(1 / this.a);
      default:
        if (!(this.a > 0 && Number.isFinite(this.a))) {
          throw new ScenarioError(`lognormal think time: the median must be > 0, got ${this.a}`);
        }
        return Math.exp(normal(Math.log(this.a), this.b));
    }
  }

  /** One draw, clamped to [lo, hi]. */
  drawWithin(lo, hi) {
    return Math.min(Math.max(this.draw(), lo), hi);
  }
}

/** `n` child names for a fan-out: `prefix-1` … `prefix-n`. */
export function children(prefix, n) {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`);
}

/** A child of a fan-out (its id has a parent part). */
export function isChild(state) {
  return state.id.includes("/");
}

/** The name the fan-out gave this session (`review-2` of `7/review-2`), or the root
 * session's number. */
export function name(state) {
  return state.id.slice(state.id.lastIndexOf("/") + 1);
}

/** The parent's id (`7` of `7/review-2`); undefined for a root session. */
export function parent(state) {
  const at = state.id.lastIndexOf("/");
  return at < 0 ? undefined : state.id.slice(0, at);
}

/** The root session's id (`7` of `7/a/b`). */
export function root(state) {
  return state.id.split("/")[0];
}

/** A context shared across turns (or sessions) that grows by blocks of synthetic text;
 * blocks are joined by a newline. */
export class Prefix {
  constructor() {
    this.blocks = [];
    this.tokens = 0;
  }

  /** Appends a block of `n` synthetic tokens (one `syntheticText(n)`) and returns it. */
  grow(n) {
    const block = syntheticText(n);
    this.blocks.push(block);
    this.tokens += n;
    return block;
  }

  /** The whole context so far. */
  text() {
    return this.blocks.join("\n");
  }
}
