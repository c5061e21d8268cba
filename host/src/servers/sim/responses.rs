//! OpenAI's Responses API (`/v1/responses`) as vLLM serves it: the request's `input`
//! (text, or messages) and `max_output_tokens`; the stream `response.created`,
//! `response.reasoning_text.delta` / `response.output_text.delta` per chunk, then
//! `response.completed` with `usage.input_tokens`/`output_tokens`.

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

/// The delta events of tokens `first..a.emitted`: reasoning first, then answer text.
pub fn delta(a: &Answer, first: usize) -> Bytes {
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
pub fn completed(a: &Answer) -> Bytes {
    let (kind, status) = if a.finished() {
        ("response.incomplete", "incomplete")
    } else {
        ("response.completed", "completed")
    };
    let json = format!(
        r#"{{"type":"{kind}","response":{}}}"#,
        response_json(a, status, &output(a))
    );
    Bytes::from(event(kind, &json))
}

pub fn whole(a: &Answer) -> String {
    let status = if a.finished() {
        "incomplete"
    } else {
        "completed"
    };
    response_json(a, status, &output(a))
}
