//! The values exchanged between a scenario and the engine, independent of the guest language.

use std::time::Duration;

/// When requests of a phase may start.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrivalSpec {
    /// All requests at once (vLLM's `--request-rate inf`).
    Burst,
    /// Open loop, exponential gaps with mean 1/rate.
    Poisson { rate: f64 },
    /// Open loop, gamma gaps with mean 1/rate and shape `burstiness` (1 = Poisson).
    Gamma { rate: f64, burstiness: f64 },
    /// Open loop, a request every 1/rate seconds.
    Constant { rate: f64 },
    /// Closed loop: keep `concurrency` requests in flight.
    Closed { concurrency: u64 },
    /// The scenario's `arrival` function gives each gap (or requests carry `at`/`delay`).
    Custom,
}

impl ArrivalSpec {
    /// Configured request rate, `None` for unbounded or closed loop.
    pub fn rate(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Poisson { rate } | ArrivalSpec::Constant { rate } => Some(*rate),
            ArrivalSpec::Gamma { rate, .. } => Some(*rate),
            _ => None,
        }
    }

    pub fn burstiness(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Poisson { .. } => Some(1.0),
            ArrivalSpec::Gamma { burstiness, .. } => Some(*burstiness),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ArrivalSpec::Burst => "all at once".into(),
            ArrivalSpec::Poisson { rate } => format!("Poisson, {rate} req/s"),
            ArrivalSpec::Gamma { rate, burstiness } => {
                format!("gamma, {rate} req/s, burstiness {burstiness}")
            }
            ArrivalSpec::Constant { rate } => format!("constant, {rate} req/s"),
            ArrivalSpec::Closed { concurrency } => format!("closed loop, {concurrency} in flight"),
            ArrivalSpec::Custom => "custom (scenario-computed)".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PhaseSpec {
    pub name: String,
    pub arrival: ArrivalSpec,
    /// Phase-wide cap on requests in flight (requests wait for a free slot).
    pub max_concurrency: Option<u64>,
    /// Stop generating after this many requests.
    pub max_requests: Option<u64>,
    /// Stop sending after this long; in-flight requests then drain.
    pub max_duration: Option<Duration>,
    /// Warm-up: its requests are sent (and recorded) but left out of the statistics.
    pub warmup: bool,
    /// A phase of sessions: this many root sessions, each driven by `session_step`
    /// instead of `next_request`; the arrival process times their starts (a closed loop
    /// keeps that many sessions open at once). `None`: requests by `next_request`.
    pub sessions: Option<u64>,
    /// What the server is asked around the phase (`servers::control`).
    pub control: PhaseControl,
    /// The phase's steady-state window as the scenario names it, instead of the plateau
    /// rule's (`metrics::steady_state`); `None`: the rule finds it.
    pub steady_window: Option<NamedWindow>,
}

/// A steady-state window a scenario names for its phase (a Rhai phase's
/// `steady_window: #{ from_s: 10.0, to_s: 50.0 }`): seconds from the phase's start, the
/// window `[from_s, to_s)`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NamedWindow {
    pub from_s: f64,
    pub to_s: f64,
}

/// A phase's calls to the server: its prefix cache emptied before the phase
/// (`reset_prefix_cache: true`), its profiler run over the phase (`profile: true`). The
/// command line's `--reset-prefix-cache` and `--profile-phase` ask the same of any phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseControl {
    pub reset_prefix_cache: bool,
    pub profile: bool,
}

/// Connections opened ahead of a phase whose spec bounds nothing (a burst of unknown size,
/// a scenario-computed schedule).
const UNBOUNDED_AHEAD: u64 = 256;

impl PhaseSpec {
    /// Connections worth opening before the phase's clock starts: as many as can be in
    /// flight at once as far as the spec says, or an open loop's first second of sends.
    pub fn connections_ahead(&self) -> u64 {
        let mut n = match &self.arrival {
            ArrivalSpec::Closed { concurrency } => *concurrency,
            // A float to integer cast saturates; NaN (never validated in) gives 0.
            arrival => arrival.rate().map_or(UNBOUNDED_AHEAD, |r| r.ceil() as u64),
        };
        for bound in [self.max_concurrency, self.max_requests]
            .into_iter()
            .flatten()
        {
            n = n.min(bound);
        }
        n
    }

    /// Effective concurrency limit: the explicit cap, or the closed loop's width (which,
    /// in a phase of sessions, counts sessions open, not requests: their children run
    /// beside them).
    pub fn concurrency_limit(&self) -> Option<u64> {
        if self.sessions.is_some() {
            return self.max_concurrency;
        }
        match (self.max_concurrency, &self.arrival) {
            (Some(m), ArrivalSpec::Closed { concurrency }) => Some(m.min(*concurrency)),
            (Some(m), _) => Some(m),
            (None, ArrivalSpec::Closed { concurrency }) => Some(*concurrency),
            (None, _) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
    /// Chat messages as JSON objects (`{role, content}`), sent to the chat endpoint.
    Messages(Vec<serde_json::Value>),
    /// A batch of input texts for the embeddings endpoint (`--api embeddings`).
    Inputs(Vec<String>),
}

/// When the client gives up on a request mid-stream, as a chat user who stops reading
/// does: after this many output tokens, or this many milliseconds after the send,
/// whichever comes first. The record counts as cancelled, not failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cancel {
    pub after_tokens: Option<u64>,
    pub after_ms: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RequestSpec {
    pub prompt: Prompt,
    pub max_tokens: u64,
    pub ignore_eos: bool,
    pub stream: bool,
    /// Extra fields merged into the JSON body (temperature, top_p, …).
    pub extra: serde_json::Map<String, serde_json::Value>,
    pub tag: Option<String>,
    pub session: Option<String>,
    /// Absolute offset from the phase start, seconds (trace replay).
    pub at: Option<f64>,
    /// Gap after the previous request's scheduled time, seconds.
    pub delay: Option<f64>,
    /// Prompt length known to the scenario, used when the server reports no usage.
    pub input_tokens: Option<u64>,
    /// HTTP headers of this request only (added to `--header`; session affinity, tenant).
    pub headers: Vec<(String, String)>,
    /// Give up on the request mid-stream (`None`: read it to the end).
    pub cancel: Option<Cancel>,
    /// Index of the `--target` to send to (`None`: round-robin over the targets).
    pub target: Option<usize>,
    /// Tools the model may call, sent in the endpoint's own shape (OpenAI `tools`,
    /// Anthropic `tools`, Responses function tools).
    pub tools: Vec<ToolSpec>,
}

/// A tool a request declares: a function the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments (an object).
    pub parameters: serde_json::Value,
}

/// A tool call the model made, as the client decoded it from the stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCall {
    /// The call's id (`call_…`, `toolu_…`), which a tool result names.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, not checked).
    pub arguments: String,
}

impl RequestSpec {
    /// A streamed request of `prompt` for up to `max_tokens`, with nothing else set.
    pub fn new(prompt: Prompt, max_tokens: u64) -> RequestSpec {
        RequestSpec {
            prompt,
            max_tokens,
            ignore_eos: false,
            stream: true,
            extra: Default::default(),
            tag: None,
            session: None,
            at: None,
            delay: None,
            input_tokens: None,
            headers: vec![],
            cancel: None,
            target: None,
            tools: vec![],
        }
    }
}

/// What `next_request` gives the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Boxed: a request is large beside the other cases.
    Request(Box<RequestSpec>),
    /// Nothing to send until a request in flight finishes (the next turn of a
    /// conversation needs the last answer): ask again after the next `on_response`.
    Wait,
    /// The phase's dataset is exhausted.
    Done,
}

/// The outcome of a finished request, given to `on_response`.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub phase: usize,
    pub index: u64,
    pub tag: Option<String>,
    pub session: Option<String>,
    pub ok: bool,
    pub error: Option<String>,
    pub text: String,
    pub ttft_ms: f64,
    pub e2el_ms: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The client gave up as the request's `cancel` asked (not a failure).
    pub cancelled: bool,
    /// Time to the first answer (content) token, after any reasoning, ms.
    pub ttfa_ms: Option<f64>,
    /// Of `output_tokens`, those the model spent reasoning.
    pub reasoning_tokens: u64,
    /// The tool calls the model made, in order (empty when it made none).
    pub tool_calls: Vec<ToolCall>,
    /// When the request ended, seconds since its phase started (the engine schedules a
    /// session's next step from it; not shown to scenarios).
    pub end_s: f64,
}

/// Where a session stands when the engine asks for its next step.
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    pub phase: usize,
    /// A root session's number in its phase (`"7"`); a child's is its parent's id, a
    /// slash and its own name (`"7/review-2"`).
    pub id: String,
    /// Steps the session has taken so far: 0 when it starts.
    pub step: u32,
    /// The outcome of its last request, when its last step was a request.
    pub last: Option<Outcome>,
    /// After a fan-out, once every child has ended: their ids, in the order they were
    /// opened.
    pub joined: Vec<String>,
}

impl SessionState {
    /// What kind of step is asked: `"start"` (step 0, nothing before it), `"answer"` (its
    /// last request ended: `last` holds the outcome) or `"join"` (the children of its
    /// fan-out ended: `joined` holds their ids). Scenarios read it as `s.kind`, so a
    /// test like `s.joined != ()` (true on every step: `joined` is `[]` off joins) is
    /// never needed.
    pub fn kind(&self) -> &'static str {
        if self.step == 0 {
            "start"
        } else if self.last.is_some() {
            "answer"
        } else {
            "join"
        }
    }

    /// The seed of this step's random stream under the run's seed: the first 8 bytes of
    /// sha256 over the run's seed, the phase, the session's id and the step.
    pub fn stream_seed(&self, run_seed: u64) -> u64 {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(run_seed.to_le_bytes());
        h.update((self.phase as u64).to_le_bytes());
        h.update((self.id.len() as u64).to_le_bytes());
        h.update(self.id.as_bytes());
        h.update(self.step.to_le_bytes());
        let d = h.finalize();
        u64::from_le_bytes(d[..8].try_into().expect("8 of 32 bytes"))
    }
}

/// What a session does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Send this request `after` seconds after the previous step ended (think time, a
    /// tool's latency); for a session's first step, after its start.
    Send {
        request: Box<RequestSpec>,
        after: f64,
    },
    /// Open these children (named, unique within the session) now; the session's next
    /// step comes once every one of them has ended.
    FanOut(Vec<String>),
    /// The session is over.
    End,
}

/// The latest scraped value of each server metric, by metric name, summed over its
/// label sets (a single-model server has one); histogram buckets are left out.
pub type ServerValues = Vec<(String, f64)>;

/// One server metric over a finished phase: its value at the end, and the mean and
/// maximum of its samples during the phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerStat {
    pub name: String,
    pub last: f64,
    pub mean: f64,
    pub max: f64,
}

/// A live view of the current phase, given to `stop`.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub phase: usize,
    pub elapsed_s: f64,
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub in_flight: u64,
    pub output_tokens: u64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub e2el_p99_ms: f64,
    /// The server's metrics at the latest scrape (empty when not scraped).
    pub server: ServerValues,
}

/// Mean and the percentiles an adaptive scenario decides on, milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// A finished phase as `next_phase` sees it: what was offered and what came back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseReport {
    /// Position in the run, from 0.
    pub index: usize,
    pub name: String,
    pub warmup: bool,
    /// Configured request rate, req/s (`None`: unbounded or closed loop).
    pub request_rate: Option<f64>,
    /// Configured concurrency limit (the closed loop's width or the cap).
    pub max_concurrency: Option<u64>,
    pub duration_s: f64,
    pub completed: u64,
    pub failed: u64,
    /// Successful requests per second.
    pub request_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Good requests per second, when `--goodput` was given.
    pub goodput: Option<f64>,
    pub ttft: LatencySummary,
    pub tpot: LatencySummary,
    pub itl: LatencySummary,
    pub e2el: LatencySummary,
    /// The server's metrics over the phase (empty when not scraped).
    pub server: Vec<ServerStat>,
}

/// A key-value result a scenario reports (the rate an SLO search found), shown in the
/// report and stored in result.json (and, for `runner merge`, in a shard's shard.json).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum NoteValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl NoteValue {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            NoteValue::Int(v) => (*v).into(),
            NoteValue::Float(v) => serde_json::Number::from_f64(*v)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            NoteValue::Bool(v) => (*v).into(),
            NoteValue::Text(v) => v.clone().into(),
        }
    }
}

impl std::fmt::Display for NoteValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoteValue::Int(v) => write!(f, "{v}"),
            NoteValue::Float(v) => write!(f, "{v}"),
            NoteValue::Bool(v) => write!(f, "{v}"),
            NoteValue::Text(v) => f.write_str(v),
        }
    }
}
