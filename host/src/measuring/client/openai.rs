//! The OpenAI-compatible client: request bodies, one streamed exchange with timestamps,
//! and the checks made before a run (health, model list, one test request).

use crate::both_sides::clock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http_body_util::Full;
use tokio::sync::watch;

use super::cancel::RequestExtras;
use super::error_body;
use super::exchange::Exchange;
use super::headers::{self, HeaderError};
use super::stream::BodyDecoder;
use super::trace_context::{TraceId, TraceParent};
use super::transport::{self, ReadArrival, ReceiveClock, TimedResponse, Transport};
use crate::both_sides::wire::{REQUEST_ID, TRACEPARENT};
use crate::measuring::metrics::record::ErrorKind;
use crate::safeguards::display::escape_control;
use crate::safeguards::redact::Redactor;
use crate::workloads::scenario::{Prompt, RequestSpec};

pub use super::api::{Api, UsageRequest};

/// A request ready to send: the body is built off the I/O path, on the scenario thread.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub api: Api,
    pub body: Bytes,
    pub stream: bool,
}

/// Builds the JSON body for the API the request goes to ([`Api::for_prompt`]): the run's
/// `--api`, except that chat messages on a completions run go to chat.
pub fn prepare(
    spec: &RequestSpec,
    api: Api,
    model: &str,
    usage: UsageRequest,
) -> Result<Prepared, String> {
    let api = api.for_prompt(&spec.prompt)?;
    let mut body = api.body(spec, model, usage)?;
    for (k, v) in &spec.extra {
        if let Some(why) = super::api::owned_field(k, &body) {
            return Err(why);
        }
        body.insert(k.clone(), v.clone());
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    Ok(Prepared {
        api,
        body: Bytes::from(bytes),
        // Embeddings are never streamed.
        stream: spec.stream && api.generates(),
    })
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
    #[error("{url} answered HTTP 404: no OpenAI API under this base path; check the path of --target (the runner adds /v1/models itself: e.g. http://HOST:PORT or http://HOST:PORT/v1, or a proxy's own prefix)")]
    ModelsNotFound { url: String },
    #[error(
        "cannot reach the target at {url}: the server answered in plain HTTP, not TLS; use {plain}"
    )]
    PlainHttp { url: String, plain: String },
    #[error("the test request to {url} failed: {reason}")]
    TestRequest { url: String, reason: String },
    #[error("invalid target URL `{0}`: expected e.g. http://127.0.0.1:8000")]
    BadUrl(String),
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
    #[error("--request-id-prefix `{0}` cannot start an HTTP header value: use visible ASCII characters without spaces")]
    BadRequestIdPrefix(String),
    #[error("the API key cannot be sent in an HTTP header: use visible ASCII characters")]
    BadApiKey,
    #[error("cannot build the HTTP client: {0}")]
    Tls(#[from] transport::TlsError),
}

/// The longest a TCP connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one request may take.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// The whole request, from send to the end of the body.
    pub request: Duration,
    /// From send to the first generated content (or an error status); `None`: no limit
    /// besides `request`.
    pub first_token: Option<Duration>,
}

#[derive(Clone)]
pub struct Client {
    /// The untimed calls: health and the model list.
    http: reqwest::Client,
    /// The timed requests, on connections that log their reads' and writes' times.
    transport: Transport,
    base: String,
    api_key: Option<String>,
    /// The API key and the target's credentials, hidden in everything this client reports.
    redactor: Redactor,
    timeouts: Timeouts,
    /// Starts every request's `x-request-id`.
    request_id_prefix: String,
    /// `--header`s, sent with every request.
    headers: reqwest::header::HeaderMap,
    /// The run's trace: each request is sent as a new span of it (`traceparent`).
    trace: TraceId,
}

/// An error with its causes, each said once: `error sending request: connection refused`.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
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

/// A header value that hides itself in hyper's debug output; `None` if it cannot be sent
/// (checked when the client is built).
fn secret_value(text: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(text).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// `headers` with the API key where `api` expects it: Anthropic's Messages in `x-api-key`
/// beside its `anthropic-version`, the OpenAI APIs as a bearer token.
fn authorize(headers: &mut HeaderMap, api: Api, key: Option<&str>) {
    if api == Api::Messages {
        let version = super::api::messages::ANTHROPIC_VERSION;
        headers.insert("anthropic-version", HeaderValue::from_static(version));
    }
    let value = match (api, key) {
        (_, None) => return,
        (Api::Messages, Some(key)) => secret_value(key).map(|v| ("x-api-key", v)),
        (_, Some(key)) => secret_value(&format!("Bearer {key}")).map(|v| ("authorization", v)),
    };
    if let Some((name, value)) = value {
        headers.insert(name, value);
    }
}

/// `extra` over `headers`: each of its names replaces every value `headers` had.
fn override_headers(headers: &mut HeaderMap, extra: &HeaderMap) {
    for name in extra.keys() {
        headers.remove(name);
    }
    for (name, value) in extra {
        headers.append(name, value.clone());
    }
}

/// The most of an error body read for its message.
const ERROR_BODY_BYTES: usize = 4096;

/// A response header's value as text (bytes that are not UTF-8 replaced).
fn header_text(headers: &HeaderMap, name: http::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The client's own delay on the chunks `ex` gained from one piece of the body.
fn stamp_delay(ex: &mut Exchange, from: usize, arrival: ReadArrival) {
    for chunk in ex.chunks.iter_mut().skip(from) {
        chunk.read_delay = arrival.delay;
    }
}

/// An error response of either HTTP stack, read for its message.
enum ErrorResponse<'a> {
    Timed(&'a mut TimedResponse),
    Untimed(&'a mut reqwest::Response),
}

impl ErrorResponse<'_> {
    fn headers(&self) -> &HeaderMap {
        match self {
            ErrorResponse::Timed(r) => r.headers(),
            ErrorResponse::Untimed(r) => r.headers(),
        }
    }

    /// The next piece of the body; `Err` when it broke off.
    async fn piece(&mut self) -> Result<Option<Bytes>, ()> {
        match self {
            ErrorResponse::Timed(r) => r.chunk().await.map(|c| c.map(|(b, _)| b)).map_err(drop),
            ErrorResponse::Untimed(r) => r.chunk().await.map_err(drop),
        }
    }
}

/// What a server's error body may say, on one line and not too long.
fn excerpt(body: &str) -> String {
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.chars().take(300).collect()
}

impl Client {
    /// `target` is the server's base URL, with or without a trailing `/v1`.
    pub fn new(
        target: &str,
        api_key: Option<String>,
        timeouts: Timeouts,
        request_id_prefix: String,
    ) -> Result<Client, ClientError> {
        if request_id_prefix.contains(' ')
            || reqwest::header::HeaderValue::from_str(&request_id_prefix).is_err()
        {
            return Err(ClientError::BadRequestIdPrefix(request_id_prefix));
        }
        let trimmed = target.trim().trim_end_matches('/');
        let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string();
        let url =
            reqwest::Url::parse(&base).map_err(|_| ClientError::BadUrl(target.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(ClientError::BadUrl(target.to_string()));
        }
        // A benchmark request is not sent on to wherever a redirect points: that would
        // measure another server, and a loop would send it many times. A 3xx is a failure.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| ClientError::Build(chain(&e)))?;
        let transport = Transport::new(ReceiveClock::default(), CONNECT_TIMEOUT)?;
        // An empty key is no key: nothing to send, nothing to hide.
        let api_key = api_key.filter(|k| !k.is_empty());
        if api_key
            .as_deref()
            .is_some_and(|k| secret_value(k).is_none())
        {
            return Err(ClientError::BadApiKey);
        }
        let redactor = Redactor::new(api_key.as_deref(), Some(target));
        Ok(Client {
            redactor,
            http,
            transport,
            base,
            api_key,
            timeouts,
            request_id_prefix,
            headers: Default::default(),
            trace: TraceId::random(),
        })
    }

    /// Times the responses with `clock` (the default: the kernel's receive times).
    pub fn with_receive_clock(mut self, clock: ReceiveClock) -> Result<Client, ClientError> {
        // `new` built the transport for the default clock; only another is built again.
        if clock != ReceiveClock::default() {
            self.transport = Transport::new(clock, CONNECT_TIMEOUT)?;
        }
        Ok(self)
    }

    /// Opens up to `count` connections to the target ahead of a phase, so no request's
    /// time counts a TCP handshake (see `transport::connector`).
    pub async fn preopen(&self, count: usize) {
        if let Ok(base) = self.base.parse::<http::Uri>() {
            self.transport.preopen(&base, count).await;
        }
    }

    /// Sends `pairs` (`--header`) with every request; their secret-looking values are
    /// hidden in what this client reports.
    pub fn with_headers(mut self, pairs: &[(String, String)]) -> Result<Client, HeaderError> {
        self.headers = headers::header_map(pairs)?;
        self.redactor.add_headers(pairs);
        Ok(self)
    }

    /// Sends every request as a span of `trace`: the run's, shared by all its targets (a
    /// client alone has a trace of its own).
    pub fn with_trace(mut self, trace: TraceId) -> Client {
        self.trace = trace;
        self
    }

    /// The `x-request-id` a request is sent with: the run's prefix, then `suffix`.
    pub fn request_id(&self, suffix: impl std::fmt::Display) -> String {
        format!("{}{suffix}", self.request_id_prefix)
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, api: Api) -> String {
        format!("{}{}", self.base, api.path())
    }

    /// Removes the API key from text bound for a record, a report or the terminal: a
    /// server may echo it back in an error body.
    pub fn redact(&self, text: String) -> String {
        self.redactor.string(text)
    }

    /// Sends one request, with `request_id` as its `x-request-id` header, and times every
    /// content chunk; never fails: errors are data.
    pub async fn execute(
        &self,
        p: &Prepared,
        request_id: &str,
        cancel: &mut watch::Receiver<bool>,
    ) -> Exchange {
        self.execute_with(p, request_id, &RequestExtras::default(), cancel)
            .await
    }

    /// [`Client::execute`] with the request's own headers and cancel point: at the cancel
    /// point the stream is dropped (the connection closes) and the exchange is
    /// `cancelled`, not failed.
    pub async fn execute_with(
        &self,
        p: &Prepared,
        request_id: &str,
        extras: &RequestExtras,
        cancel: &mut watch::Receiver<bool>,
    ) -> Exchange {
        let mut ex = Exchange::new();
        let scenario_gives_up = async {
            match extras.cancel.and_then(|c| c.deadline(clock::now())) {
                Some(at) => clock::sleep_until(at).await,
                None => std::future::pending::<()>().await,
            }
        };
        // Set once content (or an error status) arrived: the first-token clock stops.
        let answered = AtomicBool::new(false);
        let first_token = async {
            match self.timeouts.first_token {
                Some(limit) => {
                    clock::sleep(limit).await;
                    if answered.load(Ordering::Acquire) {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        let mut ex_cancelled = false;
        let interrupted = {
            let run = self.exchange(p, request_id, extras, &mut ex, &answered);
            tokio::pin!(run);
            tokio::select! {
                _ = &mut run => None,
                _ = scenario_gives_up => {
                    // The scenario's own cancel point: given up, not failed.
                    ex_cancelled = true;
                    None
                }
                _ = clock::sleep(self.timeouts.request) => Some((ErrorKind::Timeout, format!("no complete response within --request-timeout {:?}", self.timeouts.request))),
                _ = first_token => Some((ErrorKind::FirstTokenTimeout, format!("no generated content within --first-token-timeout {:?}", self.timeouts.first_token.unwrap_or_default()))),
                _ = cancel.wait_for(|c| *c) => Some((ErrorKind::Cancelled, "the run stopped before the request finished".to_string())),
            }
        };
        ex.cancelled |= ex_cancelled;
        if let Some((kind, message)) = interrupted {
            ex.fail(kind, message);
        }
        ex.end = clock::now();
        if ex.error.is_none() && ex.chunks.is_empty() && !ex.cancelled {
            ex.fail(
                ErrorKind::EmptyCompletion,
                "the response carried no generated content",
            );
        }
        if let Some(e) = ex.error.as_mut() {
            e.message = self.redact(std::mem::take(&mut e.message));
        }
        if let Some(timings) = ex.server_timings.as_mut() {
            self.redactor.json(timings);
        }
        if let Some(secrets) = &extras.secrets {
            if let Some(e) = ex.error.as_mut() {
                e.message = secrets.string(std::mem::take(&mut e.message));
            }
            if let Some(timings) = ex.server_timings.as_mut() {
                secrets.json(timings);
            }
        }
        ex
    }

    /// The request as it goes on the wire: the body, its `x-request-id` and `traceparent`,
    /// the API key, then the run's and the request's own headers.
    fn wire_request(
        &self,
        p: &Prepared,
        names: (&str, &TraceParent),
        own_headers: &HeaderMap,
    ) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let (request_id, trace) = names;
        let mut req = http::Request::post(self.url(p.api)).body(Full::new(p.body.clone()))?;
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(REQUEST_ID, HeaderValue::from_str(request_id)?);
        headers.insert(TRACEPARENT, HeaderValue::from_str(&trace.header())?);
        authorize(headers, p.api, self.api_key.as_deref());
        // After the key: an `Authorization` header given explicitly replaces it.
        override_headers(headers, own_headers);
        Ok(req)
    }

    /// Sends the request and returns its response head; on failure `ex` says why. The
    /// send time is the start of the socket write that sent it.
    async fn send(
        &self,
        p: &Prepared,
        request_id: &str,
        extras: &RequestExtras,
        ex: &mut Exchange,
    ) -> Option<TimedResponse> {
        let own_headers = headers::merged(&self.headers, &extras.headers);
        // A retry is the same request: it keeps its span.
        let trace = *ex
            .trace
            .get_or_insert_with(|| TraceParent::new_span(self.trace));
        let request = || self.wire_request(p, (request_id, &trace), &own_headers);
        let mut handed = clock::now();
        let mut sent = match request() {
            Ok(req) => self.transport.send(req, false).await,
            Err(e) => {
                ex.fail(ErrorKind::HttpOther, e.to_string());
                return None;
            }
        };
        // llama.cpp's server closes the connection after every streamed response without
        // saying `Connection: close`, so a request may go out on a pooled connection that
        // is already closing and fail before the server read it: a clean close, or a reset
        // when the request reached the server's kernel before its close. Such a request is
        // sent once more, on a new connection, and counted as retried; the time lost stays
        // in its latency.
        if sent
            .as_ref()
            .err()
            .is_some_and(|e| transport::never_reached(e, handed))
        {
            ex.retried = true;
            handed = clock::now();
            if let Ok(req) = request() {
                sent = self.transport.send(req, true).await;
            }
        }
        match sent {
            Ok(resp) => {
                if let Some(write) = resp.sent(handed) {
                    ex.sent_at = Some(write.start);
                    ex.send_write_ns = Some(write.took.as_nanos() as u64);
                }
                Some(resp)
            }
            Err(e) => {
                let kind = if e.is_connect() {
                    ErrorKind::Connect
                } else {
                    ErrorKind::Disconnect
                };
                ex.fail(kind, chain(&e));
                None
            }
        }
    }

    async fn exchange(
        &self,
        p: &Prepared,
        request_id: &str,
        extras: &RequestExtras,
        ex: &mut Exchange,
        answered: &AtomicBool,
    ) {
        let Some(mut resp) = self.send(p, request_id, extras, ex).await else {
            return;
        };
        let status = resp.status();
        ex.status = Some(status.as_u16());
        if !status.is_success() {
            answered.store(true, Ordering::Release);
            return self.fail_status(resp, ex).await;
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut decoder = BodyDecoder::for_api(p.api, is_sse);
        let mut last: Option<ReadArrival> = None;
        loop {
            match resp.chunk().await {
                Ok(Some((bytes, arrival))) => {
                    ex.first_byte.get_or_insert(arrival.at);
                    last = Some(arrival);
                    let before = ex.chunks.len();
                    decoder.feed(ex, &bytes, arrival.at);
                    stamp_delay(ex, before, arrival);
                    if !ex.chunks.is_empty() {
                        answered.store(true, Ordering::Release);
                    }
                    if ex.error.is_some() {
                        return;
                    }
                    // Returning drops the response: its connection closes, which is how a
                    // server hears that a client gave up.
                    if extras.cancel.is_some_and(|c| c.tokens_reached(ex)) {
                        ex.cancelled = true;
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return ex.fail(
                        ErrorKind::StreamCut,
                        format!("the response broke off: {}", chain(&e)),
                    )
                }
            }
        }
        // What is left (a whole JSON body, an unterminated event) arrived with the last
        // piece of the body.
        let end = last.unwrap_or(ReadArrival {
            at: clock::now(),
            delay: None,
        });
        let before = ex.chunks.len();
        decoder.finish(ex, end.at);
        stamp_delay(ex, before, end);
    }

    /// Fails `ex` with a non-2xx status. The status decides the kind, even if the body then
    /// stalls or breaks; the message quotes `Retry-After`, a redirect's `Location` and the
    /// body (see [`Client::body_excerpt`]).
    async fn fail_status(&self, mut resp: TimedResponse, ex: &mut Exchange) {
        use http::header::{LOCATION, RETRY_AFTER};
        let status = resp.status().as_u16();
        let mut head = format!("HTTP {status}");
        if let Some(v) = header_text(resp.headers(), RETRY_AFTER) {
            head += &format!(" (Retry-After: {})", excerpt(&self.redact(v)));
        }
        let location = header_text(resp.headers(), LOCATION);
        if let Some(v) = location.filter(|_| (300..400).contains(&status)) {
            let location = excerpt(&self.redact(v));
            head += &format!(" (Location: \"{}\")", escape_control(&location));
        }
        ex.fail(ErrorKind::of_status(status), head.clone());
        let body = self.body_excerpt(ErrorResponse::Timed(&mut resp)).await;
        if let Some(e) = ex.error.as_mut() {
            e.message = format!("{head}: {body}");
        }
    }

    /// What an error response's body adds to its message, read up to [`ERROR_BODY_BYTES`]:
    /// the start of a text body, redacted, or a description of a compressed or binary one.
    async fn body_excerpt(&self, mut resp: ErrorResponse<'_>) -> String {
        use http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
        let headers = resp.headers();
        let content_type = header_text(headers, CONTENT_TYPE);
        let encoding = header_text(headers, CONTENT_ENCODING);
        let length = header_text(headers, CONTENT_LENGTH).and_then(|v| v.trim().parse().ok());
        let mut body = Vec::new();
        let mut ended = false;
        while body.len() < ERROR_BODY_BYTES {
            match resp.piece().await {
                Ok(Some(bytes)) => body.extend_from_slice(&bytes),
                Ok(None) => {
                    ended = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let length = length.or(ended.then_some(body.len() as u64));
        match error_body::summary(content_type.as_deref(), encoding.as_deref(), &body, length) {
            Some(summary) => summary,
            // Redacted whole, then cut: an excerpt must not end inside a secret.
            None => excerpt(&self.redact(String::from_utf8_lossy(&body).into_owned())),
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
            Err(e) => return Err(self.unreachable(&e).await),
            Ok(mut r) if r.status().is_server_error() => {
                let status = r.status().as_u16();
                let body = self.body_excerpt(ErrorResponse::Untimed(&mut r)).await;
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
        // A text prompt goes where the run's prompts go: chat, responses and messages
        // wrap it as a user message, embeddings as a batch of one.
        let spec = RequestSpec::new(Prompt::Text("Hello".into()), 4);
        // Asks for usage as the run will, so a server that rejects it fails here.
        let prepared =
            prepare(&spec, api, &model, usage).map_err(|reason| ClientError::TestRequest {
                url: self.url(api),
                reason,
            })?;
        let (_tx, mut never) = watch::channel(false);
        let ex = self
            .execute(&prepared, &self.request_id("preflight"), &mut never)
            .await;
        if let Some(err) = ex.error {
            return Err(ClientError::TestRequest {
                url: self.url(api),
                reason: err.message,
            });
        }
        Ok(model)
    }

    /// Why the first call failed. An `https://` target whose server speaks plain HTTP
    /// fails in the TLS handshake with a library's words ("corrupt message"): the same
    /// address asked in plain HTTP tells it. nginx and Apache answer plain HTTP on a TLS
    /// port with 400, so a 400 is no proof.
    async fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        if let Some(rest) = self.base.strip_prefix("https://") {
            let plain = format!("http://{rest}");
            let probe = self
                .http
                .get(format!("{plain}/health"))
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            if probe.is_ok_and(|r| r.status() != reqwest::StatusCode::BAD_REQUEST) {
                return ClientError::PlainHttp {
                    url: self.redact(self.base.clone()),
                    plain: self.redact(plain),
                };
            }
        }
        ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(e),
        }
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
        // A wrong base path (`/v2`, a proxy's prefix left out) answers 404: the path is
        // what to fix, not the model.
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(ClientError::ModelsNotFound { url });
        }
        if !status.is_success() {
            let reason = format!("HTTP {}", status.as_u16());
            return Err(ClientError::NoModels { url, reason });
        }
        let no_models = |reason: String| ClientError::NoModels {
            url: url.clone(),
            reason,
        };
        let body = bounded_body(resp, MAX_MODELS_BODY)
            .await
            .map_err(no_models)?;
        // Only the first id is read: a list of a million models costs its bytes, not a
        // tree of values.
        let list: ModelList = serde_json::from_slice(&body)
            .map_err(|_| no_models("the body is not a JSON model list".into()))?;
        list.data
            .into_iter()
            .next()
            .and_then(|m| m.id)
            .ok_or_else(|| no_models("no `data[0].id` in the answer".into()))
    }
}

/// Most bytes of a `/v1/models` answer the runner reads (a list of 100,000 models is
/// about 10 MiB).
const MAX_MODELS_BODY: usize = 16 << 20;

#[derive(serde::Deserialize)]
struct ModelList {
    #[serde(default)]
    data: Vec<ModelEntry>,
}

#[derive(serde::Deserialize)]
struct ModelEntry {
    id: Option<String>,
}

/// A whole body of at most `limit` bytes, refused before more is held.
async fn bounded_body(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let over = || format!("the answer is over the limit of {} MiB", limit >> 20);
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(over());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| chain(&e))? {
        if body.len() + chunk.len() > limit {
            return Err(over());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prompt: Prompt) -> RequestSpec {
        RequestSpec {
            ignore_eos: true,
            extra: serde_json::Map::from_iter([(
                "temperature".to_string(),
                serde_json::json!(0.0),
            )]),
            ..RequestSpec::new(prompt, 8)
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
}
