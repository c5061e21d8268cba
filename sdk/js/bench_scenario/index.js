// Write benchmark scenarios for `runner` in JavaScript, as WebAssembly components: the
// JavaScript counterpart of the Rust SDK (sdk/rust). A scenario module ends with
// `export const workload = exportScenario(MyScenario);` and ComponentizeJS (see
// ../build.mjs) turns it into a component implementing `bench:scenario@0.4.0`
// (wit/scenario.wit, the contract itself).
//
// Numbers: WIT integers of 64 bits are BigInt in JavaScript, so an integer parameter is
// declared with a BigInt default (`100n`), and a plain number (`1.0`, also `1`) declares
// a number parameter. The `param*` getters return plain numbers and the builders take
// them; the records the runner passes in (outcome, snapshot) carry BigInt counts.
//
// The sandbox is the same for every language: no network, no environment, no real clock
// (time starts at zero), a read-only view of the scenario's own directory, one second
// per call (ten for `phases`), 1 GiB of memory. Draw randomness from `random` and its
// siblings here, never from Math.random, so the same seed gives the same requests.

// The version of the WIT package this helper implements; the runner refuses components
// built against an incompatible one.
export const WIT_VERSION = "0.4.0";

export * from "./host.js";
export * from "./builders.js";
export { StopWhen } from "./stops.js";
export * as gaps from "./gaps.js";
export * as sessions from "./sessions.js";
export { Chat, Prefix, ThinkTime, ToolSchema } from "./sessions.js";
export { Scenario, exportScenario } from "./export.js";
