// The runner's services: parameters, seeded randomness, the run's tokenizer, the
// package's files, the log and the run's results. Thin wrappers over the `host` imports
// of wit/scenario.wit that speak plain JavaScript values and throw `ScenarioError`.

import * as host from "bench:scenario/host@0.4.0";

const U32_MAX = 2 ** 32 - 1;

/** Throw it from any method of a `Scenario` to end the run with this message (the `err`
 * of the WIT function). Anything else thrown ends the run too, with the error's name,
 * message and line: `Error: bad rate (at scenario.js:11, in rate)`. */
export class ScenarioError extends Error {}

/** A JavaScript value as a WIT `value`: BigInt → integer, number → number, boolean,
 * string. */
export function toValue(v) {
  switch (typeof v) {
    case "bigint":
      return { tag: "integer", val: BigInt.asIntN(64, v) === v ? v : tooBig(v) };
    case "number":
      return { tag: "number", val: v };
    case "boolean":
      return { tag: "boolean", val: v };
    case "string":
      return { tag: "text", val: v };
    default:
      throw new ScenarioError(`a value must be a BigInt, number, boolean or string, not ${typeof v}`);
  }
}

function tooBig(v) {
  throw new ScenarioError(`integer ${v} does not fit 64 bits`);
}

/** Calls a host function whose WIT result is `result<T, string>`: jco throws its `err`. */
function call(f, ...args) {
  try {
    return f(...args);
  } catch (e) {
    throw new ScenarioError(e && e.payload !== undefined ? String(e.payload) : String(e));
  }
}

/** This run's value of a parameter declared in `describe` (BigInt, number, boolean or
 * string), or undefined for an unknown name. */
export function param(name) {
  const v = host.param(name);
  return v === undefined || v === null ? undefined : v.val;
}

const KINDS = { integer: "an integer", number: "a number", boolean: "a boolean", text: "a string" };

function typed(name, want, ...tags) {
  const v = host.param(name);
  if (v === undefined || v === null) {
    throw new ScenarioError(`no parameter \`${name}\`; declare it in describe()`);
  }
  if (!tags.includes(v.tag)) {
    throw new ScenarioError(`parameter \`${name}\` is ${KINDS[v.tag]}, not ${want}`);
  }
  return v.val;
}

function inRange(name, v, lo, hi) {
  if (v < lo || v > hi) {
    throw new ScenarioError(`parameter \`${name}\` must be in ${lo}..=${hi}, got ${v}`);
  }
  return Number(v);
}

/** An integer parameter, as a number (refused beyond 2^53, where numbers lose digits). */
export function paramI64(name) {
  return inRange(name, typed(name, "an integer", "integer"), -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
}

/** A non-negative integer parameter. */
export function paramU64(name) {
  return inRange(name, typed(name, "an integer", "integer"), 0, Number.MAX_SAFE_INTEGER);
}

/** A non-negative integer parameter that fits 32 bits (token counts). */
export function paramU32(name) {
  return inRange(name, typed(name, "an integer", "integer"), 0, U32_MAX);
}

/** A number parameter (an integer parameter is accepted too). */
export function paramF64(name) {
  return Number(typed(name, "a number", "number", "integer"));
}

export function paramBool(name) {
  return typed(name, "a boolean", "boolean");
}

export function paramStr(name) {
  return typed(name, "a string", "text");
}

/** Uniform in [0, 1) from the run's seeded generator. */
export function random() {
  return host.random();
}

/** Uniform integer in [lo, hi] (numbers in, a number out). */
export function randInt(lo, hi) {
  return Number(call(host.randInt, BigInt(lo), BigInt(hi)));
}

/** Uniform in [lo, hi). */
export function uniform(lo, hi) {
  return call(host.uniform, lo, hi);
}

export function normal(mean, stdDev) {
  return call(host.normal, mean, stdDev);
}

/** Exponential with this rate: the gap of a Poisson process, mean 1/rate. */
export function exponential(rate) {
  return call(host.exponential, rate);
}

export function gamma(shape, scale) {
  return call(host.gamma, shape, scale);
}

function count(what, n) {
  if (!Number.isInteger(n) || n < 0 || n > U32_MAX) {
    throw new ScenarioError(`${what}(${n}): need a count in 0..=${U32_MAX}`);
  }
  return n;
}

/** Readable text of exactly `n` tokens under the run's tokenizer. */
export function syntheticText(n) {
  return host.syntheticText(count("syntheticText", n));
}

/** The text of `n` random token ids (vLLM's "random" dataset). */
export function randomTokenText(n) {
  return host.randomTokenText(count("randomTokenText", n));
}

export function countTokens(text) {
  return host.countTokens(text);
}

/** The token ids of `text`, as an array of numbers. */
export function encode(text) {
  return Array.from(host.encode(text));
}

export function decode(ids) {
  return call(host.decode, Uint32Array.from(ids));
}

/** A file of the scenario's own directory, by a path relative to it, as text. */
export function readFile(path) {
  return call(host.readFile, path);
}

/** A line on the runner's stderr, as `[scenario-name] message`. */
export function log(message) {
  host.log(String(message));
}

/** Reports a result of the run (the rate a search found): shown in the report's
 * "Scenario Result" block and stored in result.json under `scenario_result`. */
export function note(key, value) {
  call(host.note, key, toValue(value));
}
