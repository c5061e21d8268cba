//! `/v1/responses` (OpenAI Responses): the input as text or messages, `max_output_tokens`;
//! its typed events (`response.output_text.delta`, `response.reasoning_text.delta`, …,
//! `response.completed` with `usage.input_tokens`/`output_tokens`, `response.failed`,
//! `error`) decoded into content chunks. Usage always comes with `response.completed`:
//! the API has no `stream_options`.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::messages_of;
use crate::measuring::client::exchange::{
    error_object_text, head, Exchange, Generated, UsageDetails,
};
use crate::measuring::metrics::record::ErrorKind;
use crate::workloads::scenario::{Prompt, RequestSpec};

pub(super) fn fill(body: &mut Map<String, Value>, spec: &RequestSpec) -> Result<(), String> {
    let input = match &spec.prompt {
        Prompt::Text(t) => json!(t),
        prompt => Value::Array(super::tools::to_responses(messages_of(prompt)?)),
    };
    body.insert("input".into(), input);
    body.insert("max_output_tokens".into(), json!(spec.max_tokens));
    body.insert("stream".into(), json!(spec.stream));
    Ok(())
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    response: Option<Response<'a>>,
    /// An `error` event's own message.
    #[serde(default)]
    message: Option<String>,
}

/// A response object: in `response.completed` / `failed` / `incomplete`, or a whole
/// non-streamed answer.
#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    output: Vec<OutputItem<'a>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    output_tokens_details: Option<UsageDetails>,
}

#[derive(Deserialize)]
struct OutputItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Vec<Part<'a>>,
    #[serde(default, borrow)]
    summary: Vec<Part<'a>>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// One SSE event of a streamed response.
pub(crate) fn event(ex: &mut Exchange, data: &[u8], at: Instant) {
    let event: Event = match serde_json::from_slice(data) {
        Ok(e) => e,
        Err(e) => return not_responses(ex, e, data),
    };
    let delta = event.delta.as_deref().unwrap_or("");
    let generated = match event.kind.as_ref() {
        "response.output_text.delta" => Generated {
            answer: delta,
            ..Generated::default()
        },
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => Generated {
            reasoning: delta,
            ..Generated::default()
        },
        "response.function_call_arguments.delta" => Generated {
            tool_call: true,
            ..Generated::default()
        },
        "response.completed" | "response.incomplete" | "response.failed" => {
            return finished(ex, event.response)
        }
        "error" => {
            let message = event.message.unwrap_or_else(|| head(data));
            let text = error_object_text(&json!({ "message": message }));
            return ex.fail(ErrorKind::ErrorObject, text);
        }
        // Lifecycle events (created, in_progress, output_item.added, …) carry no tokens.
        _ => return,
    };
    ex.generated(at, generated, None);
}

/// The final response of a stream: its usage, or its error.
fn finished(ex: &mut Exchange, response: Option<Response>) {
    let Some(response) = response else { return };
    if let Some(err) = response.error.filter(|e| !e.is_null()) {
        return ex.fail(ErrorKind::ErrorObject, error_object_text(&err));
    }
    if let Some(u) = response.usage {
        let reasoning = u.output_tokens_details.and_then(|d| d.reasoning_tokens);
        ex.usage(u.input_tokens, u.output_tokens, reasoning);
    }
}

/// A whole non-streamed response: its reasoning and output text as one chunk.
pub(crate) fn whole(ex: &mut Exchange, data: &[u8], at: Instant) {
    let response: Response = match serde_json::from_slice(data) {
        Ok(r) => r,
        Err(e) => return not_responses(ex, e, data),
    };
    let (mut reasoning, mut answer, mut tool_call) = (String::new(), String::new(), false);
    for item in &response.output {
        let into = match item.kind.as_ref() {
            "reasoning" => &mut reasoning,
            "message" => &mut answer,
            "function_call" => {
                tool_call = true;
                continue;
            }
            _ => continue,
        };
        let parts = item.content.iter().chain(&item.summary);
        parts
            .filter_map(|p| p.text.as_deref())
            .for_each(|t| into.push_str(t));
    }
    let generated = Generated {
        reasoning: &reasoning,
        answer: &answer,
        tool_call,
    };
    finished(ex, Some(response));
    if ex.error.is_none() {
        ex.generated(at, generated, None);
    }
}

fn not_responses(ex: &mut Exchange, e: serde_json::Error, data: &[u8]) {
    // An OpenAI error object in place of the answer is the server's error, not a bad body.
    if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(data) {
        if let Some(err) = o.get("error").filter(|e| !e.is_null()) {
            return ex.fail(ErrorKind::ErrorObject, error_object_text(err));
        }
    }
    ex.fail(
        ErrorKind::MalformedJson,
        format!("not a Responses API event ({e}): {}", head(data)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::stream::decode_whole;
    use crate::measuring::client::Api;

    fn decode(sse: bool, body: &[u8]) -> Exchange {
        decode_whole(Api::Responses, sse, body)
    }

    #[test]
    fn reasoning_then_text_then_usage() {
        let ex = decode(
            true,
            b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n\
              data: {\"type\":\"response.reasoning_text.delta\",\"delta\":\"hm\"}\n\n\
              data: {\"type\":\"response.output_text.delta\",\"delta\":\" yes\"}\n\n\
              data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":2,\"output_tokens_details\":{\"reasoning_tokens\":1}}}}\n\n",
        );
        assert_eq!(ex.error, None);
        assert_eq!(ex.chunks.len(), 2);
        assert_eq!((ex.chunks[0].answer, ex.chunks[1].answer), (false, true));
        assert_eq!(ex.answer_text(), " yes");
        let usage = (ex.prompt_tokens, ex.completion_tokens, ex.reasoning_tokens);
        assert_eq!(usage, (Some(7), Some(2), Some(1)));
    }

    #[test]
    fn errors_of_every_shape_are_classified() {
        let failed = decode(
            true,
            b"data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n",
        );
        let e = failed.error.expect("failed");
        assert_eq!(e.kind, ErrorKind::ErrorObject);
        assert!(e.message.contains("boom"), "{}", e.message);
        let error = decode(
            true,
            b"data: {\"type\":\"error\",\"message\":\"too long\"}\n\n",
        );
        assert!(error.error.expect("error").message.contains("too long"));
        let bad = decode(true, b"data: {\"delta\":\"no type\"}\n\n");
        assert_eq!(bad.error.map(|e| e.kind), Some(ErrorKind::MalformedJson));
    }

    #[test]
    fn a_whole_response_is_one_chunk() {
        let ex = decode(
            false,
            br#"{"output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"r"}]},
                {"type":"message","content":[{"type":"output_text","text":"a b"}]}],
                "usage":{"input_tokens":3,"output_tokens":4}}"#,
        );
        assert_eq!((ex.chunks.len(), ex.text.as_str()), (1, "ra b"));
        assert_eq!(ex.answer_text(), "a b");
        assert_eq!(ex.completion_tokens, Some(4));
    }
}
