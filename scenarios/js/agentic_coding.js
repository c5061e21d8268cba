// Agentic coding, written in JavaScript: the twin of scenarios/agentic_coding.rhai
// (SWE-style agent sessions: a shared system prompt and repository context, 10-40
// tool-calling turns, each tool call answered with a result of a drawn length after a
// drawn tool latency, a growing context). Same parameters, same host calls in the same
// order, the same JSON of every message and tool, so the same seed sends the same
// request stream.
//
// Build: node sdk/js/build.mjs scenarios/js/agentic_coding.js agentic_coding.wasm

import {
  END,
  Chat,
  Description,
  Phase,
  Scenario,
  Step,
  ThinkTime,
  exportScenario,
  paramF64,
  paramI64,
  paramU32,
  paramU64,
  randInt,
  sessions,
  syntheticText,
} from "../../sdk/js/bench_scenario/index.js";

class AgenticCoding extends Scenario {
  static SESSIONS = true;

  static describe() {
    return new Description(
      "agentic_coding",
      "SWE-style agent sessions: a shared system prompt and repository context, 10-40 tool-calling turns with 0.5-30 s tool latency, a growing context.",
    )
      .param("sessions", 16n, "agent sessions in the phase")
      .param("rate", 0.5, "sessions started per second (Poisson)")
      .param("system_tokens", 2000n, "tokens of the system prompt every session shares")
      .param("repo_tokens", 8000n, "tokens of repository context every session shares")
      .param("task_tokens", 200n, "tokens of each session's task, and of a user turn")
      .param("turns_min", 10n, "fewest model turns per session")
      .param("turns_max", 40n, "most model turns per session")
      .param("output_tokens", 256n, "tokens generated per turn (ignore_eos)")
      .param("tool_latency_min", 0.5, "shortest tool run, seconds (uniform)")
      .param("tool_latency_max", 30.0, "longest tool run, seconds")
      .param("result_tokens_min", 100n, "shortest tool result, tokens (uniform)")
      .param("result_tokens_max", 2000n, "longest tool result, tokens")
      .param("think_time", 2.0, "mean seconds before a user turn after a text answer (exponential)")
      .param("seed", 42n, "random seed");
  }

  constructor() {
    super();
    this.open = new Map();
    this.taskTokens = paramU32("task_tokens");
    this.outputTokens = paramU64("output_tokens");
  }

  phases() {
    // Drawn once from the run's stream: the same text in every session and every shard.
    this.system = syntheticText(paramU32("system_tokens"));
    this.repo = syntheticText(paramU32("repo_tokens"));
    this.tools = [
      sessions.tool("read_file", "Read a file of the repository", { path: "string" }),
      sessions.tool("run_tests", "Run the test suite, or the tests matching a filter", {
        filter: "string",
      }),
      sessions.tool("edit_file", "Replace a span of a file", {
        path: "string",
        before: "string",
        after: "string",
      }),
    ];
    return [new Phase("agents").poisson(paramF64("rate")).sessions(paramU64("sessions"))];
  }

  sessionStep(s) {
    let wait = 0;
    if (s.step === 0) {
      const turns = randInt(paramI64("turns_min"), paramI64("turns_max"));
      const task = syntheticText(this.taskTokens);
      // The Rhai original's backtick template reads `\n` as a backslash and an `n`.
      const chat = new Chat().system(this.system).user(`${this.repo}\\n\\nTask: ${task}`);
      this.open.set(s.id, { turns, chat });
    } else {
      const c = this.open.get(s.id);
      if (!s.last.ok || s.step >= c.turns) {
        this.open.delete(s.id);
        return END;
      }
      c.chat.answer(s.last);
      if (s.last.toolCalls.length === 0) {
        c.chat.user(syntheticText(this.taskTokens));
        wait = ThinkTime.named("exponential", paramF64("think_time")).draw();
      } else {
        for (const tc of s.last.toolCalls) {
          const n = randInt(paramI64("result_tokens_min"), paramI64("result_tokens_max"));
          c.chat.toolResult(tc.id, syntheticText(n));
        }
        wait = ThinkTime.named(
          "uniform",
          paramF64("tool_latency_min"),
          paramF64("tool_latency_max"),
        ).draw();
      }
    }
    const c = this.open.get(s.id);
    const lastTurn = s.step + 1 >= c.turns;
    const request = c.chat
      .request()
      .tools(this.tools)
      .extraJson({ tool_choice: lastTurn ? "none" : "required" })
      .maxTokens(this.outputTokens)
      .ignoreEos();
    return Step.send(request, wait);
  }
}

export const workload = exportScenario(AgenticCoding);
