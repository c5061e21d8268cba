// The `Scenario` base class, and `exportScenario`, which turns a subclass into the
// `workload` export ComponentizeJS looks for: it builds the scenario's state on the first
// call after `describe` (when the run's parameters are known), converts the builders to
// WIT records, and turns `ScenarioError` into the WIT function's `err`, and anything
// else thrown into an `err` naming the error, its message and its line.

import { END, Phase, Request, Step } from "./builders.js";
import { ScenarioError } from "./host.js";

/** A benchmark scenario. The runner calls `describe` first (parameters are not known
 * yet), then builds the scenario (the constructor) once the `-p` overrides are resolved,
 * then `phases`, then for each phase `nextRequest(phase, 0)`, `nextRequest(phase, 1)`, …
 * ahead of send time. Calls come one at a time; keep your state on `this`.
 *
 * Set `static ON_RESPONSE = true` to have the runner call `onResponse` (it then keeps
 * every answer's text), `STOP` to poll `stop` during each phase, `NEXT_PHASE` to call
 * `nextPhase` after the phases given, `SESSIONS` to call `sessionStep` for the phases
 * with sessions. */
export class Scenario {
  static ON_RESPONSE = false;
  static STOP = false;
  static NEXT_PHASE = false;
  static SESSIONS = false;

  /** A `Description`: name, description and parameters with defaults. */
  static describe() {
    throw new ScenarioError("a scenario must define static describe()");
  }

  /** The phases of the run, in order: an array of `Phase`. */
  phases() {
    throw new ScenarioError("a scenario must define phases()");
  }

  /** Request `index` of `phase` (numbers, from 0): a `Request`, `DONE` when the phase's
   * dataset is exhausted, or `WAIT` to be asked again after the next response. A
   * scenario whose phases all have sessions may leave it out. */
  nextRequest(phase, index) {
    throw new ScenarioError("a scenario with a phase without sessions must define nextRequest()");
  }

  /** For `Phase.custom` arrivals: seconds after the previous request's scheduled time
   * (see `gaps`). */
  arrival(phase, index) {
    return 0;
  }

  /** A finished request (only when ON_RESPONSE is true); its counts are BigInt. */
  onResponse(outcome) {}

  /** Whether to end the current phase now (only when STOP is true). */
  stop(snapshot) {
    return false;
  }

  /** The next `Phase`, from every finished phase's summary, or undefined to end the run
   * (only when NEXT_PHASE is true). */
  nextPhase(history) {
    return undefined;
  }

  /** The next step of a session (only when SESSIONS is true): called when it starts
   * (`state.step === 0`), after each of its requests ends (`state.last`), and once the
   * children of a fan-out have all ended (`state.joined`). Return `Step.send(request,
   * after)` (a `Request` alone is sent at once), `Step.fanOut(names)` or `END`. The
   * random functions draw from the session's own stream here; see `sessions` for the
   * helpers. */
  sessionStep(state) {
    throw new ScenarioError("a scenario with sessions must define sessionStep()");
  }
}

function step(value) {
  if (value instanceof Request) {
    return Step.send(value);
  }
  if (value === undefined || value === null) {
    return END;
  }
  if (["send", "fan-out", "end"].includes(value.tag)) {
    return value;
  }
  throw new ScenarioError(`sessionStep returned ${value}: want Step.send(...), Step.fanOut(...) or END`);
}

function next(value) {
  if (value instanceof Request) {
    return value.wit();
  }
  if (value && ["request", "wait", "done"].includes(value.tag)) {
    return value;
  }
  throw new ScenarioError(`nextRequest returned ${value}: want a Request, DONE or WAIT`);
}

function phase(value) {
  if (value instanceof Phase) {
    return value.wit();
  }
  throw new ScenarioError(`want a Phase, got ${value}`);
}

/** The frames of a stack as SpiderMonkey writes them (`name@file:line:column`, the
 * innermost first), as `{ name, file, line }`. */
function frames(stack) {
  const out = [];
  for (const text of String(stack ?? "").split("\n")) {
    const m = /^(.*)@(.*):(\d+):(\d+)$/.exec(text);
    if (m) {
      out.push({ name: m[1], file: m[2], line: m[3] });
    }
  }
  return out;
}

// The helper's own directory, read from a stack of its own: a frame there is not the
// scenario's line.
const HELPER = (() => {
  const file = frames(new Error().stack)[0]?.file ?? "";
  return file.slice(0, file.lastIndexOf("/") + 1);
})();

/** `Error: bad rate (at scenario.js:11, in rate)`, on one line: the innermost line of
 * the scenario's own code (not the helper's, not the outermost frame, which is
 * ComponentizeJS's glue), else what the engine says of where it was thrown. */
function quote(e) {
  if (!(e instanceof Error)) {
    return `uncaught ${typeof e} ${String(e)}`;
  }
  let text = e.message ? `${e.name}: ${e.message}` : e.name;
  const all = frames(e.stack);
  const own = all.slice(0, -1).find((f) => HELPER === "" || !f.file.startsWith(HELPER));
  const at = own ?? all[0] ?? (e.fileName ? { name: "", file: e.fileName, line: e.lineNumber } : undefined);
  if (at) {
    text += ` (at ${at.file}:${at.line}${at.name ? `, in ${at.name}` : ""})`;
  }
  return text
    .split("\n")
    .filter((l) => l.trim())
    .join(" / ");
}

/** The `workload` export for scenario class `cls`:
 * `export const workload = exportScenario(MyScenario);`. */
export function exportScenario(cls) {
  let state;
  // A `ScenarioError` becomes the WIT function's `err` (ComponentizeJS returns a thrown
  // value's `payload` as the error); anything else would trap, and the runner would see
  // only the engine's abort, so it becomes an `err` naming what was thrown and where.
  const run = (f) => {
    try {
      state ??= new cls();
      return f(state);
    } catch (e) {
      throw { payload: e instanceof ScenarioError ? e.message : quote(e) };
    }
  };
  return {
    describe: () =>
      cls.describe().wit({
        onResponse: Boolean(cls.ON_RESPONSE),
        stop: Boolean(cls.STOP),
        nextPhase: Boolean(cls.NEXT_PHASE),
        sessions: Boolean(cls.SESSIONS),
      }),
    phases: () => run((s) => s.phases().map(phase)),
    nextRequest: (p, index) => run((s) => next(s.nextRequest(p, Number(index)))),
    arrival: (p, index) => run((s) => Number(s.arrival(p, Number(index)))),
    onResponse: (outcome) => run((s) => void s.onResponse(outcome)),
    stop: (snapshot) => run((s) => Boolean(s.stop(snapshot))),
    nextPhase: (history) =>
      run((s) => {
        const p = s.nextPhase(history);
        return p === undefined || p === null ? undefined : phase(p);
      }),
    sessionStep: (state) => run((s) => step(s.sessionStep(state))),
  };
}
