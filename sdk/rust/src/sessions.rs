//! Helpers for scenarios of sessions (`Scenario::session_step`): a chat history with tool
//! turns ([`Chat`]), tool schemas ([`ToolSchema`]), think times and tool latencies drawn
//! from named distributions ([`ThinkTime`]), fan-out and join ([`children`], and the
//! [`SessionState`] methods), and a context that grows by blocks of synthetic tokens
//! ([`Prefix`]).
//!
//! Every draw goes through the host's random functions, so the same seed gives the same
//! sessions, and the same calls in a Rhai, Python or JavaScript twin give the same
//! request stream.
//!
//! ```
//! use bench_scenario_sdk::prelude::*;
//!
//! fn first_turn(context: &Prefix, question: &str) -> Request {
//!     let read = sessions::tool("read_file", "Read a file of the repository", &[("path", "string")]);
//!     let mut chat = Chat::new();
//!     chat.system(context.text()).user(question);
//!     chat.request().max_tokens(64).tool(read)
//! }
//! # let _ = first_turn;
//! ```

use crate::{Message, Outcome, Request, SessionState, Tool, ToolCall};

/// A conversation's messages, in order, with the turns an agent adds: the user's, the
/// assistant's answers and tool calls, and the tools' results.
#[derive(Clone, Debug, Default)]
pub struct Chat {
    messages: Vec<Message>,
}

impl Chat {
    pub fn new() -> Chat {
        Chat::default()
    }

    /// Appends a message of any role.
    pub fn push(&mut self, message: Message) -> &mut Chat {
        self.messages.push(message);
        self
    }

    pub fn system(&mut self, content: impl Into<String>) -> &mut Chat {
        self.push(Message::system(content))
    }

    pub fn user(&mut self, content: impl Into<String>) -> &mut Chat {
        self.push(Message::user(content))
    }

    pub fn assistant(&mut self, content: impl Into<String>) -> &mut Chat {
        self.push(Message::assistant(content))
    }

    /// An assistant turn that called these tools (empty content).
    pub fn assistant_tool_calls(&mut self, calls: Vec<ToolCall>) -> &mut Chat {
        self.push(Message::assistant_tool_calls(calls))
    }

    /// The result of the tool call `call_id`.
    pub fn tool_result(
        &mut self,
        call_id: impl Into<String>,
        content: impl Into<String>,
    ) -> &mut Chat {
        self.push(Message::tool_result(call_id, content))
    }

    /// The model's turn from a finished request: its text, and the tool calls it made
    /// (Rhai's `assistant_turn(outcome)`).
    pub fn answer(&mut self, outcome: &Outcome) -> &mut Chat {
        self.push(Message::assistant_turn(outcome))
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// A chat request of the whole history so far (set its `max_tokens`).
    pub fn request(&self) -> Request {
        Request::chat(self.messages.clone())
    }
}

/// A tool whose arguments are an object of these properties, each a JSON type
/// ("string", "integer", …), all required: Rhai's `tool(name, description, #{ path:
/// "string" })`, which lists them in name order, as this does.
pub fn tool(name: &str, description: &str, properties: &[(&str, &str)]) -> Tool {
    properties
        .iter()
        .fold(ToolSchema::new(name, description), |s, (p, t)| {
            s.param(p, t)
        })
        .build()
}

/// A tool's JSON Schema, built parameter by parameter: `{"type": "object",
/// "properties": {…}, "required": […]}`. `required` lists the names in name order, as
/// Rhai's `tool` does, so a twin sends the same bytes.
#[derive(Clone, Debug)]
pub struct ToolSchema {
    name: String,
    description: String,
    /// Each parameter's name and the JSON text of its schema.
    properties: Vec<(String, String)>,
    required: Vec<String>,
}

impl ToolSchema {
    pub fn new(name: &str, description: &str) -> ToolSchema {
        ToolSchema {
            name: name.to_string(),
            description: description.to_string(),
            properties: vec![],
            required: vec![],
        }
    }

    /// A required parameter of a JSON type ("string", "integer", "number", "boolean").
    pub fn param(self, name: &str, json_type: &str) -> ToolSchema {
        let schema = format!("{{\"type\":{}}}", json_string(json_type));
        self.schema(name, schema, true)
    }

    /// A required parameter of a JSON type, with a description for the model.
    pub fn described(self, name: &str, json_type: &str, description: &str) -> ToolSchema {
        let schema = format!(
            "{{\"type\":{},\"description\":{}}}",
            json_string(json_type),
            json_string(description)
        );
        self.schema(name, schema, true)
    }

    /// A parameter the model may leave out.
    pub fn optional(self, name: &str, json_type: &str) -> ToolSchema {
        let schema = format!("{{\"type\":{}}}", json_string(json_type));
        self.schema(name, schema, false)
    }

    /// A parameter whose schema is this JSON text (an object).
    pub fn schema(mut self, name: &str, schema_json: String, required: bool) -> ToolSchema {
        self.properties.push((name.to_string(), schema_json));
        if required {
            self.required.push(name.to_string());
        }
        self
    }

    /// A required string parameter.
    pub fn string(self, name: &str) -> ToolSchema {
        self.param(name, "string")
    }

    /// A required integer parameter.
    pub fn integer(self, name: &str) -> ToolSchema {
        self.param(name, "integer")
    }

    /// The schema's JSON text.
    pub fn parameters_json(&self) -> String {
        let properties: Vec<String> = self
            .properties
            .iter()
            .map(|(name, schema)| format!("{}:{schema}", json_string(name)))
            .collect();
        let mut required: Vec<&String> = self.required.iter().collect();
        required.sort();
        let required: Vec<String> = required.into_iter().map(|r| json_string(r)).collect();
        format!(
            "{{\"type\":\"object\",\"properties\":{{{}}},\"required\":[{}]}}",
            properties.join(","),
            required.join(",")
        )
    }

    /// The tool, to pass to `Request::tool`.
    pub fn build(&self) -> Tool {
        Tool::new(&self.name, &self.description, self.parameters_json())
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A distribution of seconds (think time, a tool's latency), drawn through the host's
/// random functions so the seed fixes every draw, as Rhai's `draw(#{ dist: … })` draws.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinkTime {
    /// Always this many seconds; draws nothing.
    Constant(f64),
    /// Uniform in [lo, hi): one `uniform(lo, hi)`.
    Uniform { lo: f64, hi: f64 },
    /// Exponential with this mean (> 0): one `exponential(1 / mean)`.
    Exponential { mean: f64 },
    /// Log-normal with this median (> 0): `exp` of one `normal(ln median, sigma)`.
    LogNormal { median: f64, sigma: f64 },
}

impl ThinkTime {
    /// A distribution by name, as a parameter would give it: `constant` (a = seconds),
    /// `uniform` (a = lo, b = hi), `exponential` (a = mean), `lognormal` (a = median, b =
    /// sigma of the underlying normal).
    pub fn named(name: &str, a: f64, b: f64) -> Result<ThinkTime, String> {
        let t = match name {
            "constant" => ThinkTime::Constant(a),
            "uniform" => ThinkTime::Uniform { lo: a, hi: b },
            "exponential" => ThinkTime::Exponential { mean: a },
            "lognormal" => ThinkTime::LogNormal {
                median: a,
                sigma: b,
            },
            other => {
                return Err(format!(
                    "unknown distribution `{other}`: constant, uniform, exponential or lognormal"
                ))
            }
        };
        Ok(t)
    }

    /// One draw, seconds.
    pub fn draw(&self) -> Result<f64, String> {
        match *self {
            ThinkTime::Constant(s) => Ok(s),
            ThinkTime::Uniform { lo, hi } => crate::uniform(lo, hi),
            ThinkTime::Exponential { mean } => {
                if mean > 0.0 && mean.is_finite() {
                    crate::exponential(1.0 / mean)
                } else {
                    Err(format!(
                        "exponential think time: the mean must be > 0, got {mean}"
                    ))
                }
            }
            ThinkTime::LogNormal { median, sigma } => {
                if median > 0.0 && median.is_finite() {
                    crate::normal(median.ln(), sigma).map(f64::exp)
                } else {
                    Err(format!(
                        "lognormal think time: the median must be > 0, got {median}"
                    ))
                }
            }
        }
    }

    /// One draw, clamped to [lo, hi] (a log-normal's long tail kept in a plausible range).
    pub fn draw_within(&self, lo: f64, hi: f64) -> Result<f64, String> {
        self.draw().map(|s| s.clamp(lo, hi))
    }
}

/// `n` child names for a fan-out: `prefix-1` … `prefix-n`.
pub fn children(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}-{i}")).collect()
}

impl SessionState {
    /// The session's first step.
    pub fn is_start(&self) -> bool {
        self.step == 0
    }

    /// A child of a fan-out (its id has a parent part).
    pub fn is_child(&self) -> bool {
        self.id.contains('/')
    }

    /// The name the fan-out gave this session (`"review-2"` of `"7/review-2"`), or the
    /// root session's number.
    pub fn name(&self) -> &str {
        self.id.rsplit('/').next().unwrap_or(&self.id)
    }

    /// The parent's id (`"7"` of `"7/review-2"`); `None` for a root session.
    pub fn parent(&self) -> Option<&str> {
        self.id.rsplit_once('/').map(|(parent, _)| parent)
    }

    /// The root session's id (`"7"` of `"7/a/b"`).
    pub fn root(&self) -> &str {
        self.id.split('/').next().unwrap_or(&self.id)
    }

    /// The children of a fan-out have all ended: this step is the join.
    pub fn joined_now(&self) -> bool {
        !self.joined.is_empty()
    }

    /// The last request's outcome, when the last step was a request that succeeded.
    pub fn last_ok(&self) -> Option<&Outcome> {
        self.last.as_ref().filter(|o| o.ok)
    }
}

/// A context shared across turns (or sessions) that grows by blocks of synthetic text: a
/// repository an agent reads file by file, a document appended to. Blocks are joined by
/// a newline.
#[derive(Clone, Debug, Default)]
pub struct Prefix {
    text: String,
    tokens: u64,
}

impl Prefix {
    pub fn new() -> Prefix {
        Prefix::default()
    }

    /// Appends a block of `n` synthetic tokens (one `synthetic_text(n)`) and returns it.
    pub fn grow(&mut self, n: u32) -> &str {
        let block = crate::synthetic_text(n);
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        let at = self.text.len();
        self.text.push_str(&block);
        self.tokens += u64::from(n);
        &self.text[at..]
    }

    /// The whole context so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Tokens appended so far (the blocks' lengths, not counting the newlines).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_schema_is_a_json_object_with_its_required_parameters() {
        let t = ToolSchema::new("grep", "Search \"code\"")
            .described("pattern", "string", "a regular expression")
            .optional("limit", "integer")
            .string("dir")
            .build();
        assert_eq!(t.name, "grep");
        assert_eq!(
            t.parameters_json,
            r#"{"type":"object","properties":{"pattern":{"type":"string","description":"a regular expression"},"limit":{"type":"integer"},"dir":{"type":"string"}},"required":["dir","pattern"]}"#
        );
        let t = tool(
            "edit_file",
            "Edit",
            &[("path", "string"), ("after", "string")],
        );
        assert!(t
            .parameters_json
            .ends_with(r#""required":["after","path"]}"#));
    }

    #[test]
    fn a_chat_keeps_tool_turns_in_order() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "grep".into(),
            arguments: "{}".into(),
        };
        let mut chat = Chat::new();
        chat.user("find it")
            .assistant_tool_calls(vec![call])
            .tool_result("call_1", "found");
        let roles: Vec<&str> = chat.messages().iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        assert_eq!(chat.messages()[1].tool_calls.len(), 1);
        assert_eq!(chat.messages()[2].tool_call_id.as_deref(), Some("call_1"));
        assert!(chat.messages()[0].tool_calls.is_empty());
    }

    #[test]
    fn session_ids_read_as_parent_and_name() {
        let s = SessionState {
            phase: 0,
            id: "7/review-2".into(),
            step: 0,
            last: None,
            joined: vec![],
        };
        assert!(s.is_start() && s.is_child() && !s.joined_now());
        assert_eq!(
            (s.name(), s.parent(), s.root()),
            ("review-2", Some("7"), "7")
        );
        assert_eq!(children("review", 2), ["review-1", "review-2"]);
        assert_eq!(
            ThinkTime::named("uniform", 1.0, 2.0),
            Ok(ThinkTime::Uniform { lo: 1.0, hi: 2.0 })
        );
        assert!(ThinkTime::named("pareto", 1.0, 2.0).is_err());
    }
}
