// A JavaScript scenario that throws, for tests/e2e/languages.rs: `nextRequest` calls
// `rate`, which throws Error("bad rate") (the test reads the line of that `throw` from
// this file). The run must end with one error line naming the error and the line.
//
// Build, from the repository's root (ComponentizeJS reads the imports below it):
// node sdk/js/build.mjs tests/guests/js/js_raises.js js_raises.wasm

import { Description, Phase, Scenario, exportScenario } from "../../../sdk/js/bench_scenario/index.js";

function rate(value) {
  throw new Error("bad rate");
}

class Raises extends Scenario {
  static describe() {
    return new Description("js_raises", "Throws from nextRequest.");
  }

  phases() {
    return [new Phase("main").maxRequests(1)];
  }

  nextRequest(phase, index) {
    return rate(-1);
  }
}

export const workload = exportScenario(Raises);
