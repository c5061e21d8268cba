//! The OpenAI-compatible client: request bodies, one streamed exchange with timestamps,
//! and the checks made before a run (health, model list, one test request).

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::watch;

use super::sse::SseParser;
use crate::metrics::record::{ErrorKind, RequestError};
use crate::scenario::{Prompt, RequestSpec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `/v1/completions`
    Completions,
    /// `/v1/chat/completions`
    Chat,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat",
        }
    }

    /// vLLM's `--backend` name for this endpoint, used in result JSON.
    pub fn backend(self) -> &'static str {
        match self {
            Api::Completions => "openai",
            Api::Chat => "openai-chat",
        }
    }
}

/// A request ready to send: the body is built off the I/O path, on the scenario thread.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub api: Api,
    pub body: Bytes,
    pub stream: bool,
}

/// How to ask for token usage in a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageRequest {
    /// Ask for nothing (for servers that reject `stream_options`).
    None,
    /// `stream_options.include_usage`: one usage report at the end.
    Final,
    /// Also vLLM's `continuous_usage_stats`: cumulative usage on every chunk.
    Continuous,
}

/// Builds the JSON body. `messages` always go to the chat endpoint; a plain prompt goes to
/// the run's `--api` (wrapped as one user message for chat).
pub fn prepare(
    spec: &RequestSpec,
    api: Api,
    model: &str,
    usage: UsageRequest,
) -> Result<Prepared, String> {
    use serde_json::{json, Value};
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(model));
    let api =
        match (&spec.prompt, api) {
            (Prompt::Messages(_), _) => Api::Chat,
            (Prompt::Tokens(_), Api::Chat) => return Err(
                "a prompt of token ids can only be sent to /v1/completions; use --api completions"
                    .into(),
            ),
            (_, api) => api,
        };
    match (&spec.prompt, api) {
        (Prompt::Text(t), Api::Completions) => body.insert("prompt".into(), json!(t)),
        (Prompt::Tokens(ids), _) => body.insert("prompt".into(), json!(ids)),
        (Prompt::Text(t), Api::Chat) => {
            body.insert("messages".into(), json!([{"role": "user", "content": t}]))
        }
        (Prompt::Messages(m), _) => body.insert("messages".into(), Value::Array(m.clone())),
    };
    // The names vLLM's benchmark client uses for each endpoint.
    let max_key = if api == Api::Chat {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(max_key.into(), json!(spec.max_tokens));
    body.insert("stream".into(), json!(spec.stream));
    match (spec.stream, usage) {
        (true, UsageRequest::Final) => {
            body.insert("stream_options".into(), json!({"include_usage": true}))
        }
        (true, UsageRequest::Continuous) => body.insert(
            "stream_options".into(),
            json!({"include_usage": true, "continuous_usage_stats": true}),
        ),
        _ => None,
    };
    if spec.ignore_eos {
        body.insert("ignore_eos".into(), json!(true));
    }
    for (k, v) in &spec.extra {
        body.insert(k.clone(), v.clone());
    }
    let bytes = serde_json::to_vec(&Value::Object(body)).map_err(|e| e.to_string())?;
    Ok(Prepared {
        api,
        body: Bytes::from(bytes),
        stream: spec.stream,
    })
}

/// What one request saw on the wire, timed with the monotonic clock.
#[derive(Debug)]
pub struct Exchange {
    pub status: Option<u16>,
    pub first_byte: Option<Instant>,
    /// Content chunks: arrival time, the byte range of their text in `text`, and the
    /// cumulative completion tokens when the server reports usage on every chunk.
    pub chunks: Vec<(Instant, usize, usize, Option<u64>)>,
    pub text: String,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub error: Option<RequestError>,
    pub end: Instant,
}

impl Exchange {
    fn new() -> Exchange {
        Exchange {
            status: None,
            first_byte: None,
            chunks: Vec::new(),
            text: String::new(),
            prompt_tokens: None,
            completion_tokens: None,
            error: None,
            end: Instant::now(),
        }
    }

    fn fail(&mut self, kind: ErrorKind, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(RequestError {
                kind,
                message: message.into(),
            });
        }
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Non-streaming chat responses.
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<serde::de::IgnoredAny>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl Exchange {
    /// Handles one JSON message (an SSE event or a whole non-streaming body). Generated
    /// content is text, reasoning or a tool call; a role-only delta is not content.
    fn message(&mut self, data: &[u8], at: Instant) {
        let msg: Message = match serde_json::from_slice(data) {
            Ok(m) => m,
            Err(e) => {
                let head = String::from_utf8_lossy(&data[..data.len().min(120)]).into_owned();
                return self.fail(
                    ErrorKind::MalformedStream,
                    format!("not an OpenAI JSON message ({e}): {head}"),
                );
            }
        };
        if let Some(err) = msg.error {
            let text = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return self.fail(
                ErrorKind::MalformedStream,
                format!("error in the response: {text}"),
            );
        }
        let cumulative = msg.usage.as_ref().and_then(|u| u.completion_tokens);
        if let Some(u) = msg.usage {
            self.prompt_tokens = u.prompt_tokens.or(self.prompt_tokens);
            self.completion_tokens = u.completion_tokens.or(self.completion_tokens);
        }
        let Some(choice) = msg.choices.as_ref().and_then(|c| c.first()) else {
            return;
        };
        let start = self.text.len();
        let mut content = false;
        if let Some(t) = &choice.text {
            content |= !t.is_empty();
            self.text.push_str(t);
        }
        for d in [&choice.delta, &choice.message].into_iter().flatten() {
            for part in [&d.reasoning_content, &d.reasoning, &d.content]
                .into_iter()
                .flatten()
            {
                content |= !part.is_empty();
                self.text.push_str(part);
            }
            content |= d.tool_calls.as_ref().is_some_and(|t| !t.is_empty());
        }
        if content {
            self.chunks.push((at, start, self.text.len(), cumulative));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach the target at {url}: {reason}. Is the server running, and is --target right?"
    )]
    Unreachable { url: String, reason: String },
    #[error("the target at {url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url} did not return an OpenAI model list ({reason}); is this an OpenAI-compatible server? Give the model with --model")]
    NoModels { url: String, reason: String },
    #[error("the test request to {url} failed: {reason}")]
    TestRequest { url: String, reason: String },
    #[error("invalid target URL `{0}`: expected e.g. http://127.0.0.1:8000")]
    BadUrl(String),
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    timeout: Duration,
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

impl Client {
    /// `target` is the server's base URL, with or without a trailing `/v1`.
    pub fn new(
        target: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let trimmed = target.trim().trim_end_matches('/');
        let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string();
        let url =
            reqwest::Url::parse(&base).map_err(|_| ClientError::BadUrl(target.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(ClientError::BadUrl(target.to_string()));
        }
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| ClientError::Build(chain(&e)))?;
        Ok(Client {
            http,
            base,
            api_key,
            timeout,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, api: Api) -> String {
        match api {
            Api::Completions => format!("{}/v1/completions", self.base),
            Api::Chat => format!("{}/v1/chat/completions", self.base),
        }
    }

    /// Sends one request and times every content chunk; never fails: errors are data.
    pub async fn execute(&self, p: &Prepared, cancel: &mut watch::Receiver<bool>) -> Exchange {
        let mut ex = Exchange::new();
        let interrupted = {
            let run = self.exchange(p, &mut ex);
            tokio::pin!(run);
            tokio::select! {
                _ = &mut run => None,
                _ = tokio::time::sleep(self.timeout) => Some((ErrorKind::Timeout, format!("no complete response within {:?}", self.timeout))),
                _ = cancel.wait_for(|c| *c) => Some((ErrorKind::Cancelled, "the run stopped before the request finished".to_string())),
            }
        };
        if let Some((kind, message)) = interrupted {
            ex.fail(kind, message);
        }
        ex.end = Instant::now();
        if ex.error.is_none() && ex.chunks.is_empty() {
            ex.fail(
                ErrorKind::EmptyCompletion,
                "the response carried no generated content",
            );
        }
        ex
    }

    async fn exchange(&self, p: &Prepared, ex: &mut Exchange) {
        let mut req = self
            .http
            .post(self.url(p.api))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(p.body.clone());
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let mut resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let kind = if e.is_connect() {
                    ErrorKind::Connect
                } else {
                    ErrorKind::Disconnect
                };
                return ex.fail(kind, chain(&e));
            }
        };
        let status = resp.status();
        ex.status = Some(status.as_u16());
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            return ex.fail(
                ErrorKind::HttpStatus,
                format!("HTTP {}: {}", status.as_u16(), body.trim()),
            );
        }
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut parser = SseParser::default();
        let mut whole = Vec::new();
        let mut done = false;
        loop {
            match resp.chunk().await {
                Ok(Some(bytes)) => {
                    // Timestamp at read, before any parsing.
                    let now = Instant::now();
                    ex.first_byte.get_or_insert(now);
                    if !is_sse {
                        whole.extend_from_slice(&bytes);
                        continue;
                    }
                    parser.push(&bytes, |event| {
                        if event == b"[DONE]" {
                            done = true;
                        } else if !done && ex.error.is_none() {
                            ex.message(event, now);
                        }
                    });
                    if ex.error.is_some() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return ex.fail(
                        ErrorKind::Disconnect,
                        format!("the response broke off: {}", chain(&e)),
                    )
                }
            }
        }
        if is_sse {
            let now = Instant::now();
            parser.finish(|event| {
                if event != b"[DONE]" && !done {
                    ex.message(event, now);
                }
            });
        } else {
            // A whole JSON body: one chunk, at the time the body ended.
            ex.message(&whole, Instant::now());
        }
    }

    /// Health check, model discovery and one test request, as `vllm bench serve` does
    /// before a run. Returns the model to use.
    pub async fn preflight(
        &self,
        model: Option<&str>,
        api: Api,
        usage: UsageRequest,
    ) -> Result<String, ClientError> {
        let health = format!("{}/health", self.base);
        match self
            .http
            .get(&health)
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Err(e) => {
                return Err(ClientError::Unreachable {
                    url: self.base.clone(),
                    reason: chain(&e),
                })
            }
            Ok(r) if r.status().is_server_error() => {
                let status = r.status().as_u16();
                let body = r
                    .text()
                    .await
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                return Err(ClientError::Status {
                    url: health,
                    status,
                    body,
                });
            }
            // 404 and friends: not every OpenAI-compatible server has /health.
            Ok(_) => {}
        }
        let model = match model {
            Some(m) => m.to_string(),
            None => self.first_model().await?,
        };
        let spec = RequestSpec {
            prompt: if api == Api::Chat {
                Prompt::Messages(vec![
                    serde_json::json!({"role": "user", "content": "Hello"}),
                ])
            } else {
                Prompt::Text("Hello".into())
            },
            max_tokens: 4,
            ignore_eos: false,
            stream: true,
            extra: Default::default(),
            tag: None,
            session: None,
            at: None,
            delay: None,
            input_tokens: None,
        };
        // Asks for usage as the run will, so a server that rejects it fails here.
        let prepared =
            prepare(&spec, api, &model, usage).map_err(|reason| ClientError::TestRequest {
                url: self.url(api),
                reason,
            })?;
        let (_tx, mut never) = watch::channel(false);
        let ex = self.execute(&prepared, &mut never).await;
        if let Some(err) = ex.error {
            return Err(ClientError::TestRequest {
                url: self.url(api),
                reason: err.message,
            });
        }
        Ok(model)
    }

    async fn first_model(&self) -> Result<String, ClientError> {
        let url = format!("{}/v1/models", self.base);
        let mut req = self.http.get(&url).timeout(Duration::from_secs(30));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(&e),
        })?;
        let status = resp.status();
        let body = resp.bytes().await.unwrap_or_default();
        if !status.is_success() {
            let reason = format!("HTTP {}", status.as_u16());
            return Err(ClientError::NoModels { url, reason });
        }
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| ClientError::NoModels {
                url: url.clone(),
                reason: "the body is not JSON".into(),
            })?;
        value
            .get("data")
            .and_then(|d| d.as_array())
            .and_then(|d| d.first())
            .and_then(|m| m.get("id"))
            .and_then(|id| id.as_str())
            .map(str::to_string)
            .ok_or(ClientError::NoModels {
                url,
                reason: "no `data[0].id` in the answer".into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prompt: Prompt) -> RequestSpec {
        RequestSpec {
            prompt,
            max_tokens: 8,
            ignore_eos: true,
            stream: true,
            extra: serde_json::Map::from_iter([(
                "temperature".to_string(),
                serde_json::json!(0.0),
            )]),
            tag: None,
            session: None,
            at: None,
            delay: None,
            input_tokens: None,
        }
    }

    #[test]
    fn bodies_follow_vllm_field_names() {
        let p = prepare(
            &spec(Prompt::Text("hi".into())),
            Api::Completions,
            "m",
            UsageRequest::Final,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(v["prompt"], "hi");
        assert_eq!(v["max_tokens"], 8);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["temperature"], 0.0);
        let p = prepare(
            &spec(Prompt::Text("hi".into())),
            Api::Chat,
            "m",
            UsageRequest::Continuous,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(v["messages"][0]["content"], "hi");
        assert_eq!(v["max_completion_tokens"], 8);
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
        assert!(prepare(
            &spec(Prompt::Tokens(vec![1, 2])),
            Api::Chat,
            "m",
            UsageRequest::None
        )
        .is_err());
    }

    #[test]
    fn role_only_delta_is_not_content_but_reasoning_is() {
        let mut ex = Exchange::new();
        let t = Instant::now();
        ex.message(
            br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            t,
        );
        assert!(ex.chunks.is_empty());
        ex.message(
            br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            t,
        );
        ex.message(br#"{"choices":[{"delta":{"content":" hi"}}]}"#, t);
        ex.message(br#"{"choices":[{"delta":{"tool_calls":[{"id":"x"}]}}]}"#, t);
        ex.message(
            br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            t,
        );
        assert_eq!(ex.chunks.len(), 3);
        assert_eq!(ex.text, "think hi");
        assert_eq!((ex.prompt_tokens, ex.completion_tokens), (Some(3), Some(4)));
    }

    #[test]
    fn error_objects_and_garbage_are_malformed_stream_errors() {
        let mut ex = Exchange::new();
        ex.message(br#"{"error":{"message":"overloaded"}}"#, Instant::now());
        let e = ex.error.unwrap();
        assert_eq!(e.kind, ErrorKind::MalformedStream);
        assert!(e.message.contains("overloaded"));
        let mut ex = Exchange::new();
        ex.message(b"<html>", Instant::now());
        assert_eq!(ex.error.unwrap().kind, ErrorKind::MalformedStream);
    }
}
