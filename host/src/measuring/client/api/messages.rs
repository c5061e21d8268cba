//! `/v1/messages` (Anthropic Messages): messages with the system prompt moved to the
//! top-level `system` field, `max_tokens` (required there); the events `message_start`
//! (`usage.input_tokens`), `content_block_delta` (`text_delta`, `thinking_delta`,
//! `input_json_delta`), `message_delta` (`usage.output_tokens`), `message_stop` and `error`
//! decoded into content chunks. The key goes in `x-api-key` with an `anthropic-version`
//! (see `client::openai`).

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::messages_of;
use crate::measuring::client::exchange::{error_object_text, head, Exchange, Generated};
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
            }
        }
        "content_block_delta" => {
            if let Some(delta) = &event.delta {
                ex.generated(at, generated(delta), None);
            }
        }
        "message_delta" => {
            if let Some(u) = event.usage {
                ex.usage(u.prompt_tokens(), u.output_tokens, None);
            }
        }
        "error" => {
            let err = event
                .error
                .unwrap_or_else(|| json!({ "message": head(data) }));
            ex.fail(ErrorKind::ErrorObject, error_object_text(&err));
        }
        // ping, content_block_start/stop, message_stop carry no tokens.
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
    for block in &message.content {
        match block.kind.as_ref() {
            "thinking" => reasoning.push_str(block.thinking.as_deref().unwrap_or("")),
            "text" => answer.push_str(block.text.as_deref().unwrap_or("")),
            "tool_use" => tool_call = true,
            _ => {}
        }
    }
    if let Some(u) = message.usage {
        ex.usage(u.prompt_tokens(), u.output_tokens, None);
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
