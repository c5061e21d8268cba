//! Anthropic's Messages API (`/v1/messages`) as vLLM serves it: `messages`, a top-level
//! `system`, `max_tokens`; the stream `message_start` (with `usage.input_tokens`), a
//! `thinking` block then a `text` block of `content_block_delta`s (or, for an answer that
//! is a tool call, one `tool_use` block of `input_json_delta`s), `message_delta` (with
//! `usage.output_tokens`) and `message_stop`.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::answer::{event, Answer};
use super::openai::ApiError;

#[derive(Deserialize)]
struct Request {
    model: Option<String>,
    messages: Option<Value>,
    system: Option<Value>,
    max_tokens: Option<i64>,
    stream: Option<bool>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    sim_tool_call: Option<Value>,
}

/// The chat request a Messages request means: `system` as a leading system message;
/// tools, `tool_choice` and `sim_tool_call` as they are (`tool` reads every API's shape).
pub fn as_chat(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let r: Request = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    let Some(Value::Array(mut messages)) = r.messages else {
        return Err(ApiError::bad_request(
            "the field `messages` is required: an array of messages",
        ));
    };
    // Anthropic requires max_tokens.
    let max = r
        .max_tokens
        .ok_or_else(|| ApiError::bad_request("the field `max_tokens` is required"))?;
    match r.system {
        None | Some(Value::Null) => {}
        Some(system @ (Value::String(_) | Value::Array(_))) => {
            messages.insert(0, json!({"role": "system", "content": system}));
        }
        Some(_) => return Err(ApiError::bad_request("`system` must be a string or blocks")),
    }
    let mut chat = json!({
        "messages": messages,
        "max_completion_tokens": max,
        "stream": r.stream.unwrap_or(false),
        "stream_options": {"include_usage": true},
    });
    if let Some(model) = r.model {
        chat["model"] = model.into();
    }
    for (key, value) in [
        ("tools", r.tools),
        ("tool_choice", r.tool_choice),
        ("sim_tool_call", r.sim_tool_call),
    ] {
        if let Some(v) = value {
            chat[key] = v;
        }
    }
    Ok(chat.to_string().into_bytes())
}

/// `message_start`, then the first block's start (a tool call's opens with its first
/// token, as its name is generated).
pub fn start(a: &Answer) -> Bytes {
    let json = format!(
        r#"{{"type":"message_start","message":{{"id":"msg_{}","type":"message","role":"assistant","model":{},"content":[],"stop_reason":null,"usage":{{"input_tokens":{},"output_tokens":0}}}}}}"#,
        a.id, a.model_json, a.prompt_tokens
    );
    let mut out = event("message_start", &json);
    if a.tool_call.is_some() {
        return Bytes::from(out);
    }
    out += &block_start(
        0,
        if a.reasoning_tokens > 0 {
            "thinking"
        } else {
            "text"
        },
    );
    Bytes::from(out)
}

fn block_start(index: usize, kind: &str) -> String {
    let json = format!(
        r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"{kind}","{kind}":""}}}}"#
    );
    event("content_block_start", &json)
}

fn block_stop(index: usize) -> String {
    event(
        "content_block_stop",
        &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
    )
}

/// A tool call's events of tokens `first..a.emitted`: its block's start with the first,
/// then its piece of the input.
fn tool_delta(a: &Answer, first: usize) -> Bytes {
    let Some((id, name, _)) = a.call_fields() else {
        return Bytes::new();
    };
    let mut out = String::new();
    if first == 0 {
        let json = format!(
            r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"tool_use","id":"{id}","name":{name},"input":{{}}}}}}"#
        );
        out += &event("content_block_start", &json);
    }
    let piece = super::tool::json_string(&a.arguments_since(first));
    let json = format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{piece}}}}}"#
    );
    out += &event("content_block_delta", &json);
    Bytes::from(out)
}

/// The deltas of tokens `first..a.emitted`: thinking, then (after the thinking block
/// closes and the text block opens) text.
pub fn delta(a: &Answer, first: usize) -> Bytes {
    if a.tool_call.is_some() {
        return tool_delta(a, first);
    }
    let (reasoning, answer) = a.text_since(first);
    let mut out = String::new();
    if !reasoning.is_empty() {
        let json = format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"thinking_delta","thinking":"{reasoning}"}}}}"#
        );
        out += &event("content_block_delta", &json);
    }
    if !answer.is_empty() {
        let index = usize::from(a.reasoning_tokens > 0);
        if index == 1 && first <= a.reasoning_tokens {
            out += &block_stop(0);
            out += &block_start(1, "text");
        }
        let json = format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":"{answer}"}}}}"#
        );
        out += &event("content_block_delta", &json);
    }
    Bytes::from(out)
}

fn stop_reason(a: &Answer) -> &'static str {
    match (a.finished(), &a.tool_call) {
        (true, Some(_)) => "tool_use",
        (true, None) => "max_tokens",
        (false, _) => "end_turn",
    }
}

/// The last block's stop, `message_delta` with the output tokens, `message_stop`.
pub fn stop(a: &Answer) -> Bytes {
    let last = usize::from(a.reasoning_tokens > 0 && a.emitted > a.reasoning_tokens);
    let mut out = block_stop(last);
    let json = format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"{}","stop_sequence":null}},"usage":{{"output_tokens":{}}}}}"#,
        stop_reason(a),
        a.emitted
    );
    out += &event("message_delta", &json);
    out += &event("message_stop", r#"{"type":"message_stop"}"#);
    Bytes::from(out)
}

pub fn whole(a: &Answer) -> String {
    let (reasoning, answer) = a.text_since(0);
    let mut content = String::new();
    if a.reasoning_tokens > 0 {
        content += &format!(r#"{{"type":"thinking","thinking":"{reasoning}"}},"#);
    }
    match a.call_fields() {
        // A whole answer has all its tokens: the arguments are a closed JSON object.
        Some((id, name, _)) => {
            let input = a.arguments_since(0);
            content +=
                &format!(r#"{{"type":"tool_use","id":"{id}","name":{name},"input":{input}}}"#);
        }
        None => content += &format!(r#"{{"type":"text","text":"{answer}"}}"#),
    }
    format!(
        r#"{{"id":"msg_{}","type":"message","role":"assistant","model":{},"content":[{content}],"stop_reason":"{}","usage":{{"input_tokens":{},"output_tokens":{}}}}}"#,
        a.id,
        a.model_json,
        stop_reason(a),
        a.prompt_tokens,
        a.emitted
    )
}
