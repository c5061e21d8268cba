//! The SDK twin of `scenarios/agent_fanout.rhai`: a planner session writes a plan, fans
//! out to 4-8 sub-agents (child sessions `PLANNER/worker-N`), and once every one has
//! ended writes a synthesis from their last answers. A sub-agent works in 1-3 turns,
//! calling a search tool between them, whose result comes after a drawn latency.
//!
//! The host calls, and the JSON of every message, tool and extra field, are the Rhai
//! script's, in its order, so the same seed and parameters send the same request stream
//! (the tests compare the two runs' digests).

use std::collections::HashMap;

use bench_scenario_sdk::prelude::*;

/// What the scenario keeps per session id: a planner's history and plan, a sub-agent's
/// turns and history, and, once a sub-agent has ended, the answer its planner joins.
enum Open {
    Planner { chat: Chat, plan: String },
    Worker { turns: u64, chat: Chat },
    Answer(String),
}

struct AgentFanout {
    tools: Vec<Tool>,
    open: HashMap<String, Open>,
}

impl Scenario for AgentFanout {
    fn describe() -> Description {
        Description::new(
            "agent_fanout",
            "A planner fans out to 4-8 sub-agents (1-3 tool-calling turns each) and joins their answers into a synthesis.",
        )
        .param("planners", 4, "planner sessions in the phase")
        .param("rate", 1.0, "planners started per second (Poisson)")
        .param("task_tokens", 500, "tokens of a planner's task")
        .param("plan_tokens", 128, "tokens of the plan")
        .param("workers_min", 4, "fewest sub-agents per planner")
        .param("workers_max", 8, "most sub-agents per planner")
        .param("worker_turns_min", 1, "fewest turns per sub-agent")
        .param("worker_turns_max", 3, "most turns per sub-agent")
        .param("worker_tokens", 128, "tokens a sub-agent generates per turn")
        .param("tool_latency_min", 0.2, "shortest search, seconds (uniform)")
        .param("tool_latency_max", 5.0, "longest search, seconds")
        .param("result_tokens", 300, "tokens of a search result")
        .param("synthesis_tokens", 256, "tokens of the synthesis")
        .param("seed", 42, "random seed")
    }

    const SESSIONS: bool = true;

    fn new() -> Result<Self, String> {
        Ok(AgentFanout {
            tools: vec![],
            open: HashMap::new(),
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        self.tools = vec![sessions::tool(
            "search",
            "Search the documentation",
            &[("query", "string")],
        )];
        Ok(vec![Phase::new("planners")
            .poisson(param_f64("rate")?)
            .sessions(param_u64("planners")?)])
    }

    fn session_step(&mut self, s: SessionState) -> Result<Step, String> {
        match s.parent().map(str::to_string) {
            None => self.planner(&s),
            Some(parent) => self.worker(&s, &parent),
        }
    }
}

impl AgentFanout {
    /// The planner: plan, fan out, then synthesise once every sub-agent has ended.
    fn planner(&mut self, s: &SessionState) -> Result<Step, String> {
        if s.step == 0 {
            let mut chat = Chat::new();
            chat.user(format!(
                "Plan this task: {}",
                synthetic_text(param_u32("task_tokens")?)
            ));
            let request = chat
                .request()
                .max_tokens(param_u64("plan_tokens")?)
                .ignore_eos();
            self.open.insert(
                s.id.clone(),
                Open::Planner {
                    chat,
                    plan: String::new(),
                },
            );
            return Ok(request.into());
        }
        let Some(Open::Planner { chat, plan }) = self.open.get_mut(&s.id) else {
            return Err(format!("planner {} is not open", s.id));
        };
        let last = s.last.as_ref();
        if s.step == 1 {
            let Some(last) = last.filter(|o| o.ok) else {
                self.open.remove(&s.id);
                return Ok(Step::End);
            };
            *plan = last.text.clone();
            chat.answer(last);
            let n = rand_int(param_i64("workers_min")?, param_i64("workers_max")?)?;
            let n = usize::try_from(n).map_err(|_| "workers_min must be >= 0")?;
            return Ok(Step::fan_out(sessions::children("worker", n)));
        }
        if s.step == 2 {
            let mut results = String::from("Combine the results:");
            let mut chat = chat.clone();
            for child in &s.joined {
                results.push('\n');
                if let Some(Open::Answer(text)) = self.open.remove(child) {
                    results.push_str(&text);
                }
            }
            chat.user(results);
            let request = chat
                .request()
                .max_tokens(param_u64("synthesis_tokens")?)
                .ignore_eos();
            return Ok(request.into());
        }
        self.open.remove(&s.id);
        Ok(Step::End)
    }

    /// A sub-agent: its part of its planner's plan, with a search between turns.
    fn worker(&mut self, s: &SessionState, parent: &str) -> Result<Step, String> {
        let mut wait = 0.0;
        if s.step == 0 {
            let turns = rand_int(
                param_i64("worker_turns_min")?,
                param_i64("worker_turns_max")?,
            )?;
            let turns = u64::try_from(turns).map_err(|_| "worker_turns_min must be >= 0")?;
            let plan = match self.open.get(parent) {
                Some(Open::Planner { plan, .. }) => plan.clone(),
                _ => return Err(format!("the planner of {} is not open", s.id)),
            };
            let mut chat = Chat::new();
            // The Rhai original's backtick template reads `\n` as a backslash and an `n`.
            chat.user(format!(r"Plan: {plan}\nYour part: {}", s.id));
            self.open.insert(s.id.clone(), Open::Worker { turns, chat });
        } else {
            let Some(Open::Worker { turns, chat }) = self.open.get_mut(&s.id) else {
                return Err(format!("sub-agent {} is not open", s.id));
            };
            let Some(last) = s.last.as_ref() else {
                return Err(format!(
                    "sub-agent {}: a later step without an outcome",
                    s.id
                ));
            };
            if !last.ok || u64::from(s.step) >= *turns {
                // What the planner joins: the sub-agent's last answer.
                let answer = if last.ok {
                    last.text.clone()
                } else {
                    String::new()
                };
                self.open.insert(s.id.clone(), Open::Answer(answer));
                return Ok(Step::End);
            }
            chat.answer(last);
            // A model that answered in text instead gets a nudge, as a user would give.
            if last.tool_calls.is_empty() {
                chat.user("Go on.");
            }
            for tc in &last.tool_calls {
                chat.tool_result(tc.id.clone(), synthetic_text(param_u32("result_tokens")?));
            }
            wait = ThinkTime::Uniform {
                lo: param_f64("tool_latency_min")?,
                hi: param_f64("tool_latency_max")?,
            }
            .draw()?;
        }
        let Some(Open::Worker { turns, chat }) = self.open.get(&s.id) else {
            return Err(format!("sub-agent {} is not open", s.id));
        };
        let last_turn = u64::from(s.step) + 1 >= *turns;
        let choice = if last_turn { "none" } else { "required" };
        let request = chat
            .request()
            .tools(self.tools.clone())
            .extra_json(format!(r#"{{"tool_choice":"{choice}"}}"#))
            .max_tokens(param_u64("worker_tokens")?)
            .ignore_eos();
        Ok(Step::send(request, wait))
    }
}

export_scenario!(AgentFanout);
