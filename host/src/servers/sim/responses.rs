//! OpenAI's Responses API (`/v1/responses`) as vLLM serves it: the request's `input`
//! (text, or messages) and `max_output_tokens`; the stream `response.created`,
//! `response.reasoning_text.delta` / `response.output_text.delta` per chunk (for an answer
//! that is a tool call, `response.output_item.added` of a `function_call` and
//! `response.function_call_arguments.delta`s, then `.done`), then `response.completed`
//! with `usage.input_tokens`/`output_tokens`.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::answer::{event, Answer};
use super::openai::ApiError;

#[derive(Deserialize)]
struct Request {
    model: Option<String>,
    input: Option<Value>,
    max_output_tokens: Option<i64>,
    stream: Option<bool>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    sim_tool_call: Option<Value>,
}

/// The chat request a Responses request means: the input as messages (a text as one
/// user message), `max_output_tokens` as the completion limit, usage always on.
pub fn as_chat(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let r: Request = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    let messages = match r.input {
        Some(Value::String(text)) => json!([{"role": "user", "content": text}]),
        Some(messages @ Value::Array(_)) => messages,
        _ => {
            return Err(ApiError::bad_request(
                "the field `input` is required: a string or an array of messages",
            ))
        }
    };
    let mut chat = json!({
        "messages": messages,
        "stream": r.stream.unwrap_or(false),
        "stream_options": {"include_usage": true},
    });
    if let Some(model) = r.model {
        chat["model"] = model.into();
    }
    if let Some(max) = r.max_output_tokens {
        chat["max_completion_tokens"] = max.into();
    }
    // As they are: `tool` reads every API's shape of tools and tool_choice.
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

fn response_json(a: &Answer, status: &str, output: &str) -> String {
    let id = a.id;
    let model = &a.model_json;
    format!(
        r#"{{"id":"resp_{id}","object":"response","status":"{status}","model":{model},"output":[{output}],"usage":{}}}"#,
        usage(a)
    )
}

fn usage(a: &Answer) -> String {
    let (p, c, r) = (a.prompt_tokens, a.emitted, a.reasoning_so_far());
    format!(
        r#"{{"input_tokens":{p},"output_tokens":{c},"output_tokens_details":{{"reasoning_tokens":{r}}},"total_tokens":{}}}"#,
        p + c
    )
}

pub fn created(a: &Answer) -> Bytes {
    let json = format!(
        r#"{{"type":"response.created","response":{}}}"#,
        response_json(a, "in_progress", "")
    );
    Bytes::from(event("response.created", &json))
}

/// A function call's output item; `arguments` is a JSON string.
fn call_item(a: &Answer, status: &str, arguments: &str) -> String {
    let Some((call_id, name, _)) = a.call_fields() else {
        return String::new();
    };
    format!(
        r#"{{"type":"function_call","id":"fc_{}","call_id":"{call_id}","name":{name},"arguments":{arguments},"status":"{status}"}}"#,
        a.id
    )
}

/// A tool call's events of tokens `first..a.emitted`: its item with the first, then its
/// piece of the arguments.
fn tool_delta(a: &Answer, first: usize) -> Bytes {
    let mut out = String::new();
    if first == 0 {
        let json = format!(
            r#"{{"type":"response.output_item.added","output_index":0,"item":{}}}"#,
            call_item(a, "in_progress", r#""""#)
        );
        out += &event("response.output_item.added", &json);
    }
    let piece = super::tool::json_string(&a.arguments_since(first));
    let json = format!(
        r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_{}","output_index":0,"delta":{piece}}}"#,
        a.id
    );
    out += &event("response.function_call_arguments.delta", &json);
    Bytes::from(out)
}

/// The delta events of tokens `first..a.emitted`: reasoning first, then answer text.
pub fn delta(a: &Answer, first: usize) -> Bytes {
    if a.tool_call.is_some() {
        return tool_delta(a, first);
    }
    let (reasoning, answer) = a.text_since(first);
    let mut out = String::new();
    if !reasoning.is_empty() {
        let json = format!(
            r#"{{"type":"response.reasoning_text.delta","item_id":"rs_{}","output_index":0,"content_index":0,"delta":"{reasoning}"}}"#,
            a.id
        );
        out += &event("response.reasoning_text.delta", &json);
    }
    if !answer.is_empty() {
        let index = usize::from(a.reasoning_tokens > 0);
        let json = format!(
            r#"{{"type":"response.output_text.delta","item_id":"msg_{}","output_index":{index},"content_index":0,"delta":"{answer}"}}"#,
            a.id
        );
        out += &event("response.output_text.delta", &json);
    }
    Bytes::from(out)
}

/// The output items of the whole answer so far.
fn output(a: &Answer) -> String {
    if let Some((_, _, arguments)) = a.call_fields() {
        return call_item(a, "completed", &arguments);
    }
    let (reasoning, answer) = a.text_since(0);
    let message = format!(
        r#"{{"type":"message","id":"msg_{}","role":"assistant","content":[{{"type":"output_text","text":"{answer}"}}]}}"#,
        a.id
    );
    if a.reasoning_tokens == 0 {
        return message;
    }
    format!(
        r#"{{"type":"reasoning","id":"rs_{}","content":[{{"type":"reasoning_text","text":"{reasoning}"}}]}},{message}"#,
        a.id
    )
}

/// `response.completed` (`response.incomplete` when the length limit cut it, as OpenAI
/// says for `max_output_tokens`).
/// A tool call's arguments close on its last token, so its response is complete.
pub fn completed(a: &Answer) -> Bytes {
    let (kind, status) = if a.finished() && a.tool_call.is_none() {
        ("response.incomplete", "incomplete")
    } else {
        ("response.completed", "completed")
    };
    let mut out = String::new();
    if let Some((_, _, arguments)) = a.call_fields() {
        let json = format!(
            r#"{{"type":"response.function_call_arguments.done","item_id":"fc_{}","output_index":0,"arguments":{arguments}}}"#,
            a.id
        );
        out += &event("response.function_call_arguments.done", &json);
    }
    let json = format!(
        r#"{{"type":"{kind}","response":{}}}"#,
        response_json(a, status, &output(a))
    );
    out += &event(kind, &json);
    Bytes::from(out)
}

pub fn whole(a: &Answer) -> String {
    let status = if a.finished() && a.tool_call.is_none() {
        "incomplete"
    } else {
        "completed"
    };
    response_json(a, status, &output(a))
}
