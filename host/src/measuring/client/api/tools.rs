//! A request's tools and its tool history in each API's own shape. A scenario declares
//! tools once ([`ToolSpec`]) and writes its history in OpenAI's chat form (an assistant
//! message with `tool_calls`, then `tool` messages with the results); chat sends both as
//! they are, Anthropic Messages and Responses get them translated here, so one scenario
//! runs unchanged on every API that can call tools.

use serde_json::{json, Map, Value};

use super::Api;
use crate::workloads::scenario::{RequestSpec, ToolSpec};

/// `spec.tools` in `api`'s shape under `tools`; completions and embeddings have no tools,
/// so a request that declares some is refused rather than sent without them.
pub(super) fn fill(
    body: &mut Map<String, Value>,
    spec: &RequestSpec,
    api: Api,
) -> Result<(), String> {
    if spec.tools.is_empty() {
        return Ok(());
    }
    check(&spec.tools)?;
    let shape: fn(&ToolSpec) -> Value = match api {
        Api::Chat => chat,
        Api::Messages => messages,
        Api::Responses => responses,
        Api::Completions | Api::Embeddings => {
            return Err(format!(
            "a request with `tools` cannot go to {}: only chat, responses and messages take tools",
            api.path()
        ))
        }
    };
    body.insert("tools".into(), spec.tools.iter().map(shape).collect());
    Ok(())
}

/// The most tools one request may declare: OpenAI's chat endpoint takes at most 128.
pub const MAX_TOOLS: usize = 128;
/// The longest tool name, bytes: OpenAI's limit (names of `[A-Za-z0-9_-]`).
pub const MAX_TOOL_NAME: usize = 64;
/// The most bytes of descriptions and parameter schemas over a request's tools: far
/// beyond a real tool set (each is sent with every request and counts as prompt tokens),
/// far below what would make one body a burden to build and send.
pub const MAX_TOOLS_BYTES: usize = 1 << 20;

/// Tools a server takes: 1 to [`MAX_TOOLS`] of them, each with a distinct name of at most
/// [`MAX_TOOL_NAME`] letters, digits, `_` and `-`, and parameters that are a JSON object;
/// their descriptions and schemas together within [`MAX_TOOLS_BYTES`]. Checked here, where
/// every scenario's request (Rhai or Wasm) is built into a body.
fn check(tools: &[ToolSpec]) -> Result<(), String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "`tools` holds {} tools; a request may declare at most {MAX_TOOLS}",
            tools.len()
        ));
    }
    let mut bytes = 0usize;
    for (i, t) in tools.iter().enumerate() {
        let name_ok = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        if t.name.is_empty() || t.name.len() > MAX_TOOL_NAME || !t.name.bytes().all(name_ok) {
            return Err(format!(
                "tools[{i}]: name {:?} must be 1 to {MAX_TOOL_NAME} letters, digits, `_` or `-`",
                crate::safeguards::display::excerpt(&t.name)
            ));
        }
        if tools[..i].iter().any(|u| u.name == t.name) {
            return Err(format!(
                "tools[{i}]: the tool `{}` is declared twice",
                t.name
            ));
        }
        if !t.parameters.is_object() {
            return Err(format!(
                "tools[{i}] (`{}`): `parameters` must be a JSON object (a JSON Schema)",
                t.name
            ));
        }
        bytes = bytes
            .saturating_add(t.description.len())
            .saturating_add(t.parameters.to_string().len());
        if bytes > MAX_TOOLS_BYTES {
            return Err(format!(
                "`tools` passes {} KiB of descriptions and parameters at tools[{i}]; a request may carry at most {} KiB",
                bytes >> 10,
                MAX_TOOLS_BYTES >> 10
            ));
        }
    }
    Ok(())
}

fn chat(t: &ToolSpec) -> Value {
    json!({"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters,
    }})
}

fn messages(t: &ToolSpec) -> Value {
    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
}

fn responses(t: &ToolSpec) -> Value {
    json!({"type": "function", "name": t.name, "description": t.description,
        "parameters": t.parameters})
}

/// The calls of an OpenAI assistant message: (id, name, arguments text) of each.
fn calls_of(message: &Value) -> Vec<(&str, &str, &str)> {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    fn text<'a>(v: &'a Value, key: &str) -> &'a str {
        v.get(key).and_then(Value::as_str).unwrap_or("")
    }
    calls
        .iter()
        .map(|c| {
            let function = c.get("function").unwrap_or(&Value::Null);
            (
                text(c, "id"),
                text(function, "name"),
                text(function, "arguments"),
            )
        })
        .collect()
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// A message's content as text: a string as it is, text parts joined, anything else
/// as JSON (a tool result may be any value the scenario gave).
fn content_text(message: &Value) -> String {
    match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) if parts.iter().all(|p| p.get("text").is_some()) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        Some(other) => other.to_string(),
    }
}

/// OpenAI-shaped tool history as Anthropic Messages: an assistant message's calls become
/// `tool_use` blocks after its text, and each run of `tool` messages becomes one user
/// message of `tool_result` blocks (Anthropic wants user and assistant turns to alternate).
/// Other messages pass as they are.
pub(super) fn to_anthropic(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for m in messages {
        match role(&m) {
            Some("assistant") if m.get("tool_calls").is_some() => {
                let mut blocks = Vec::new();
                let text = content_text(&m);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for (id, name, arguments) in calls_of(&m) {
                    // Anthropic takes the input as an object: arguments that are not one
                    // (a model's broken JSON, replayed) are sent as no arguments.
                    let input = serde_json::from_str::<Value>(arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                let result =
                    json!({"type": "tool_result", "tool_use_id": id, "content": content_text(&m)});
                match out.last_mut() {
                    Some(last) if is_tool_results(last) => {
                        if let Some(Value::Array(blocks)) = last.get_mut("content") {
                            blocks.push(result);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [result]})),
                }
            }
            _ => out.push(m),
        }
    }
    out
}

/// A user message of `tool_result` blocks, as [`to_anthropic`] builds one.
fn is_tool_results(message: &Value) -> bool {
    role(message) == Some("user")
        && message
            .get("content")
            .and_then(Value::as_array)
            .and_then(|blocks| blocks.first())
            .and_then(|b| b.get("type"))
            .and_then(Value::as_str)
            == Some("tool_result")
}

/// OpenAI-shaped tool history as Responses input items: an assistant message's calls
/// become `function_call` items after its text, a `tool` message a `function_call_output`.
/// Other messages pass as they are.
pub(super) fn to_responses(messages: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match role(&m) {
            Some("assistant") if m.get("tool_calls").is_some() => {
                let text = content_text(&m);
                if !text.is_empty() {
                    out.push(json!({"role": "assistant", "content": text}));
                }
                for (id, name, arguments) in calls_of(&m) {
                    out.push(json!({"type": "function_call", "call_id": id, "name": name,
                        "arguments": arguments}));
                }
            }
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                out.push(json!({"type": "function_call_output", "call_id": id,
                    "output": content_text(&m)}));
            }
            _ => out.push(m),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::api::{test_spec, UsageRequest};
    use crate::workloads::scenario::Prompt;

    fn history() -> Vec<Value> {
        vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "weather in Paris and Rome?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "not json"}}]}),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "rain"}),
            json!({"role": "assistant", "content": "Sunny, and rain."}),
        ]
    }

    fn weather() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "the weather in a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }
    }

    fn body(api: Api, prompt: Prompt) -> Result<Map<String, Value>, String> {
        let mut spec = test_spec(prompt);
        spec.tools = vec![weather()];
        api.body(&spec, "m", UsageRequest::None)
    }

    #[test]
    fn each_api_gets_tools_in_its_own_shape() {
        let text = || Prompt::Text("hi".into());
        let chat = body(Api::Chat, text()).expect("chat");
        assert_eq!(chat["tools"][0]["type"], "function");
        assert_eq!(chat["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(chat["tools"][0]["function"]["parameters"]["type"], "object");
        let messages = body(Api::Messages, text()).expect("messages");
        assert_eq!(messages["tools"][0]["name"], "get_weather");
        assert_eq!(messages["tools"][0]["input_schema"]["type"], "object");
        assert!(messages["tools"][0].get("type").is_none());
        let responses = body(Api::Responses, text()).expect("responses");
        assert_eq!(responses["tools"][0]["type"], "function");
        assert_eq!(responses["tools"][0]["name"], "get_weather");
        assert_eq!(responses["tools"][0]["parameters"]["type"], "object");
        let plain = Api::Chat.body(&test_spec(text()), "m", UsageRequest::None);
        assert!(plain.expect("chat").get("tools").is_none());
    }

    #[test]
    fn completions_and_embeddings_refuse_tools_in_one_line() {
        for api in [Api::Completions, Api::Embeddings] {
            let e = body(api, Prompt::Text("hi".into())).expect_err("refused");
            assert!(e.contains("`tools`") && e.contains(api.path()), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn tools_are_checked_before_they_are_sent() {
        let with = |tools: Vec<ToolSpec>| {
            let mut spec = test_spec(Prompt::Text("hi".into()));
            spec.tools = tools;
            Api::Chat.body(&spec, "m", UsageRequest::None)
        };
        let named = |name: &str| ToolSpec {
            name: name.into(),
            ..weather()
        };
        assert!(with(vec![named("a-b_C9"), named(&"x".repeat(MAX_TOOL_NAME))]).is_ok());
        for bad in [
            "",
            "a b",
            "caf\u{e9}",
            "a.b",
            &"x".repeat(MAX_TOOL_NAME + 1),
        ] {
            let e = with(vec![named(bad)]).expect_err(bad);
            assert!(e.contains("must be 1 to 64"), "{bad:?}: {e}");
        }
        let e = with(vec![named("a"), named("a")]).expect_err("twice");
        assert!(e.contains("declared twice"), "{e}");
        let e = with(vec![ToolSpec {
            parameters: json!([1]),
            ..weather()
        }])
        .expect_err("not an object");
        assert!(e.contains("JSON object"), "{e}");
        let many = (0..=MAX_TOOLS).map(|i| named(&format!("t{i}"))).collect();
        assert!(with(many).expect_err("many").contains("at most 128"));
        let huge = ToolSpec {
            description: "d".repeat(MAX_TOOLS_BYTES),
            ..weather()
        };
        assert!(with(vec![huge])
            .expect_err("huge")
            .contains("at most 1024 KiB"));
    }

    #[test]
    fn tool_history_becomes_anthropic_blocks() {
        let body = body(Api::Messages, Prompt::Messages(history())).expect("body");
        let m = body["messages"].as_array().expect("messages");
        assert_eq!(body["system"], "be brief");
        assert_eq!(m.len(), 4, "{m:?}");
        let uses = &m[1]["content"];
        assert_eq!(m[1]["role"], "assistant");
        assert_eq!(uses[0]["type"], "tool_use");
        assert_eq!(uses[0]["id"], "call_1");
        assert_eq!(uses[0]["input"], json!({"city": "Paris"}));
        assert_eq!(uses[1]["input"], json!({}));
        assert_eq!(m[2]["role"], "user");
        let results = m[2]["content"].as_array().expect("blocks");
        assert_eq!(results.len(), 2);
        assert_eq!(results[1]["type"], "tool_result");
        assert_eq!(results[1]["tool_use_id"], "call_2");
        assert_eq!(results[1]["content"], "rain");
        assert_eq!(m[3]["content"], "Sunny, and rain.");
    }

    #[test]
    fn tool_history_becomes_responses_items() {
        let body = body(Api::Responses, Prompt::Messages(history())).expect("body");
        let items = body["input"].as_array().expect("input");
        assert_eq!(items.len(), 7, "{items:?}");
        assert_eq!(items[2]["type"], "function_call");
        assert_eq!(items[2]["call_id"], "call_1");
        assert_eq!(items[2]["name"], "get_weather");
        assert_eq!(items[2]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(items[4]["type"], "function_call_output");
        assert_eq!(items[4]["call_id"], "call_1");
        assert_eq!(items[4]["output"], "sunny");
        assert_eq!(items[6]["role"], "assistant");
    }

    #[test]
    fn chat_sends_tool_history_as_it_is() {
        let body = body(Api::Chat, Prompt::Messages(history())).expect("body");
        assert_eq!(body["messages"], Value::Array(history()));
    }
}
