//! The HTTP side: routes, handlers, and the server's own thread and runtime.

use crate::both_sides::{clock, pipe};
use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};

use crate::both_sides::wire::{REQUEST_ID, TRACEPARENT};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::arrival::{arrival_of, ArrivalListener, LastRead};
use super::engine::Engine;
use super::error::SimError;
use super::event::{Event, Events};
use super::openai::{ApiError, GenerationEndpoint};
use super::profile::SimConfig;
use super::send_log::{RequestArrival, RequestNames, SendLog, SentTimes};
use super::wire::{Route, Wire};

/// Largest request body read (a 32k-token prompt as token ids is ~200 KB).
const MAX_BODY: usize = 64 << 20;
/// Accept backlog: a sweep opens 2048 connections at once.
const BACKLOG: u32 = 8192;

struct AppState {
    config: SimConfig,
    engine: Engine,
    /// The model name encoded once as a JSON string.
    model_json: String,
    created: u64,
    next_id: AtomicU64,
    /// Generation requests received so far (for `--sim-slow-every`).
    received: AtomicU64,
    send_log: Option<Arc<SendLog>>,
}

/// A simulated server on loopback, in its own OS thread with its own tokio runtime.
/// Dropping it shuts the server down and joins the thread.
pub struct SimServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimServer {
    /// Start on 127.0.0.1:port (0 = ephemeral) in its own OS thread with its own tokio runtime (`workers` threads, default 1), so it never shares an executor with the client under test.
    pub fn start(config: SimConfig, port: u16) -> Result<SimServer, SimError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("runner-sim".to_string())
            .spawn(move || run_thread(config, port, ready_tx, stopped))
            .map_err(SimError::Runtime)?;
        match ready_rx.recv() {
            Ok(Ok(addr)) => Ok(SimServer {
                addr,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(SimError::Stopped)
            }
        }
    }

    /// In virtual time: the simulator's tasks run on the run's own single-threaded runtime
    /// `rt` (one clock, no thread of its own); the client reaches it over in-memory pipes,
    /// the preflight's untimed calls over TCP on loopback.
    pub fn start_in(
        config: SimConfig,
        rt: &tokio::runtime::Runtime,
    ) -> Result<SimServer, SimError> {
        let _entered = rt.enter();
        let listener = bind(0).map_err(|source| SimError::Bind { port: 0, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { port: 0, source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        rt.spawn(serve_until(listener, config, async {
            let _ = stopped.await;
        }));
        Ok(SimServer {
            addr,
            stop: Some(stop),
            thread: None,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run_thread(
    config: SimConfig,
    port: u16,
    ready: std::sync::mpsc::Sender<Result<SocketAddr, SimError>>,
    stopped: oneshot::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers.max(1))
        .thread_name("runner-sim-worker")
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(SimError::Runtime(e)));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match bind(port).and_then(|l| l.local_addr().map(|a| (l, a))) {
            Ok((listener, addr)) => {
                let _ = ready.send(Ok(addr));
                listener
            }
            Err(source) => {
                let _ = ready.send(Err(SimError::Bind { port, source }));
                return;
            }
        };
        let _ = serve_until(listener, config, async {
            let _ = stopped.await;
        })
        .await;
    });
    // Open streams are cancelled here: their tasks are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// Serve until the future is dropped / ctrl-c; used by `runner sim --port N` (the CLI builds the runtime).
pub async fn serve(listener: TcpListener, config: SimConfig) -> std::io::Result<()> {
    serve_until(listener, config, async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No signal handler available: serve until dropped.
            std::future::pending::<()>().await;
        }
    })
    .await
}

/// Bind 127.0.0.1:port with a large accept backlog: a sweep opens 2048 connections at once.
/// Must be called inside a tokio runtime (the listener registers with its reactor).
pub fn bind(port: u16) -> std::io::Result<TcpListener> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(std::io::Error::other(
            "the simulated server must be bound inside a tokio runtime",
        ));
    }
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(BACKLOG)
}

async fn serve_until(
    listener: TcpListener,
    config: SimConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Dropping `_scheduler` on return stops the batching engine.
    let (engine, _scheduler) = Engine::start(&config);
    let model_json = serde_json::to_string(&config.model).unwrap_or_else(|_| "\"\"".to_string());
    let send_log = match &config.send_log {
        Some(path) => Some(Arc::new(SendLog::create(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create the send log {}: {e}", path.display()),
            )
        })?)),
        None => None,
    };
    let state = Arc::new(AppState {
        send_log,
        config,
        engine,
        model_json,
        created: unix_now(),
        next_id: AtomicU64::new(1),
        received: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .route("/v1/embeddings", post(embeddings))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/start_profile", post(start_profile))
        .route("/stop_profile", post(stop_profile))
        .route("/metrics", super::metrics::route(state.engine.metrics()));
    let app = match state.config.power {
        Some(model) => {
            let metrics = state.engine.metrics();
            let generated = move || metrics.generated_tokens();
            app.route(super::power::PATH, super::power::route(model, generated))
        }
        None => app,
    };
    let app = app.fallback(not_found).with_state(state);
    // In virtual time the client's connections to this address are pipes.
    let _pipes = match clock::is_virtual() {
        true => Some(pipe::listen(
            listener.local_addr()?.to_string(),
            super::pipe_server::accept_with(app.clone()),
        )),
        false => None,
    };
    let listener = ArrivalListener::new(listener);
    let app = app.into_make_service_with_connect_info::<LastRead>();
    tokio::select! {
        served = axum::serve(listener, app).into_future() => served,
        () = shutdown => Ok(()),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn health() -> StatusCode {
    StatusCode::OK
}

/// vLLM's `POST /reset_prefix_cache` (vllm/entrypoints/serve/dev/cache/api_router.py):
/// the prefix cache is empty for the next prompt admitted; 200 with no body, as vLLM.
async fn reset_prefix_cache(State(state): State<Arc<AppState>>) -> StatusCode {
    state.engine.reset_prefix_cache();
    if let Some(log) = &state.send_log {
        log.event("reset_prefix_cache");
    }
    StatusCode::OK
}

/// vLLM's `POST /start_profile` and `/stop_profile` (vllm/entrypoints/serve/profile/
/// api_router.py). The simulator has nothing to profile: the call is only recorded, in
/// the send log or else on stderr, so a test sees when it came.
async fn start_profile(State(state): State<Arc<AppState>>) -> StatusCode {
    profile_event(&state, "start_profile");
    StatusCode::OK
}

async fn stop_profile(State(state): State<Arc<AppState>>) -> StatusCode {
    profile_event(&state, "stop_profile");
    StatusCode::OK
}

fn profile_event(state: &AppState, name: &str) {
    match &state.send_log {
        Some(log) => log.event(name),
        None => crate::errln!(
            "runner sim: {name} at unix ms {:.3}",
            super::send_log::unix_ms()
        ),
    }
}

async fn not_found() -> Response {
    ApiError::not_found("Not Found").into_response()
}

async fn models(State(state): State<Arc<AppState>>) -> Response {
    Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": state.config.model,
            "object": "model",
            "created": state.created,
            "owned_by": "runner-sim",
        }],
    }))
    .into_response()
}

async fn completions(State(state): State<Arc<AppState>>, request: Request) -> Response {
    generate(
        state,
        Route::OpenAi(GenerationEndpoint::Completions),
        request,
    )
    .await
}

async fn chat(State(state): State<Arc<AppState>>, request: Request) -> Response {
    generate(state, Route::OpenAi(GenerationEndpoint::Chat), request).await
}

async fn responses(State(state): State<Arc<AppState>>, request: Request) -> Response {
    generate(state, Route::Responses, request).await
}

async fn messages(State(state): State<Arc<AppState>>, request: Request) -> Response {
    generate(state, Route::Messages, request).await
}

/// Not streamed, not batched with generation: answered after its batch's time.
async fn embeddings(State(state): State<Arc<AppState>>, request: Request) -> Response {
    use super::embeddings;
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return ApiError::bad_request(format!("could not read the request body: {e}"))
                .into_response()
        }
    };
    let batch = match embeddings::parse(&body, &state.config) {
        Ok(batch) => batch,
        Err(e) => return e.into_response(),
    };
    clock::sleep(embeddings::latency(&batch, &state.config)).await;
    let answer = embeddings::answer(&batch, &state.model_json);
    with_content_type(Body::from(answer), "application/json")
}

async fn generate(state: Arc<AppState>, route: Route, request: Request) -> Response {
    // The request's clock starts when its headers were in (arrival.rs), before the body
    // is read; the handler may run later on a busy thread.
    let handled = clock::tokio_now();
    let arrived = arrival_of(&request).map_or(handled, Instant::from_std);
    // Read only for the send log: the headers are not otherwise the simulator's business.
    let names = state.send_log.as_ref().map(|_| {
        let header = |name| {
            let value = request.headers().get(name)?;
            value.to_str().ok().map(str::to_string)
        };
        RequestNames {
            request_id: header(REQUEST_ID),
            traceparent: header(TRACEPARENT),
        }
    });
    let nth = state.received.fetch_add(1, Ordering::Relaxed) + 1;
    let delay = state
        .config
        .slow
        .map_or(Duration::ZERO, |slow| slow.delay_of(nth));
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return ApiError::bad_request(format!("could not read the request body: {e}"))
                .into_response()
        }
    };
    let job = match route.parse(&body, &state.config) {
        Ok(job) => job,
        Err(e) => return e.into_response(),
    };
    if let Err(message) = state.engine.check(job.prompt_tokens, job.max_tokens) {
        return ApiError::bad_request(message).into_response();
    }
    let delay = delay + state.config.ttft_jitter_of(&body);
    let Some(events) = state.engine.submit(
        arrived,
        delay,
        job.prompt_tokens,
        job.max_tokens,
        job.blocks.clone(),
    ) else {
        return ApiError::unavailable("the simulated engine has stopped").into_response();
    };
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    let writer = Wire::new(route, &job, id, unix_now(), &state.model_json);
    if job.stream {
        let sent = state.send_log.clone().map(|log| {
            let names = names.unwrap_or_default();
            SentTimes::new(log, id, names, RequestArrival { arrived, handled })
        });
        sse_response(events, writer, job.include_usage, sent)
    } else {
        full_response(events, writer).await
    }
}

async fn full_response(mut events: Events, mut writer: Wire) -> Response {
    while let Some(event) = events.next().await {
        match event {
            Event::Tokens(n) => writer.add_tokens(n),
            Event::Admitted { cached } => writer.cached(cached),
        }
    }
    with_content_type(Body::from(writer.full_response()), "application/json")
}

/// Where an SSE stream is.
enum Stage {
    Events,
    Usage,
    Done,
    End,
}

struct Sse {
    events: Events,
    writer: Wire,
    include_usage: bool,
    stage: Stage,
    /// With `--sim-send-log`: this stream's send times so far.
    sent: Option<SentTimes>,
}

impl Sse {
    /// The next SSE event: content as the engine produces it, then usage, then [DONE].
    async fn next_event(&mut self) -> Option<Bytes> {
        loop {
            match self.stage {
                Stage::Events => match self.events.next().await {
                    Some(Event::Admitted { cached }) => {
                        self.writer.cached(cached);
                        if let Some(role) = self.writer.role_chunk() {
                            return Some(role);
                        }
                    }
                    Some(Event::Tokens(n)) => {
                        if let Some(times) = &mut self.sent {
                            times.chunk_sent();
                        }
                        return Some(self.writer.content_chunk(n));
                    }
                    None => {
                        self.stage = if self.include_usage {
                            Stage::Usage
                        } else {
                            Stage::Done
                        }
                    }
                },
                Stage::Usage => {
                    self.stage = Stage::Done;
                    return Some(self.writer.usage_chunk());
                }
                Stage::Done => {
                    self.stage = Stage::End;
                    if let Some(times) = self.sent.take() {
                        times.finish();
                    }
                    // The OpenAI endpoints end with `[DONE]`; the others end here.
                    return self.writer.done();
                }
                Stage::End => return None,
            }
        }
    }
}

/// Each event is its own body frame; hyper flushes whenever the next one is not ready yet.
/// When the client goes away hyper drops this body, which drops `events` and frees the
/// sequence in the engine.
fn sse_response(
    events: Events,
    writer: Wire,
    include_usage: bool,
    sent: Option<SentTimes>,
) -> Response {
    let sse = Sse {
        events,
        writer,
        include_usage,
        stage: Stage::Events,
        sent,
    };
    let body = stream::unfold(sse, |mut sse| async move {
        let event = sse.next_event().await?;
        Some((Ok::<Bytes, Infallible>(event), sse))
    });
    let mut response = with_content_type(Body::from_stream(body), "text/event-stream");
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn with_content_type(body: Body, content_type: &'static str) -> Response {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
