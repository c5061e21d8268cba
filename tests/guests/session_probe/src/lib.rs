//! Sessions through the Wasm boundary. With `-p attack=none`, each root session opens two
//! children (`ID/a`, `ID/b`) that send one chat request each, with a tool, and end; once
//! both have ended the root sees them in `joined` and notes how many joins it saw and how
//! many tool calls its children's outcomes carried. Any other `attack` makes a root's
//! first step one the host's rules refuse: a wait that is not seconds, fan-out names
//! that are empty, repeated, hold a `/` or number 65, a request timed by `at`, or a tool
//! schema that is not a JSON object. tests/e2e/sessions_languages.rs checks each ends the
//! run with one line naming the rule.

use bench_scenario_sdk::prelude::*;

#[derive(Default)]
struct Probe {
    attack: String,
    joins: i64,
    joined_children: i64,
    tool_calls: i64,
}

fn chat() -> Request {
    Request::chat(vec![Message::user(synthetic_text(8))])
        .max_tokens(4)
        .ignore_eos()
}

impl Probe {
    /// A root's first step under `attack`.
    fn attack_step(&self) -> Result<Step, String> {
        Ok(match self.attack.as_str() {
            "none" => Step::fan_out(["a", "b"]),
            "nan_after" => Step::send(chat(), f64::NAN),
            "negative_after" => Step::send(chat(), -1.0),
            "slash" => Step::fan_out(["a/b"]),
            "empty_name" => Step::fan_out([""]),
            "twice" => Step::fan_out(["a", "a"]),
            "too_many" => Step::fan_out(sessions::children("c", 65)),
            "no_children" => Step::FanOut(vec![]),
            "at" => Step::send(chat().at(1.0), 0.0),
            "tool_json" => Step::send(chat().tool(Tool::new("t", "", "[1]")), 0.0),
            other => return Err(format!("unknown attack `{other}`")),
        })
    }
}

impl Scenario for Probe {
    const SESSIONS: bool = true;

    fn describe() -> Description {
        Description::new(
            "session_probe",
            "Fans out and joins through the Wasm boundary, or returns a refused step.",
        )
        .param(
            "attack",
            "none",
            "which refused step to return (none: a good run)",
        )
        .param("sessions", 2, "root sessions")
    }

    fn new() -> Result<Self, String> {
        Ok(Probe {
            attack: param_str("attack")?,
            ..Probe::default()
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        Ok(vec![Phase::new("probe").sessions(param_u64("sessions")?)])
    }

    fn session_step(&mut self, state: SessionState) -> Result<Step, String> {
        if state.is_child() {
            return Ok(match state.step {
                0 => {
                    let tool = sessions::tool("lookup", "Look a word up", &[("word", "string")]);
                    chat()
                        .tool(tool)
                        .extra_json(r#"{"tool_choice":"required"}"#)
                        .into()
                }
                _ => {
                    let calls = state.last.map_or(0, |o| o.tool_calls.len());
                    self.tool_calls += i64::try_from(calls).unwrap_or(i64::MAX);
                    note("tool_calls", self.tool_calls)?;
                    Step::End
                }
            });
        }
        match state.step {
            0 => self.attack_step(),
            _ => {
                self.joins += 1;
                let mine = format!("{}/", state.id);
                let own = state.joined.iter().filter(|c| c.starts_with(&mine)).count();
                self.joined_children += i64::try_from(own).unwrap_or(i64::MAX);
                note("joins", self.joins)?;
                note("joined_children", self.joined_children)?;
                Ok(Step::End)
            }
        }
    }
}

export_scenario!(Probe);
