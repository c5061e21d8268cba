//! The OpenAI wire format as vLLM speaks it: request bodies in, JSON and SSE chunks out.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::prefix::PromptBlocks;
use super::profile::SimConfig;
use super::tool::{self, ToolAnswer, ToolAsk};
use super::words;

/// vLLM's default when a request gives no max_tokens.
const DEFAULT_MAX_TOKENS: i64 = 16;

/// Which generation endpoint a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenerationEndpoint {
    Completions,
    Chat,
}

/// What a valid request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub stream: bool,
    pub include_usage: bool,
    /// vLLM's `continuous_usage_stats` (with `include_usage`): usage on every content chunk.
    pub continuous_usage: bool,
    /// Leading tokens sent as `reasoning_content` (chat only; 0 for completions).
    pub reasoning_tokens: usize,
    /// The prompt's block hashes, for the prefix cache.
    pub blocks: PromptBlocks,
    /// The answer is this tool call, not text (chat only; see `tool`).
    pub tool_call: Option<ToolAnswer>,
    /// Where the answer's words start in the word list: a hash of the request's body, so
    /// the same request gets the same answer whenever it arrives (a session that carries
    /// its answers into its next prompt sends the same stream on every run).
    pub text_seed: u64,
}

/// An error answered with an OpenAI error object.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
        }
    }

    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "BadRequestError",
            StatusCode::NOT_FOUND => "NotFoundError",
            _ => "ServiceUnavailableError",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": null,
                "code": self.status.as_u16(),
            }
        });
        (self.status, Json(body)).into_response()
    }
}

#[derive(Deserialize, Default)]
struct StreamOptions {
    include_usage: Option<bool>,
    continuous_usage_stats: Option<bool>,
}

// Unknown fields (ignore_eos, temperature, ...) are accepted and ignored, as vLLM does for
// sampling knobs that cannot change what this model says.
#[derive(Deserialize)]
struct CompletionRequest {
    model: Option<String>,
    prompt: Option<Value>,
    max_tokens: Option<i64>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    n: Option<i64>,
}

#[derive(Deserialize)]
struct ChatRequest {
    model: Option<String>,
    messages: Option<Value>,
    max_completion_tokens: Option<i64>,
    max_tokens: Option<i64>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    n: Option<i64>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    /// The simulator's own field: answer with a tool call.
    sim_tool_call: Option<bool>,
}

/// What either endpoint's request gave, before the checks they share.
struct Read {
    model: Option<String>,
    prompt_tokens: usize,
    blocks: PromptBlocks,
    max_tokens: Option<i64>,
    stream: Option<bool>,
    options: Option<StreamOptions>,
    n: Option<i64>,
    tool_call: Option<ToolAnswer>,
}

fn read(endpoint: GenerationEndpoint, body: &[u8], config: &SimConfig) -> Result<Read, ApiError> {
    let bad_json = |e: serde_json::Error| ApiError::bad_request(format!("invalid JSON body: {e}"));
    match endpoint {
        GenerationEndpoint::Completions => {
            let r: CompletionRequest = serde_json::from_slice(body).map_err(bad_json)?;
            let prompt = r
                .prompt
                .ok_or_else(|| ApiError::bad_request("the field `prompt` is required"))?;
            let (prompt_tokens, blocks) = prompt_tokens(&prompt, config)?;
            Ok(Read {
                model: r.model,
                prompt_tokens,
                blocks,
                max_tokens: r.max_tokens,
                stream: r.stream,
                options: r.stream_options,
                n: r.n,
                tool_call: None,
            })
        }
        GenerationEndpoint::Chat => {
            let r: ChatRequest = serde_json::from_slice(body).map_err(bad_json)?;
            let messages = r
                .messages
                .ok_or_else(|| ApiError::bad_request("the field `messages` is required"))?;
            let (mut prompt_tokens, blocks) = chat_prompt_tokens(&messages, config)?;
            // The tools' schemas are part of the prompt, as a chat template renders them.
            if let Some(tools) = r.tools.as_ref().filter(|t| !t.is_null()) {
                prompt_tokens += config.count_prompt_tokens(&tools.to_string());
            }
            let ask = ToolAsk {
                tools: r.tools.as_ref(),
                tool_choice: r.tool_choice.as_ref(),
                forced: r.sim_tool_call.unwrap_or(false),
            };
            Ok(Read {
                model: r.model,
                prompt_tokens,
                blocks,
                max_tokens: r.max_completion_tokens.or(r.max_tokens),
                stream: r.stream,
                options: r.stream_options,
                n: r.n,
                tool_call: tool::choose(&ask, config.tool_call_ratio, body),
            })
        }
    }
}

/// Parse and validate a request body for `endpoint`.
pub fn parse(
    endpoint: GenerationEndpoint,
    body: &[u8],
    config: &SimConfig,
) -> Result<Job, ApiError> {
    let Read {
        model,
        prompt_tokens,
        blocks,
        max_tokens,
        stream,
        options,
        n,
        tool_call,
    } = read(endpoint, body, config)?;
    if let Some(name) = model {
        if name != config.model {
            return Err(ApiError::not_found(format!(
                "The model `{name}` does not exist; this server serves `{}`.",
                config.model
            )));
        }
    }
    if n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request(
            "only n = 1 is supported by the simulated server",
        ));
    }
    let max_tokens = max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let max_tokens = usize::try_from(max_tokens)
        .ok()
        .filter(|&m| m >= 1)
        .ok_or_else(|| {
            ApiError::bad_request(format!("max_tokens must be at least 1, got {max_tokens}"))
        })?;
    let options = options.unwrap_or_default();
    let include_usage = options.include_usage.unwrap_or(false);
    Ok(Job {
        prompt_tokens,
        max_tokens,
        stream: stream.unwrap_or(false),
        include_usage,
        continuous_usage: include_usage && options.continuous_usage_stats.unwrap_or(false),
        // A tool call is the whole answer: no reasoning before it.
        reasoning_tokens: match endpoint {
            GenerationEndpoint::Chat if tool_call.is_none() => config.reasoning_tokens,
            _ => 0,
        },
        blocks,
        tool_call,
        text_seed: body_seed(body),
    })
}

/// FNV-1a over the body: cheap, and the same on every run and machine.
fn body_seed(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A string, an array of token ids, or an array holding one of those.
fn prompt_tokens(prompt: &Value, config: &SimConfig) -> Result<(usize, PromptBlocks), ApiError> {
    let empty = || ApiError::bad_request("the prompt must not be empty");
    let text = |s: &str| match s {
        "" => Err(empty()),
        s => Ok((config.count_prompt_tokens(s), PromptBlocks::of_text(s))),
    };
    let ids = |items: &[Value]| match items {
        [] => Err(empty()),
        items if items.iter().all(|v| v.as_u64().is_some()) => {
            let ids: Vec<u64> = items.iter().filter_map(Value::as_u64).collect();
            Ok((items.len(), PromptBlocks::of_ids(&ids)))
        }
        _ => Err(ApiError::bad_request(
            "token ids in `prompt` must be non-negative integers",
        )),
    };
    match prompt {
        Value::String(s) => text(s),
        Value::Array(items) => match items.as_slice() {
            [Value::String(s)] => text(s),
            [Value::Array(inner)] => ids(inner),
            // Several prompts in one request (vLLM answers with one choice per prompt).
            [_, _, ..] if items.iter().all(|v| v.is_string() || v.is_array()) => Err(
                ApiError::bad_request("batched prompts are not supported by the simulated server"),
            ),
            items => ids(items),
        },
        _ => Err(ApiError::bad_request(
            "`prompt` must be a string, an array of token ids, or an array of one string",
        )),
    }
}

/// The counter over all message contents concatenated, plus 4 template tokens per message.
fn chat_prompt_tokens(
    messages: &Value,
    config: &SimConfig,
) -> Result<(usize, PromptBlocks), ApiError> {
    let messages = messages
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::bad_request("`messages` must be a non-empty array"))?;
    let mut text = String::new();
    for message in messages {
        let message = message.as_object().ok_or_else(|| {
            ApiError::bad_request("each message must be an object with `role` and `content`")
        })?;
        match message.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => text.push_str(s),
            // Content parts: text, and the text of tool results and calls, carry tokens.
            Some(Value::Array(parts)) => {
                for part in parts {
                    push_part_text(part, &mut text);
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    "message `content` must be a string or an array of parts",
                ))
            }
        }
        push_tool_history(message, &mut text);
    }
    let tokens = config.count_prompt_tokens(&text) + 4 * messages.len();
    Ok((tokens, PromptBlocks::of_text(&text)))
}

/// The text of one content part: a text part's text, an Anthropic `tool_result`'s
/// content, a `tool_use` block's input.
fn push_part_text(part: &Value, text: &mut String) {
    if let Some(t) = part.get("text").and_then(Value::as_str) {
        text.push_str(t);
    } else if let Some(t) = part.get("content").and_then(Value::as_str) {
        text.push_str(t);
    } else if let Some(input) = part.get("input").filter(|i| i.is_object()) {
        text.push_str(&input.to_string());
    }
}

/// The tool history a message carries beside its content: a chat assistant's call
/// arguments, a Responses `function_call`'s arguments or `function_call_output`'s output.
fn push_tool_history(message: &serde_json::Map<String, Value>, text: &mut String) {
    let calls = message.get("tool_calls").and_then(Value::as_array);
    for call in calls.into_iter().flatten() {
        if let Some(a) = call.pointer("/function/arguments").and_then(Value::as_str) {
            text.push_str(a);
        }
    }
    for key in ["arguments", "output"] {
        if let Some(t) = message.get(key).and_then(Value::as_str) {
            text.push_str(t);
        }
    }
}

/// Formats the responses of one request. Builds JSON by hand around a pre-escaped header so
/// that a chunk costs one small allocation (the server shares the CPU with the client).
pub struct Writer {
    endpoint: GenerationEndpoint,
    /// `{"id":..,"object":..,"created":..,"model":..,` ready to be followed by `"choices"`.
    head: String,
    seed: u64,
    emitted: usize,
    /// Prompt tokens found in the prefix cache, where the timing model has one.
    cached: Option<usize>,
    job: Job,
}

impl Writer {
    /// `model_json` is the model name already encoded as a JSON string.
    pub fn new(
        endpoint: GenerationEndpoint,
        job: &Job,
        id: u64,
        created: u64,
        model_json: &str,
    ) -> Writer {
        let (prefix, object) = match (endpoint, job.stream) {
            (GenerationEndpoint::Completions, _) => ("cmpl", "text_completion"),
            (GenerationEndpoint::Chat, true) => ("chatcmpl", "chat.completion.chunk"),
            (GenerationEndpoint::Chat, false) => ("chatcmpl", "chat.completion"),
        };
        let head = format!(
            r#"{{"id":"{prefix}-{id}","object":"{object}","created":{created},"model":{model_json},"#
        );
        Writer {
            endpoint,
            head,
            seed: job.text_seed,
            emitted: 0,
            cached: None,
            job: job.clone(),
        }
    }

    /// The chat role-only delta sent on admission; completions have none.
    pub fn role_chunk(&self) -> Option<Bytes> {
        (self.endpoint == GenerationEndpoint::Chat).then(|| {
            sse(format!(
                r#"{}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}"#,
                self.head
            ))
        })
    }

    /// One SSE event with the next `tokens` tokens; the one reaching max_tokens finishes.
    /// In chat, tokens before `reasoning_tokens` go in `reasoning_content` (a chunk that
    /// crosses the boundary carries both fields).
    pub fn content_chunk(&mut self, tokens: usize) -> Bytes {
        let first = self.emitted;
        self.emitted += tokens;
        let finish = self.finish_reason();
        let usage = if self.job.continuous_usage {
            format!(r#","usage":{}"#, self.usage())
        } else {
            String::new()
        };
        sse(match self.endpoint {
            GenerationEndpoint::Completions => {
                let mut text = String::with_capacity(8 * tokens);
                words::push_tokens(&mut text, self.seed, first, tokens);
                format!(
                    r#"{}"choices":[{{"index":0,"text":"{text}","logprobs":null,"finish_reason":{finish}}}]{usage}}}"#,
                    self.head
                )
            }
            GenerationEndpoint::Chat if self.job.tool_call.is_some() => {
                let delta = self.tool_delta(first);
                format!(
                    r#"{}"choices":[{{"index":0,"delta":{{{delta}}},"logprobs":null,"finish_reason":{finish}}}]{usage}}}"#,
                    self.head
                )
            }
            GenerationEndpoint::Chat => {
                let split = self.job.reasoning_tokens.clamp(first, self.emitted);
                let mut delta = String::with_capacity(8 * tokens + 32);
                if split > first {
                    delta.push_str(r#""reasoning_content":""#);
                    words::push_tokens(&mut delta, self.seed, first, split - first);
                    delta.push('"');
                }
                if self.emitted > split || tokens == 0 {
                    if !delta.is_empty() {
                        delta.push(',');
                    }
                    delta.push_str(r#""content":""#);
                    words::push_tokens(&mut delta, self.seed, split, self.emitted - split);
                    delta.push('"');
                }
                format!(
                    r#"{}"choices":[{{"index":0,"delta":{{{delta}}},"logprobs":null,"finish_reason":{finish}}}]{usage}}}"#,
                    self.head
                )
            }
        })
    }

    /// The tool call's delta of tokens `first..emitted`: the first opens the call (index,
    /// id, type, name) as OpenAI's does, every one carries its piece of the arguments.
    fn tool_delta(&self, first: usize) -> String {
        let Some(call) = &self.job.tool_call else {
            return String::new();
        };
        let piece = call.arguments(first, self.emitted - first, self.job.max_tokens);
        let arguments = tool::json_string(&piece);
        if first == 0 {
            format!(
                r#""tool_calls":[{{"index":0,"id":"{}","type":"function","function":{{"name":{},"arguments":{arguments}}}}}]"#,
                call.id,
                call.name_json()
            )
        } else {
            format!(r#""tool_calls":[{{"index":0,"function":{{"arguments":{arguments}}}}}]"#)
        }
    }

    /// The `include_usage` event: no choices, token counts so far.
    pub fn usage_chunk(&self) -> Bytes {
        sse(format!(
            r#"{}"choices":[],"usage":{}}}"#,
            self.head,
            self.usage()
        ))
    }

    /// Count tokens generated for a non-streaming response.
    pub fn add_tokens(&mut self, tokens: usize) {
        self.emitted += tokens;
    }

    /// The whole non-streaming response body.
    pub fn full_response(&self) -> String {
        let reasoning = self.job.reasoning_tokens.min(self.emitted);
        let mut text = String::with_capacity(8 * self.emitted);
        words::push_tokens(&mut text, self.seed, reasoning, self.emitted - reasoning);
        let finish = self.finish_reason();
        let usage = self.usage();
        match self.endpoint {
            GenerationEndpoint::Completions => format!(
                r#"{}"choices":[{{"index":0,"text":"{text}","logprobs":null,"finish_reason":{finish},"stop_reason":null}}],"usage":{usage}}}"#,
                self.head
            ),
            GenerationEndpoint::Chat if self.job.tool_call.is_some() => format!(
                r#"{}"choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{}]}},"logprobs":null,"finish_reason":{finish}}}],"usage":{usage}}}"#,
                self.head,
                self.whole_call()
            ),
            GenerationEndpoint::Chat => {
                // As vLLM with a reasoning parser: no content is null, not "".
                let content = if reasoning > 0 && text.is_empty() {
                    "null".to_string()
                } else {
                    format!(r#""{text}""#)
                };
                let mut message = String::from(r#""role":"assistant","#);
                if reasoning > 0 {
                    message.push_str(r#""reasoning_content":""#);
                    words::push_tokens(&mut message, self.seed, 0, reasoning);
                    message.push_str("\",");
                }
                format!(
                    r#"{}"choices":[{{"index":0,"message":{{{message}"content":{content}}},"logprobs":null,"finish_reason":{finish}}}],"usage":{usage}}}"#,
                    self.head
                )
            }
        }
    }

    /// The whole tool call of a non-streamed answer, as one `tool_calls` entry.
    fn whole_call(&self) -> String {
        let Some(call) = &self.job.tool_call else {
            return String::new();
        };
        let arguments = call.arguments(0, self.emitted, self.job.max_tokens);
        format!(
            r#"{{"id":"{}","type":"function","function":{{"name":{},"arguments":{}}}}}"#,
            call.id,
            call.name_json(),
            tool::json_string(&arguments)
        )
    }

    fn finish_reason(&self) -> &'static str {
        // The model never stops early, so the only finish is the length limit, or the
        // end of its tool call (whose arguments close on the last token).
        match (self.emitted >= self.job.max_tokens, &self.job.tool_call) {
            (true, Some(_)) => r#""tool_calls""#,
            (true, None) => r#""length""#,
            (false, _) => "null",
        }
    }

    /// The prompt tokens the engine found in its prefix cache.
    pub fn cached(&mut self, cached: Option<usize>) {
        self.cached = cached;
    }

    /// Token counts, and the cached prompt tokens as vLLM gives them with
    /// `--enable-prompt-tokens-details` (and llama.cpp always).
    fn usage(&self) -> String {
        let (p, c) = (self.job.prompt_tokens, self.emitted);
        let details = self.cached.map_or_else(String::new, |n| {
            format!(r#","prompt_tokens_details":{{"cached_tokens":{n}}}"#)
        });
        format!(
            r#"{{"prompt_tokens":{p},"completion_tokens":{c},"total_tokens":{}{details}}}"#,
            p + c
        )
    }
}

/// The final SSE event.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

fn sse(json: String) -> Bytes {
    let mut event = String::with_capacity(json.len() + 8);
    event.push_str("data: ");
    event.push_str(&json);
    event.push_str("\n\n");
    Bytes::from(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(body: &str, endpoint: GenerationEndpoint) -> Result<Job, ApiError> {
        parse(endpoint, body.as_bytes(), &SimConfig::default())
    }

    fn status(body: &str, endpoint: GenerationEndpoint) -> u16 {
        job(body, endpoint).map_or_else(|e| e.status.as_u16(), |_| 200)
    }

    #[test]
    fn prompts_of_every_shape_are_counted() {
        let c = GenerationEndpoint::Completions;
        assert_eq!(
            job(r#"{"prompt":"abcdefgh"}"#, c)
                .map(|j| j.prompt_tokens)
                .ok(),
            Some(2)
        );
        assert_eq!(
            job(r#"{"prompt":[1,2,3]}"#, c)
                .map(|j| j.prompt_tokens)
                .ok(),
            Some(3)
        );
        assert_eq!(
            job(r#"{"prompt":["abcde"]}"#, c)
                .map(|j| j.prompt_tokens)
                .ok(),
            Some(2)
        );
        assert_eq!(
            job(r#"{"prompt":[[5,6]]}"#, c)
                .map(|j| j.prompt_tokens)
                .ok(),
            Some(2)
        );
        let j = job(
            r#"{"prompt":"x","max_tokens":7,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}"#,
            c,
        )
        .expect("valid");
        assert_eq!((j.max_tokens, j.stream, j.include_usage), (7, true, true));
        assert_eq!(
            job(r#"{"prompt":"x"}"#, c).map(|j| j.max_tokens).ok(),
            Some(16)
        );
    }

    #[test]
    fn chat_counts_contents_plus_four_per_message() {
        let body = r#"{"messages":[{"role":"system","content":"abcd"},
            {"role":"user","content":[{"type":"text","text":"efgh"}]}],"max_completion_tokens":3,"max_tokens":9}"#;
        let j = job(body, GenerationEndpoint::Chat).expect("valid");
        assert_eq!((j.prompt_tokens, j.max_tokens), (2 + 8, 3));
    }

    #[test]
    fn bad_requests_are_rejected() {
        let c = GenerationEndpoint::Completions;
        assert_eq!(status("{", c), 400);
        assert_eq!(status("{}", c), 400);
        assert_eq!(status(r#"{"prompt":""}"#, c), 400);
        assert_eq!(status(r#"{"prompt":["a","b"]}"#, c), 400);
        assert_eq!(status(r#"{"prompt":[1,-2]}"#, c), 400);
        assert_eq!(status(r#"{"prompt":"a","max_tokens":0}"#, c), 400);
        assert_eq!(status(r#"{"prompt":"a","n":2}"#, c), 400);
        assert_eq!(status(r#"{"prompt":"a","model":"other"}"#, c), 404);
        assert_eq!(status(r#"{"prompt":"a","model":"sim/llm-9b"}"#, c), 200);
        assert_eq!(status(r#"{"messages":[]}"#, GenerationEndpoint::Chat), 400);
        assert_eq!(status(r#"{"prompt":"a"}"#, GenerationEndpoint::Chat), 400);
    }

    #[test]
    fn chunks_are_valid_json_and_finish_on_the_last() {
        let j = Job {
            prompt_tokens: 3,
            max_tokens: 3,
            stream: true,
            include_usage: true,
            continuous_usage: false,
            reasoning_tokens: 0,
            blocks: PromptBlocks::default(),
            tool_call: None,
            // The words from index 1, as the expected texts below read.
            text_seed: 1,
        };
        let mut w = Writer::new(GenerationEndpoint::Chat, &j, 1, 2, r#""m\"x""#);
        let parse = |b: Bytes| -> Value {
            let s = std::str::from_utf8(&b).expect("utf8").to_string();
            let json = s
                .strip_prefix("data: ")
                .and_then(|s| s.strip_suffix("\n\n"))
                .expect("framed");
            serde_json::from_str(json).expect("json")
        };
        let role = parse(w.role_chunk().expect("chat has a role chunk"));
        assert_eq!(role["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(role["model"], "m\"x");
        let first = parse(w.content_chunk(2));
        assert_eq!(first["choices"][0]["finish_reason"], Value::Null);
        let last = parse(w.content_chunk(1));
        assert_eq!(last["choices"][0]["finish_reason"], "length");
        assert_eq!(parse(w.usage_chunk())["usage"]["total_tokens"], 6);
        let full: Value = serde_json::from_str(&w.full_response()).expect("json");
        assert_eq!(full["choices"][0]["message"]["content"], " of and to");
    }

    #[test]
    fn reasoning_comes_first_and_usage_can_be_continuous() {
        let body = r#"{"messages":[{"role":"user","content":"abcd"}],"max_tokens":5,"stream":true,
            "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
        let config = SimConfig {
            reasoning_tokens: 3,
            ..SimConfig::default()
        };
        let mut j = parse(GenerationEndpoint::Chat, body.as_bytes(), &config).expect("valid");
        // The words from index 1, as the expected texts below read (a body's own seed is
        // its hash).
        j.text_seed = 1;
        assert_eq!((j.continuous_usage, j.reasoning_tokens), (true, 3));
        let c = parse(
            GenerationEndpoint::Completions,
            br#"{"prompt":"x"}"#,
            &config,
        )
        .expect("valid");
        assert_eq!((c.continuous_usage, c.reasoning_tokens), (false, 0));
        let mut w = Writer::new(GenerationEndpoint::Chat, &j, 1, 2, r#""m""#);
        let parse = |b: Bytes| -> Value {
            let s = std::str::from_utf8(&b).expect("utf8").to_string();
            serde_json::from_str(s.trim_start_matches("data: ").trim_end()).expect("json")
        };
        let first = parse(w.content_chunk(2));
        assert_eq!(
            first["choices"][0]["delta"],
            serde_json::json!({"reasoning_content": " of and"})
        );
        assert_eq!(first["usage"]["completion_tokens"], 2);
        let mixed = parse(w.content_chunk(2));
        assert_eq!(
            mixed["choices"][0]["delta"],
            serde_json::json!({"reasoning_content": " to", "content": " in"})
        );
        assert_eq!(mixed["usage"]["total_tokens"], 5 + 4);
        let last = parse(w.content_chunk(1));
        assert_eq!(last["choices"][0]["delta"]["content"], " is");
        let full: Value = serde_json::from_str(&w.full_response()).expect("json");
        let message = &full["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], " of and to");
        assert_eq!(message["content"], " in is");
    }
}
