//! `/v1/messages` (Anthropic Messages): messages with the system prompt moved to the
//! top-level `system` field, `max_tokens` (required there); the events `message_start`
//! (`usage.input_tokens`), `content_block_start` (a `tool_use` block's id and name),
//! `content_block_delta` (`text_delta`, `thinking_delta`, `input_json_delta`: a tool
//! call's arguments), `message_delta` (`usage.output_tokens`), `message_stop` and `error`
//! decoded into content chunks. The key goes in `x-api-key` with an `anthropic-version`
//! (see `client::openai`).

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::messages_of;
use crate::measuring::client::exchange::{error_object_text, head, Exchange, Generated};
use crate::measuring::client::tool_calls::ToolDelta;
use crate::measuring::metrics::record::ErrorKind;
use crate::workloads::scenario::RequestSpec;

/// The `anthropic-version` header every request carries (the one Anthropic documents
/// and servers that mimic it accept).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

pub(super) fn fill(body: &mut Map<String, Value>, spec: &RequestSpec) -> Result<(), String> {
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for m in messages_of(&spec.prompt)? {
        if m.get("role").and_then(Value::as_str) == Some("system") {
            system.push(m.get("content").cloned().unwrap_or(Value::Null));
        } else {
            messages.push(m);
        }
    }
    let system: Vec<&str> = system.iter().filter_map(Value::as_str).collect();
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n")));
    }
    let messages = super::tools::to_anthropic(messages);
    body.insert("messages".into(), Value::Array(messages));
    body.insert("max_tokens".into(), json!(spec.max_tokens));
    body.insert("stream".into(), json!(spec.stream));
    Ok(())
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// The content block an event is about: a tool call is known by it.
    #[serde(default)]
    index: Option<u64>,
    /// `content_block_start`'s block.
    #[serde(default, borrow)]
    content_block: Option<Block<'a>>,
    /// `message_start`'s message.
    #[serde(default)]
    message: Option<Message>,
    /// `message_delta`'s usage.
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    /// `input_json_delta`'s piece of a tool call's arguments.
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    /// Anthropic's `input_tokens` leaves out the prompt tokens read from or written to its
    /// cache (llama.cpp follows it): the prompt is all three.
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl Usage {
    /// The whole prompt's tokens, cached ones included.
    fn prompt_tokens(&self) -> Option<u64> {
        let cached = [
            self.cache_read_input_tokens,
            self.cache_creation_input_tokens,
        ];
        let cached: u64 = cached.into_iter().flatten().fold(0, u64::saturating_add);
        self.input_tokens.map(|n| n.saturating_add(cached))
    }
}

/// One SSE event of a streamed message.
pub(crate) fn event(ex: &mut Exchange, data: &[u8], at: Instant) {
    let event: Event = match serde_json::from_slice(data) {
        Ok(e) => e,
        Err(e) => return not_messages(ex, e, data),
    };
    match event.kind.as_ref() {
        "message_start" => {
            if let Some(u) = event.message.and_then(|m| m.usage) {
                // Its output_tokens is the count so far (1 or 0), not the answer's.
                ex.usage(u.prompt_tokens(), None, None);
                ex.cached(u.cache_read_input_tokens);
            }
        }
        // A tool_use block opens with its id and name; its arguments come as deltas, and
        // the first of them is the call's first chunk (as chat's first delta is).
        "content_block_start" => match &event.content_block {
            Some(block) if block.kind == "tool_use" => ex.tool_delta(ToolDelta {
                index: event.index.unwrap_or(0),
                id: block.id.as_deref(),
                name: block.name.as_deref(),
                arguments: "",
            }),
            _ => {}
        },
        "content_block_delta" => {
            if let Some(delta) = &event.delta {
                if delta.kind.as_deref() == Some("input_json_delta") {
                    ex.tool_delta(ToolDelta {
                        index: event.index.unwrap_or(0),
                        arguments: delta.partial_json.as_deref().unwrap_or(""),
                        ..ToolDelta::default()
                    });
                }
                ex.generated(at, generated(delta), None);
            }
        }
        "message_delta" => {
            if let Some(u) = event.usage {
                ex.usage(u.prompt_tokens(), u.output_tokens, None);
                ex.cached(u.cache_read_input_tokens);
            }
        }
        "error" => {
            let err = event
                .error
                .unwrap_or_else(|| json!({ "message": head(data) }));
            ex.fail(ErrorKind::ErrorObject, error_object_text(&err));
        }
        // ping, content_block_stop, message_stop carry no tokens.
        _ => {}
    }
}

fn generated<'a>(delta: &'a Delta<'a>) -> Generated<'a> {
    match delta.kind.as_deref() {
        Some("thinking_delta") => Generated {
            reasoning: delta.thinking.as_deref().unwrap_or(""),
            ..Generated::default()
        },
        Some("input_json_delta") => Generated {
            tool_call: true,
            ..Generated::default()
        },
        // `text_delta`; signature deltas carry no text and so no chunk.
        _ => Generated {
            answer: delta.text.as_deref().unwrap_or(""),
            ..Generated::default()
        },
    }
}

#[derive(Deserialize)]
struct Whole<'a> {
    #[serde(default, borrow)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    /// A `tool_use` block's id, name and input.
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    input: Option<Value>,
}

/// A whole non-streamed message: its thinking and text blocks as one chunk.
pub(crate) fn whole(ex: &mut Exchange, data: &[u8], at: Instant) {
    let message: Whole = match serde_json::from_slice(data) {
        Ok(m) => m,
        Err(e) => return not_messages(ex, e, data),
    };
    // Anthropic's error body is `{"type":"error","error":{…}}`, OpenAI's has no type.
    if let Some(err) = message.error.filter(|e| !e.is_null()) {
        return ex.fail(ErrorKind::ErrorObject, error_object_text(&err));
    }
    let (mut reasoning, mut answer, mut tool_call) = (String::new(), String::new(), false);
    for (index, block) in message.content.iter().enumerate() {
        match block.kind.as_ref() {
            "thinking" => reasoning.push_str(block.thinking.as_deref().unwrap_or("")),
            "text" => answer.push_str(block.text.as_deref().unwrap_or("")),
            "tool_use" => {
                tool_call = true;
                let input = block.input.as_ref().map(Value::to_string);
                ex.tool_delta(ToolDelta {
                    index: index as u64,
                    id: block.id.as_deref(),
                    name: block.name.as_deref(),
                    arguments: input.as_deref().unwrap_or("{}"),
                });
            }
            _ => {}
        }
    }
    if let Some(u) = message.usage {
        ex.usage(u.prompt_tokens(), u.output_tokens, None);
        ex.cached(u.cache_read_input_tokens);
    }
    if ex.error.is_some() {
        return;
    }
    let generated = Generated {
        reasoning: &reasoning,
        answer: &answer,
        tool_call,
    };
    ex.generated(at, generated, None);
}

fn not_messages(ex: &mut Exchange, e: serde_json::Error, data: &[u8]) {
    ex.fail(
        ErrorKind::MalformedJson,
        format!("not an Anthropic Messages event ({e}): {}", head(data)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::stream::decode_whole;
    use crate::measuring::client::Api;
    use crate::workloads::scenario::Prompt;

    fn decode(sse: bool, body: &[u8]) -> Exchange {
        decode_whole(Api::Messages, sse, body)
    }

    #[test]
    fn thinking_then_text_with_usage_from_start_and_delta() {
        let ex = decode(
            true,
            b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,\"cache_read_input_tokens\":8,\"output_tokens\":1}}}\n\n\
              event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n\
              data: {\"type\":\"ping\"}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\" ok\"}}\n\n\
              data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":2}}\n\n\
              data: {\"type\":\"message_stop\"}\n\n",
        );
        assert_eq!(ex.error, None);
        assert_eq!(ex.chunks.len(), 2);
        assert!(!ex.chunks[0].answer && ex.chunks[1].answer);
        assert_eq!(ex.answer_text(), " ok");
        assert_eq!((ex.prompt_tokens, ex.completion_tokens), (Some(9), Some(2)));
    }

    #[test]
    fn error_events_and_bodies_are_error_objects() {
        let ex = decode(
            true,
            b"data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        );
        let e = ex.error.expect("failed");
        assert_eq!(e.kind, ErrorKind::ErrorObject);
        assert!(e.message.contains("Overloaded"), "{}", e.message);
        let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#;
        let e = decode(false, body).error.expect("failed");
        assert_eq!(e.kind, ErrorKind::ErrorObject);
        let whole = decode(
            false,
            br#"{"type":"message","content":[{"type":"thinking","thinking":"a"},{"type":"text","text":"b"}],"usage":{"input_tokens":1,"output_tokens":2}}"#,
        );
        assert_eq!(
            (whole.text.as_str(), whole.answer_text().as_str()),
            ("ab", "b")
        );
    }

    #[test]
    fn a_tool_use_block_gives_its_id_name_and_split_input() {
        let ex = decode(
            true,
            b"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":16,\"output_tokens\":1}}}\n\n\
              data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n\
              data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
              data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n\
              data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n\
              data: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
              data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
              data: {\"type\":\"message_stop\"}\n\n",
        );
        assert_eq!(ex.error, None);
        let calls: Vec<_> = ex.tool_calls.calls().cloned().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("toolu_1", "get_weather")
        );
        assert_eq!(calls[0].arguments, r#"{"city": "Paris"}"#);
        // The text, then one chunk per input delta; the block's start is none.
        assert_eq!(ex.chunks.len(), 4);
        assert!(!ex.chunks[0].tool_call && ex.chunks[1..].iter().all(|c| c.tool_call));
        assert_eq!(
            &ex.tool_calls.text()[ex.chunks[1].tool_text.clone()],
            "get_weather"
        );
        assert_eq!(ex.answer_text(), "Let me look.");
        assert_eq!(
            (ex.prompt_tokens, ex.cached_prompt_tokens),
            (Some(19), Some(16))
        );
    }

    #[test]
    fn a_whole_message_keeps_its_tool_use() {
        let ex = decode(
            false,
            br#"{"type":"message","content":[{"type":"text","text":"ok"},
                {"type":"tool_use","id":"toolu_2","name":"f","input":{"a":[1,2]}}],
                "stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":5}}"#,
        );
        assert_eq!(ex.error, None);
        let call = ex.tool_calls.calls().next().expect("a call").clone();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_2", "f"));
        assert_eq!(call.arguments, r#"{"a":[1,2]}"#);
        assert_eq!((ex.chunks.len(), ex.chunks[0].tool_call), (1, true));
    }

    #[test]
    fn the_system_prompt_moves_to_its_field() {
        let spec = super::super::test_spec(Prompt::Messages(vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "hi"}),
        ]));
        let mut body = Map::new();
        fill(&mut body, &spec).expect("body");
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
    }
}
