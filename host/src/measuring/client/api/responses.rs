//! `/v1/responses` (OpenAI Responses): the input as text or messages, `max_output_tokens`;
//! its typed events (`response.output_text.delta`, `response.reasoning_text.delta`, …,
//! a function call's `response.output_item.added` and `function_call_arguments.delta` /
//! `.done`, `response.completed` with `usage.input_tokens`/`output_tokens`,
//! `response.failed`, `error`) decoded into content chunks. Usage always comes with `response.completed`:
//! the API has no `stream_options`.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::messages_of;
use crate::measuring::client::exchange::{
    error_object_text, head, Exchange, Generated, PromptDetails, UsageDetails,
};
use crate::measuring::client::tool_calls::ToolDelta;
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
    /// The output item an event is about: a function call is known by it.
    #[serde(default)]
    output_index: Option<u64>,
    /// `response.output_item.added`'s item.
    #[serde(default, borrow)]
    item: Option<OutputItem<'a>>,
    /// `response.function_call_arguments.done`'s whole arguments.
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
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
    #[serde(default)]
    input_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct OutputItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Vec<Part<'a>>,
    #[serde(default, borrow)]
    summary: Vec<Part<'a>>,
    /// A `function_call` item's id (which its output names), name and arguments.
    #[serde(default, borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

impl OutputItem<'_> {
    /// A `function_call` item as the first piece of call `index`.
    fn call(&self, index: u64) -> Option<ToolDelta<'_>> {
        (self.kind == "function_call").then(|| ToolDelta {
            index,
            id: self.call_id.as_deref(),
            name: self.name.as_deref(),
            arguments: self.arguments.as_deref().unwrap_or(""),
        })
    }
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
        "response.function_call_arguments.delta" => {
            ex.tool_delta(ToolDelta {
                index: event.output_index.unwrap_or(0),
                arguments: delta,
                ..ToolDelta::default()
            });
            Generated {
                tool_call: true,
                ..Generated::default()
            }
        }
        // A function call's item opens with its id and name, its arguments follow as
        // deltas (the first of them is its first chunk) and whole in `.done`.
        "response.output_item.added" => {
            let index = event.output_index.unwrap_or(0);
            if let Some(call) = event.item.as_ref().and_then(|i| i.call(index)) {
                ex.tool_delta(call);
            }
            return;
        }
        "response.function_call_arguments.done" => {
            let arguments = event.arguments.as_deref().unwrap_or("");
            return ex.tool_arguments(event.output_index.unwrap_or(0), arguments);
        }
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
        ex.cached(u.input_tokens_details.and_then(|d| d.cached_tokens));
    }
}

/// A whole non-streamed response: its reasoning and output text as one chunk.
pub(crate) fn whole(ex: &mut Exchange, data: &[u8], at: Instant) {
    let response: Response = match serde_json::from_slice(data) {
        Ok(r) => r,
        Err(e) => return not_responses(ex, e, data),
    };
    let (mut reasoning, mut answer, mut tool_call) = (String::new(), String::new(), false);
    for (index, item) in response.output.iter().enumerate() {
        let into = match item.kind.as_ref() {
            "reasoning" => &mut reasoning,
            "message" => &mut answer,
            "function_call" => {
                tool_call = true;
                if let Some(call) = item.call(index as u64) {
                    ex.tool_delta(call);
                }
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
    fn a_function_call_item_gives_its_id_name_and_split_arguments() {
        let ex = decode(
            true,
            b"data: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n\
              data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_9\",\"name\":\"get_weather\",\"arguments\":\"\"}}\n\n\
              data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"item_id\":\"fc_1\",\"delta\":\"{\\\"city\\\":\"}\n\n\
              data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"item_id\":\"fc_1\",\"delta\":\"\\\"Rome\\\"\"}\n\n\
              data: {\"type\":\"response.function_call_arguments.done\",\"output_index\":0,\"item_id\":\"fc_1\",\"arguments\":\"{\\\"city\\\":\\\"Rome\\\"}\"}\n\n\
              data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":6,\"input_tokens_details\":{\"cached_tokens\":4}}}}\n\n",
        );
        assert_eq!(ex.error, None);
        let calls: Vec<_> = ex.tool_calls.calls().cloned().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_9", "get_weather")
        );
        assert_eq!(calls[0].arguments, r#"{"city":"Rome"}"#);
        assert_eq!(ex.chunks.len(), 2);
        assert!(ex.chunks.iter().all(|c| c.tool_call && c.answer));
        assert_eq!(ex.tool_calls.text(), r#"get_weather{"city":"Rome"}"#);
        assert_eq!(ex.cached_prompt_tokens, Some(4));
    }

    #[test]
    fn a_whole_response_keeps_its_function_calls() {
        let ex = decode(
            false,
            br#"{"output":[{"type":"function_call","id":"fc_2","call_id":"call_2","name":"f","arguments":"{}"}],
                "usage":{"input_tokens":3,"output_tokens":2}}"#,
        );
        assert_eq!(ex.error, None);
        let call = ex.tool_calls.calls().next().expect("a call").clone();
        assert_eq!(
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str()
            ),
            ("call_2", "f", "{}")
        );
        assert_eq!((ex.chunks.len(), ex.chunks[0].tool_call), (1, true));
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
