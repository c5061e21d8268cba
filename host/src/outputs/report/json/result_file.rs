//! The Rust types of result.json (and of `--save-result`). One measured phase: its object
//! at the top level, with the keys of `vllm bench serve --save-result`; several: a
//! `phases` array of them. The metrics' keys come from the metric catalogue
//! (`metrics::catalogue`). The JSON Schema in `schema/result.schema.json` is derived
//! from these types (a unit test below keeps it equal).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// result.json.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(title = "runner result.json"))]
#[serde(untagged)]
pub enum ResultFile {
    /// Several measured phases.
    Phases(Box<MultiPhaseResult>),
    /// One measured phase, its keys at the top level.
    Phase(Box<SinglePhaseResult>),
    /// A series of repeated runs (`--repeat`): each figure's spread over the runs.
    Series(Box<SeriesResult>),
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
/// A run with one measured phase: that phase's keys, and the run's sections.
pub struct SinglePhaseResult {
    #[serde(flatten)]
    pub phase: ResultJsonPhase,
    #[serde(flatten)]
    pub run: RunSections,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
/// A run with several measured phases: a `phases` array, and the run's sections.
pub struct MultiPhaseResult {
    pub scenario: String,
    /// sha256 hex of the whole request stream.
    pub request_digest: String,
    /// The measured phases, in run order.
    pub phases: Vec<ResultJsonPhase>,
    #[serde(flatten)]
    pub run: RunSections,
}

/// What a run has beside its phases.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RunSections {
    /// Warm-up phases, with their counts only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup_phases: Vec<WarmupPhase>,
    /// What the scenario reported with `note`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scenario_result: BTreeMap<String, Value>,
    /// Each threshold in each measured phase, when thresholds were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Vec<VerdictResult>>,
    /// The shards of a merged run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsResult>,
    /// The spans `--otlp` exported, one per finished request; absent without `--otlp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<OtlpResult>,
}

/// `otlp`: what became of the run's spans. `spans` = `exported` + `dropped`, and the
/// dropped ones by why.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct OtlpResult {
    /// The receiver's URL, credentials hidden.
    pub url: String,
    /// One per finished request.
    pub spans: u64,
    /// Accepted by the receiver.
    pub exported: u64,
    /// Not accepted, for any of the reasons below.
    pub dropped: u64,
    /// Not queued: the exporter was behind (its queue was full).
    pub dropped_queue_full: u64,
    /// In posts that failed (no answer, a refused connection, a timeout, an HTTP error)
    /// or that the receiver refused in part.
    pub dropped_receiver: u64,
    /// Still queued or being posted when the run's end stopped waiting.
    pub dropped_unflushed: u64,
    /// Why the first failed post failed; absent when none failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct WarmupPhase {
    pub phase: String,
    pub completed: u64,
    pub failed: u64,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct VerdictResult {
    pub threshold: String,
    pub phase: String,
    /// `null`: the phase had no data for the metric (the threshold failed).
    pub value: Option<f64>,
    pub pass: bool,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct ShardsResult {
    pub count: usize,
    /// The agreed start instant (`--start-at`), RFC 3339.
    pub start_at: Option<String>,
    pub start_spread_ms: f64,
    pub request_digest: String,
    pub shards: Vec<ShardResult>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct ShardResult {
    pub index: u32,
    pub clock_offset_ms: Option<f64>,
    pub started_unix_ns: u64,
    /// What this shard's scenario reported with `note` (the run's `scenario_result` holds
    /// only the notes every shard reported with the same value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scenario_result: BTreeMap<String, Value>,
}

/// One measured phase: vLLM's keys, plus `phase` and our `runner` section.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields, rename = "PhaseResult"))]
pub struct ResultJsonPhase {
    /// Local time, `YYYYmmdd-HHMMSS`.
    pub date: String,
    pub endpoint_type: String,
    pub backend: String,
    /// Always `null` (vLLM's `--label`).
    pub label: Option<String>,
    pub model_id: String,
    pub tokenizer_id: String,
    pub num_prompts: u64,
    pub request_rate: RequestRate,
    pub burstiness: Option<f64>,
    pub max_concurrency: Option<u64>,
    /// Audio only in vLLM (Σ input audio seconds / duration); always 0 for text.
    pub rtfx: f64,
    pub phase: String,
    /// The catalogue's vLLM metrics.
    #[serde(flatten)]
    pub metrics: VllmMetrics,
    pub runner: RunnerSection,
}

/// The configured request rate, req/s, or `"inf"` (vLLM's spelling of no limit).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum RequestRate {
    Finite(f64),
    Infinite(Infinite),
}

#[derive(Clone, Copy, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum Infinite {
    #[serde(rename = "inf")]
    Inf,
}

/// The catalogue's metrics that sit among vLLM's keys: every [`InResult::Vllm`] scalar,
/// and `mean_`, `median_`, `std_` and `p<N>_` of each vLLM latency, `_ms`.
///
/// [`InResult::Vllm`]: crate::measuring::metrics::catalogue::InResult::Vllm
#[derive(Clone, Debug, Default, Serialize)]
pub struct VllmMetrics(pub BTreeMap<String, Value>);

/// Our own section of a phase.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct RunnerSection {
    pub scenario: String,
    pub description: String,
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    pub target: String,
    /// The twin the built-in simulator ran (`--sim-profile twin.toml`): a simulation of
    /// the server of these runs, with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<crate::outputs::report::TwinProvenance>,
    /// The built-in simulator's engine parameters set over its profile's or twin's
    /// (`--sim KEY=VALUE` and the `--sim-*` engine flags), in vLLM's words: a what-if,
    /// not the server as profiled or fitted.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sim_overrides: std::collections::BTreeMap<String, String>,
    /// The run was on a simulated clock (`--virtual-time`, the built-in simulator only):
    /// every time in it is simulated, not measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub virtual_time: bool,
    pub api: String,
    pub request_digest: Option<String>,
    /// The run's W3C trace id: each request was sent as a span of it (`traceparent`), its
    /// span id in requests.jsonl. None for a merged run (each shard has its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// What the request stream may have depended on beyond the seed and the parameters:
    /// `on_response`, `stop`, `next_phase` (the scenario defines it) and
    /// `max_duration_with_concurrency_limit` (a phase's deadline cuts a stream paced by
    /// the server's answers). Empty: the same seed sends the same stream on every run.
    pub request_stream_depends_on: Vec<String>,
    pub runner_version: String,
    pub package: Option<PackageId>,
    pub scenario_digest: String,
    /// sha256 of the scenario digest, parameters, seed and tokenizer.
    pub workload_id: String,
    pub wit_version: String,
    pub phase: String,
    pub percentiles: Vec<f64>,
    pub goodput_slo: Option<String>,
    pub total_chunks: u64,
    pub token_accounting: TokenAccountingResult,
    pub peak_concurrency: f64,
    pub failures_by_kind: BTreeMap<String, u64>,
    pub first_error_by_kind: BTreeMap<String, String>,
    pub retried_requests: u64,
    pub client_bound: bool,
    /// Which clock stamped the phase's chunks and sends.
    pub clock: ClockResult,
    /// The catalogue's [`InResult::Runner`] metrics: scalars, and latencies as
    /// distribution objects.
    ///
    /// [`InResult::Runner`]: crate::measuring::metrics::catalogue::InResult::Runner
    #[serde(flatten)]
    pub metrics: RunnerMetrics,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagResult>,
    /// Requests the scenario gave up on mid-stream (its `cancel`): neither completed nor
    /// failed, in no latency but TTFT.
    pub cancelled_requests: u64,
    /// With several `--target`s, each one's main metrics (the header's `targets` by index).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetResult>,
    /// The server's own metrics over the phase, when they were scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::servers::server_metrics::ServerPhase>,
    /// Why the phase ended, when it did not simply send all its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The phase's sessions, when its requests named any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsResult>,
    /// The prefix cache as the answers' usage told it, when any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<crate::measuring::metrics::PrefixCacheSummary>,
    /// The steady-state window of a phase and its figures: the window its scenario named
    /// (`steady_window`), else, for a phase with a concurrency cap, where the requests in
    /// flight held 95 % of the cap (`metrics::steady_state`); `window.rule` says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyStateResult>,
}

/// `runner.steady_state`: the window (seconds from the phase's start) and the headline
/// figures over it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SteadyStateResult {
    pub window: crate::measuring::metrics::SteadyWindow,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub ttft: DistributionResult,
    pub tpot: DistributionResult,
    pub e2el: DistributionResult,
}

/// Which clock a phase's latencies were read on. A chunk's time is the kernel's receive
/// time of its bytes (`SO_TIMESTAMPING`) where the socket gave one, else the time the
/// client read them; a send's is the start of its first socket write where the client's
/// socket saw it, else the hand-off to the HTTP client.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct ClockResult {
    /// Content chunks of the successful requests stamped with the kernel's receive time.
    pub kernel_chunks: u64,
    /// Content chunks of the successful requests stamped with the client's read time.
    pub read_chunks: u64,
    /// Requests whose send time is the start of their first socket write.
    pub socket_write_sends: u64,
    /// Requests whose send time is the hand-off to the HTTP client.
    pub handoff_sends: u64,
    /// How long those first socket writes took: the bound on a send time's error.
    pub send_write: DistributionResult,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RunnerMetrics(pub BTreeMap<String, Value>);

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct PackageId {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct TokenAccountingResult {
    pub counted_by: String,
    pub usage_requests: u64,
    pub usage_tokens: u64,
    pub tokenizer_tokens: u64,
    pub chunks: u64,
}

/// A distribution, in ms: `count`, `mean_ms`, `median_ms`, `std_ms`, `min_ms`, `max_ms`
/// and `p<N>_ms` for each reported percentile.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct DistributionResult {
    pub count: u64,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub std_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    #[serde(flatten)]
    #[cfg_attr(test, schemars(with = "schema::PercentileMs"))]
    pub percentiles: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct TagResult {
    pub tag: String,
    pub completed: u64,
    pub failed: u64,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub ttft: DistributionResult,
    pub tpot: DistributionResult,
    pub e2el: DistributionResult,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct TargetResult {
    /// Its index among the run's `--target`s.
    pub target: usize,
    pub url: String,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub ttft: DistributionResult,
    pub tpot: DistributionResult,
    pub e2el: DistributionResult,
}

/// A phase's sessions: counts, per-session figures, tool calls, waits and TTFT by turn
/// index. Times in ms; `total`, `mean` (per session) and `max` of each per-session figure.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SessionsResult {
    pub sessions: u64,
    pub root_sessions: u64,
    pub child_sessions: u64,
    pub requests: u64,
    pub failed: u64,
    /// Each session's first send to its last end.
    pub duration: DistributionResult,
    pub requests_per_session: PerSessionResult,
    pub tool_calls_per_session: PerSessionResult,
    /// Waits before a request for tool results, and otherwise (think time), ms.
    pub tool_wait_ms: PerSessionResult,
    pub think_ms: PerSessionResult,
    pub tool_call_requests: u64,
    pub tool_calls: u64,
    pub tool_call_tokens: u64,
    /// From send to the first chunk of a tool call.
    pub time_to_first_tool_call: DistributionResult,
    /// Sessions whose server reported cached prompt tokens, and the mean of their cached
    /// shares (0 to 1); `null` when none did.
    pub cache_sessions: u64,
    pub mean_cache_hit_share: Option<f64>,
    pub turns: Vec<TurnResult>,
    /// What the caps on kept sessions and turn indices left out.
    pub overflow_sessions: u64,
    pub overflow_requests: u64,
    pub overflow_turn_requests: u64,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct PerSessionResult {
    pub total: f64,
    pub mean: f64,
    pub max: f64,
}

/// TTFT at one turn index (the requests a session sent before).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct TurnResult {
    pub turn: u32,
    pub requests: u64,
    pub completed: u64,
    pub mean_input_tokens: f64,
    pub ttft: DistributionResult,
}

#[cfg(test)]
mod schema;
mod series;
pub use series::{SeriesResult, SERIES_KEY};
