//! What the writers of Responses and Messages share: the request's [`Answer`] and the SSE
//! `event` framing. Kept below `wire` (which picks the writer per API) so that the writers
//! need nothing from it.

use super::tool::{self, ToolAnswer};
use super::words;

/// What a writer of any API needs to know of its request.
pub struct Answer {
    pub id: u64,
    pub model_json: String,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub reasoning_tokens: usize,
    /// Tokens generated so far.
    pub emitted: usize,
    /// The answer is this tool call, not text.
    pub tool_call: Option<ToolAnswer>,
}

impl Answer {
    /// The reasoning and answer text of tokens `first..self.emitted`.
    pub fn text_since(&self, first: usize) -> (String, String) {
        let split = self.reasoning_tokens.clamp(first, self.emitted);
        let (mut reasoning, mut answer) = (String::new(), String::new());
        words::push_tokens(&mut reasoning, self.id, first, split - first);
        words::push_tokens(&mut answer, self.id, split, self.emitted - split);
        (reasoning, answer)
    }

    /// The tool call's arguments of tokens `first..self.emitted` (none without a call).
    pub fn arguments_since(&self, first: usize) -> String {
        self.tool_call.as_ref().map_or_else(String::new, |call| {
            call.arguments(first, self.emitted - first, self.max_tokens)
        })
    }

    /// The tool call's id, name (a JSON string) and whole arguments so far (a JSON
    /// string), for the writers' closing events.
    pub fn call_fields(&self) -> Option<(&str, String, String)> {
        let call = self.tool_call.as_ref()?;
        let arguments = tool::json_string(&self.arguments_since(0));
        Some((&call.id, call.name_json(), arguments))
    }

    /// Of the tokens so far, those spent reasoning.
    pub fn reasoning_so_far(&self) -> usize {
        self.reasoning_tokens.min(self.emitted)
    }

    /// The length limit was reached (the model never stops early).
    pub fn finished(&self) -> bool {
        self.emitted >= self.max_tokens
    }
}

/// One SSE event with its `event:` line, as Responses and Messages send them.
pub fn event(kind: &str, json: &str) -> String {
    format!("event: {kind}\ndata: {json}\n\n")
}
