//! The tool calls of one response, put together from their deltas as they arrive: each
//! API names a call by an index (chat's `delta.tool_calls[i].index`, Anthropic's content
//! block index, Responses' `output_index`), sends its id and name once and its arguments
//! in pieces. What a server may make the client hold is bounded, as its text is.

use crate::workloads::scenario::ToolCall;

/// The most tool calls kept for one response: far beyond the parallel calls of any model.
pub const MAX_TOOL_CALLS: usize = 1024;

/// The most bytes of ids, names and arguments kept for one response's tool calls (held
/// twice: in the calls, and in the arrival-order text each chunk's tokens are counted in).
pub const MAX_TOOL_CALL_BYTES: usize = 8 << 20;

/// A server sent more tool calls, or more of their text, than a record holds.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the response passed {MAX_TOOL_CALLS} tool calls or {} MiB of tool-call text, the most a record holds", MAX_TOOL_CALL_BYTES >> 20)]
pub struct TooManyToolCalls;

/// One piece of a tool call, as a decoder read it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolDelta<'a> {
    /// The server's index of the call within the response.
    pub index: u64,
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    /// More of the arguments' text (appended).
    pub arguments: &'a str,
}

/// A response's tool calls so far, in the order they were opened.
#[derive(Debug, Default)]
pub struct ToolCalls {
    calls: Vec<(u64, ToolCall)>,
    /// Names and argument pieces in arrival order: the tool-call text of each content
    /// chunk is a range of it.
    text: String,
    bytes: usize,
}

impl ToolCalls {
    /// Opens call `d.index` or adds to it: its id and name when it has none yet (servers
    /// send them once; a repeat is not appended), then more arguments.
    pub fn add(&mut self, d: ToolDelta<'_>) -> Result<(), TooManyToolCalls> {
        let added = [d.id, d.name]
            .into_iter()
            .flatten()
            .map(str::len)
            .sum::<usize>();
        self.bytes = self
            .bytes
            .saturating_add(added)
            .saturating_add(d.arguments.len());
        if self.bytes > MAX_TOOL_CALL_BYTES {
            return Err(TooManyToolCalls);
        }
        let at = match self.calls.iter().position(|(i, _)| *i == d.index) {
            Some(at) => at,
            None if self.calls.len() >= MAX_TOOL_CALLS => return Err(TooManyToolCalls),
            None => {
                self.calls.push((d.index, ToolCall::default()));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at].1;
        if let Some(id) = d.id.filter(|_| call.id.is_empty()) {
            call.id.push_str(id);
        }
        if let Some(name) = d.name.filter(|_| call.name.is_empty()) {
            call.name.push_str(name);
            self.text.push_str(name);
        }
        call.arguments.push_str(d.arguments);
        self.text.push_str(d.arguments);
        Ok(())
    }

    /// Call `index`'s whole arguments (Responses' `function_call_arguments.done`): they
    /// replace the pieces, which a server that sends only the whole text never sent.
    pub fn set_arguments(&mut self, index: u64, arguments: &str) -> Result<(), TooManyToolCalls> {
        let Some(at) = self.calls.iter().position(|(i, _)| *i == index) else {
            return self.add(ToolDelta {
                index,
                arguments,
                ..ToolDelta::default()
            });
        };
        let call = &mut self.calls[at].1;
        if call.arguments == arguments {
            return Ok(());
        }
        let Some(rest) = arguments.strip_prefix(call.arguments.as_str()) else {
            // Text that does not continue the pieces: the whole replaces them, and the
            // pieces' text stays counted where it arrived.
            self.bytes = self.bytes.saturating_add(arguments.len());
            if self.bytes > MAX_TOOL_CALL_BYTES {
                return Err(TooManyToolCalls);
            }
            call.arguments = arguments.to_string();
            return Ok(());
        };
        let rest = rest.to_string();
        self.add(ToolDelta {
            index,
            arguments: &rest,
            ..ToolDelta::default()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// The calls, in the order they were opened.
    pub fn calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls.iter().map(|(_, c)| c)
    }

    /// The names and arguments in arrival order.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta<'a>(index: u64, name: Option<&'a str>, arguments: &'a str) -> ToolDelta<'a> {
        ToolDelta {
            index,
            id: name.map(|_| "call_1"),
            name,
            arguments,
        }
    }

    #[test]
    fn pieces_join_by_index_and_ids_and_names_come_once() {
        let mut t = ToolCalls::default();
        t.add(delta(0, Some("get"), "")).unwrap();
        t.add(delta(3, Some("put"), "{")).unwrap();
        t.add(delta(0, None, "{\"a\":")).unwrap();
        t.add(delta(0, Some("get"), "1}")).unwrap();
        t.add(delta(3, None, "}")).unwrap();
        let calls: Vec<_> = t.calls().cloned().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("get", "{\"a\":1}")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("call_1", "{}")
        );
        assert_eq!(t.text(), "getput{{\"a\":1}}");
    }

    #[test]
    fn whole_arguments_complete_or_replace_the_pieces() {
        let mut t = ToolCalls::default();
        t.add(delta(1, Some("f"), "{\"x\"")).unwrap();
        t.set_arguments(1, "{\"x\":2}").unwrap();
        t.set_arguments(1, "{\"x\":2}").unwrap();
        assert_eq!(
            t.calls().next().map(|c| c.arguments.as_str()),
            Some("{\"x\":2}")
        );
        t.set_arguments(1, "{}").unwrap();
        t.set_arguments(7, "{\"y\":1}").unwrap();
        let args: Vec<&str> = t.calls().map(|c| c.arguments.as_str()).collect();
        assert_eq!(args, ["{}", "{\"y\":1}"]);
    }

    #[test]
    fn a_hostile_server_cannot_grow_the_calls_without_bound() {
        let mut t = ToolCalls::default();
        let piece = "x".repeat(1 << 20);
        let mut sent = 0;
        while t.add(delta(0, None, &piece)).is_ok() {
            sent += 1;
            assert!(sent <= 8, "kept {sent} MiB");
        }
        assert!(t.text().len() <= MAX_TOOL_CALL_BYTES);
        let mut t = ToolCalls::default();
        for i in 0..MAX_TOOL_CALLS as u64 {
            t.add(delta(i, Some("f"), "")).unwrap();
        }
        assert_eq!(t.add(delta(u64::MAX, Some("f"), "")), Err(TooManyToolCalls));
        assert_eq!(t.len(), MAX_TOOL_CALLS);
    }
}
