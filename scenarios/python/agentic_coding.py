"""Agentic coding, written in Python: the twin of scenarios/agentic_coding.rhai (SWE-style
agent sessions: a shared system prompt and repository context, 10-40 tool-calling turns,
each tool call answered with a result of a drawn length after a drawn tool latency, a
growing context). Same parameters, same host calls in the same order, the same JSON of
every message and tool, so the same seed sends the same request stream.

Build: sdk/python/build.sh scenarios/python/agentic_coding.py agentic_coding.wasm
"""

from bench_scenario import (
    END,
    Chat,
    Description,
    Phase,
    Scenario,
    Step,
    ThinkTime,
    export,
    param_f64,
    param_i64,
    param_u32,
    param_u64,
    rand_int,
    sessions,
    synthetic_text,
)


class AgenticCoding(Scenario):
    SESSIONS = True

    @staticmethod
    def describe():
        return (
            Description(
                "agentic_coding",
                "SWE-style agent sessions: a shared system prompt and repository context, 10-40 tool-calling turns with 0.5-30 s tool latency, a growing context.",
            )
            .param("sessions", 16, "agent sessions in the phase")
            .param("rate", 0.5, "sessions started per second (Poisson)")
            .param("system_tokens", 2000, "tokens of the system prompt every session shares")
            .param("repo_tokens", 8000, "tokens of repository context every session shares")
            .param("task_tokens", 200, "tokens of each session's task, and of a user turn")
            .param("turns_min", 10, "fewest model turns per session")
            .param("turns_max", 40, "most model turns per session")
            .param("output_tokens", 256, "tokens generated per turn (ignore_eos)")
            .param("tool_latency_min", 0.5, "shortest tool run, seconds (uniform)")
            .param("tool_latency_max", 30.0, "longest tool run, seconds")
            .param("result_tokens_min", 100, "shortest tool result, tokens (uniform)")
            .param("result_tokens_max", 2000, "longest tool result, tokens")
            .param(
                "think_time",
                2.0,
                "mean seconds before a user turn after a text answer (exponential)",
            )
            .param("seed", 42, "random seed")
        )

    def __init__(self):
        self.open = {}
        self.task_tokens = param_u32("task_tokens")
        self.output_tokens = param_u64("output_tokens")

    def phases(self):
        # Drawn once from the run's stream: the same text in every session and every shard.
        self.system = synthetic_text(param_u32("system_tokens"))
        self.repo = synthetic_text(param_u32("repo_tokens"))
        self.tools = [
            sessions.tool("read_file", "Read a file of the repository", {"path": "string"}),
            sessions.tool(
                "run_tests",
                "Run the test suite, or the tests matching a filter",
                {"filter": "string"},
            ),
            sessions.tool(
                "edit_file",
                "Replace a span of a file",
                {"path": "string", "before": "string", "after": "string"},
            ),
        ]
        return [
            Phase("agents").poisson(param_f64("rate")).sessions(param_u64("sessions"))
        ]

    def session_step(self, s):
        wait = 0.0
        if s.step == 0:
            turns = rand_int(param_i64("turns_min"), param_i64("turns_max"))
            task = synthetic_text(self.task_tokens)
            # The Rhai original's backtick template reads `\n` as a backslash and an `n`.
            chat = Chat().system(self.system).user(f"{self.repo}\\n\\nTask: {task}")
            self.open[s.id] = {"turns": turns, "chat": chat}
        else:
            c = self.open[s.id]
            if not s.last.ok or s.step >= c["turns"]:
                del self.open[s.id]
                return END
            c["chat"].answer(s.last)
            if not s.last.tool_calls:
                c["chat"].user(synthetic_text(self.task_tokens))
                wait = ThinkTime.named("exponential", param_f64("think_time")).draw()
            else:
                for tc in s.last.tool_calls:
                    n = rand_int(param_i64("result_tokens_min"), param_i64("result_tokens_max"))
                    c["chat"].tool_result(tc.id, synthetic_text(n))
                wait = ThinkTime.named(
                    "uniform", param_f64("tool_latency_min"), param_f64("tool_latency_max")
                ).draw()
        c = self.open[s.id]
        last_turn = s.step + 1 >= c["turns"]
        request = (
            c["chat"]
            .request()
            .tools(self.tools)
            .extra_json({"tool_choice": "none" if last_turn else "required"})
            .max_tokens(self.output_tokens)
            .ignore_eos()
        )
        return Step.send(request, wait)


Workload = export(AgenticCoding)
