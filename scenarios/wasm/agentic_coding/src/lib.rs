//! The SDK twin of `scenarios/agentic_coding.rhai`: SWE-style agent sessions. Every
//! session sends the same system prompt and repository context (drawn once in `phases`),
//! then its own task; each turn but the last demands a tool call, each call is answered
//! with a result of a drawn length after a drawn tool latency, and a text answer gets a
//! user turn after an exponential think time. A session ends after its drawn number of
//! turns or at its first failed request.
//!
//! The host calls, and the JSON of every message, tool and extra field, are the Rhai
//! script's, in its order, so the same seed and parameters send the same request stream
//! (the tests compare the two runs' digests).

use std::collections::HashMap;

use bench_scenario_sdk::prelude::*;

/// What the Rhai original writes between the repository and the task: its template
/// string is a backtick literal, where Rhai reads `\n` as a backslash and an `n`, so the
/// twin sends those four characters too.
const RHAI_NEWLINES: &str = r"\n\n";

/// One open session: its drawn number of turns and its history.
struct Session {
    turns: u64,
    chat: Chat,
}

struct AgenticCoding {
    system: String,
    repo: String,
    tools: Vec<Tool>,
    open: HashMap<String, Session>,
    task_tokens: u32,
    output_tokens: u64,
}

impl Scenario for AgenticCoding {
    fn describe() -> Description {
        Description::new(
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
        .param("think_time", 2.0, "mean seconds before a user turn after a text answer (exponential)")
        .param("seed", 42, "random seed")
    }

    const SESSIONS: bool = true;

    fn new() -> Result<Self, String> {
        Ok(AgenticCoding {
            system: String::new(),
            repo: String::new(),
            tools: vec![],
            open: HashMap::new(),
            task_tokens: param_u32("task_tokens")?,
            output_tokens: param_u64("output_tokens")?,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        // Drawn once from the run's stream: the same text in every session and every shard.
        self.system = synthetic_text(param_u32("system_tokens")?);
        self.repo = synthetic_text(param_u32("repo_tokens")?);
        self.tools = vec![
            sessions::tool(
                "read_file",
                "Read a file of the repository",
                &[("path", "string")],
            ),
            sessions::tool(
                "run_tests",
                "Run the test suite, or the tests matching a filter",
                &[("filter", "string")],
            ),
            sessions::tool(
                "edit_file",
                "Replace a span of a file",
                &[
                    ("path", "string"),
                    ("before", "string"),
                    ("after", "string"),
                ],
            ),
        ];
        Ok(vec![Phase::new("agents")
            .poisson(param_f64("rate")?)
            .sessions(param_u64("sessions")?)])
    }

    fn session_step(&mut self, s: SessionState) -> Result<Step, String> {
        let mut wait = 0.0;
        if s.step == 0 {
            let turns = rand_int(param_i64("turns_min")?, param_i64("turns_max")?)?;
            let task = synthetic_text(self.task_tokens);
            let mut chat = Chat::new();
            chat.system(self.system.clone())
                .user(format!("{}{RHAI_NEWLINES}Task: {task}", self.repo));
            let turns = u64::try_from(turns).map_err(|_| "turns_min must be >= 0")?;
            self.open.insert(s.id.clone(), Session { turns, chat });
        } else {
            let Some(last) = s.last.as_ref() else {
                return Err(format!("session {}: a later step without an outcome", s.id));
            };
            let c = self
                .open
                .get_mut(&s.id)
                .ok_or("a step of a closed session")?;
            if !last.ok || u64::from(s.step) >= c.turns {
                self.open.remove(&s.id);
                return Ok(Step::End);
            }
            c.chat.answer(last);
            if last.tool_calls.is_empty() {
                c.chat.user(synthetic_text(self.task_tokens));
                wait = ThinkTime::Exponential {
                    mean: param_f64("think_time")?,
                }
                .draw()?;
            } else {
                for tc in &last.tool_calls {
                    let n = rand_int(
                        param_i64("result_tokens_min")?,
                        param_i64("result_tokens_max")?,
                    )?;
                    let n = u32::try_from(n).map_err(|_| "result_tokens out of range")?;
                    c.chat.tool_result(tc.id.clone(), synthetic_text(n));
                }
                wait = ThinkTime::Uniform {
                    lo: param_f64("tool_latency_min")?,
                    hi: param_f64("tool_latency_max")?,
                }
                .draw()?;
            }
        }
        let c = &self.open[&s.id];
        let last_turn = u64::from(s.step) + 1 >= c.turns;
        let choice = if last_turn { "none" } else { "required" };
        let request = c
            .chat
            .request()
            .tools(self.tools.clone())
            .extra_json(format!(r#"{{"tool_choice":"{choice}"}}"#))
            .max_tokens(self.output_tokens)
            .ignore_eos();
        Ok(Step::send(request, wait))
    }
}

export_scenario!(AgenticCoding);
