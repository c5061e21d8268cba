//! Profiles of the simulated server: the `--sim-*` flags, their defaults and validation.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::decode_curve::DecodeCurve;
use super::error::SimError;
use super::twin_file::{is_twin_path, TwinEngine, TwinFile};
use super::whatif::{EngineOverrides, Replicas, WhatIf};

/// The model name served when `--sim-model` is not given.
pub const DEFAULT_MODEL: &str = "sim/llm-9b";

/// Names accepted by `--sim-profile`.
pub const PROFILES: [&str; 3] = ["default", "fixed", "zero"];

// `fixed`: round numbers that tests assert on (mean TTFT 50 ms, TPOT 10 ms).
const FIXED_TTFT_MS: f64 = 50.0;
const FIXED_ITL_MS: f64 = 10.0;

// `default`: one H100 80 GB serving a ~9B dense model with vLLM. Checked against GPUStack's
// published tuning report for Qwen3.5-9B on one H100 (GPUStack performance lab, "Optimizing
// Qwen3.5-9B Throughput"; vLLM v0.17), the same report scenarios/throughput.rhai and its
// siblings reproduce.
/// vLLM's long-standing `--max-num-seqs` default; the reference's throughput-tuned
/// configuration uses 512 (`--sim-max-seqs 512`).
const MAX_SEQS: usize = 256;
/// vLLM's chunked-prefill token budget per step for online serving on H100-class GPUs.
const MAX_BATCHED_TOKENS: usize = 8192;
/// 80 GB × 0.9 utilisation − 18 GB of bf16 weights ≈ 54 GB of KV cache; a 9B GQA model
/// stores 32 layers × 8 KV heads × 128 dims × 2 (K and V) × 2 bytes = 128 KiB per token,
/// so about 420k tokens.
const KV_TOKENS: usize = 400_000;
/// About 50k prefill tokens/s (2 × 9e9 FLOP per token near the H100's dense bf16 peak):
/// a 1024-token prompt costs 20 ms, so the reference's throughput profile (1000 × 1024 in,
/// 128 out) lands near its 30–34k total tok/s.
const PREFILL_US_PER_TOKEN: f64 = 20.0;
/// A decode step at small batch is bound by reading the 18 GB of weights at ~3 TB/s:
/// ~6 ms, i.e. ~6 ms TPOT for a lone stream (the reference's generation-heavy run shows
/// 7–9 ms ITL at concurrency 18).
const DECODE_STEP_MS: f64 = 6.0;
/// Attention over each sequence's KV plus sampling: 6 ms + 55 µs × 512 ≈ 34 ms TPOT at
/// batch 512, the reference's throughput-profile TPOT (34.6 ms).
const DECODE_US_PER_SEQ: f64 = 55.0;

// Upper bounds that keep every computed instant far from overflow.
const MAX_MS: f64 = 3_600_000.0;
const MAX_WORKERS: usize = 256;

/// Counts the prompt tokens of a text; the runner passes its tokenizer here.
pub type TokenCounter = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// Flags that select and override a profile. Flattened into two clap commands, so every flag is prefixed `--sim-`.
#[derive(clap::Args, Clone, Debug)]
pub struct SimArgs {
    /// Named profile: `default` (continuous batching, H100-like), `fixed` (exact TTFT and gap, unlimited concurrency), `zero` (no delays at all), or a twin file `FILE.toml` that `runner calibrate` fitted from real runs (the `default` engine with its parameters; the `default` profile's --sim-* flags override them)
    #[arg(
        long = "sim-profile",
        default_value = "default",
        value_name = "NAME|FILE.toml"
    )]
    pub profile: String,
    /// Model name served by the simulator [default: sim/llm-9b]
    #[arg(long = "sim-model", value_name = "NAME")]
    pub model: Option<String>,
    /// `fixed` profile: time from request arrival to the first content chunk, in ms [default: 50]
    #[arg(long = "sim-ttft-ms", value_name = "MS")]
    pub ttft_ms: Option<f64>,
    /// `fixed` profile: each request's first token comes up to MS later than --sim-ttft-ms,
    /// uniformly, the delay picked by a hash of its body (the same request gets the same
    /// TTFT every run; another seed's requests get others), so TTFT varies from request to
    /// request as a real server's does and its mean is --sim-ttft-ms + MS/2 [default: 0]
    #[arg(long = "sim-ttft-jitter-ms", value_name = "MS")]
    pub ttft_jitter_ms: Option<f64>,
    /// `fixed` profile: gap between consecutive chunks, in ms [default: 10]
    #[arg(long = "sim-itl-ms", value_name = "MS")]
    pub itl_ms: Option<f64>,
    /// `default` profile: most sequences running at once; the rest wait in FIFO order [default: 256]
    #[arg(long = "sim-max-seqs", value_name = "N")]
    pub max_seqs: Option<usize>,
    /// `default` profile: token budget of one engine step (decodes + chunked prefill) [default: 8192]
    #[arg(long = "sim-max-batched-tokens", value_name = "N")]
    pub max_batched_tokens: Option<usize>,
    /// `default` profile: KV-cache capacity in tokens; a request reserves prompt + max_tokens [default: 400000]
    #[arg(long = "sim-kv-tokens", value_name = "N")]
    pub kv_tokens: Option<usize>,
    /// `default` profile: step time added per prefilled prompt token, in µs [default: 20]
    #[arg(long = "sim-prefill-us-per-token", value_name = "US")]
    pub prefill_us_per_token: Option<f64>,
    /// `default` profile: fixed cost of every engine step, in ms [default: 6]; on a twin with a decode_curve, this or --sim-decode-us-per-seq prices decode steps by the line instead
    #[arg(long = "sim-decode-step-ms", value_name = "MS")]
    pub decode_step_ms: Option<f64>,
    /// `default` profile: step time added per decoding sequence, in µs [default: 55]
    #[arg(long = "sim-decode-us-per-seq", value_name = "US")]
    pub decode_us_per_seq: Option<f64>,
    /// `default` profile: a draft model for speculative decoding, one acceptance probability per draft position (`0.8,0.6,0.4`: 3 draft tokens per step; a position is accepted with its probability once every earlier one was); each decode step yields 1 + the accepted tokens, and /metrics gets vLLM's spec-decode counters
    #[arg(long = "sim-spec-decode", value_name = "P1,P2,...", value_parser = super::spec_decode::parse)]
    pub spec_decode: Option<super::spec_decode::DraftModel>,
    /// Tokens grouped into one SSE event (the last may carry fewer) [default: 1]
    #[arg(long = "sim-tokens-per-chunk", value_name = "N")]
    pub tokens_per_chunk: Option<usize>,
    /// Threads of the simulator's own tokio runtime [default: 1]
    #[arg(long = "sim-workers", value_name = "N")]
    pub workers: Option<usize>,
    /// Chat completions: the first N generated tokens of each response are reasoning, sent as `delta.reasoning_content` (`message.reasoning_content` when not streaming) as vLLM does with a reasoning parser; they count in usage and max_tokens [default: 0]
    #[arg(long = "sim-reasoning-tokens", value_name = "N")]
    pub reasoning_tokens: Option<usize>,
    /// Chat, Responses and Messages: the share of requests that declare `tools` answered with one tool call in place of text (arguments of max_tokens tokens, finish `tool_calls` / `tool_use`), the same requests every run; a request's `tool_choice` of "required" or a named function, or its body field `"sim_tool_call": true`, always gets one, `tool_choice` "none" never [default: 0]
    #[arg(long = "sim-tool-call-ratio", value_name = "SHARE")]
    pub tool_call_ratio: Option<f64>,
    /// Every K-th request received (K, 2K, 3K, ...) is delayed by --sim-slow-ms before its first token; needs --sim-slow-ms
    #[arg(long = "sim-slow-every", value_name = "K")]
    pub slow_every: Option<u64>,
    /// Delay added before the first token of every --sim-slow-every-th request, in ms; needs --sim-slow-every
    #[arg(long = "sim-slow-ms", value_name = "MS")]
    pub slow_ms: Option<f64>,
    /// Write one JSON line per finished stream to FILE: `{"id", "request_id", "handler_ms",
    /// "chunk_ms": [...]}`, the time each content chunk was actually sent after the kernel
    /// received the request's headers (to check a client's TTFT and E2EL against what the
    /// server really did), and when its handler ran
    #[arg(long = "sim-send-log", value_name = "FILE")]
    pub send_log: Option<PathBuf>,
    /// A power model served at /dcgm/metrics in NVIDIA DCGM exporter's names (for
    /// `--power-metrics`): IDLE watts all the time plus J joules per generated token
    #[arg(long = "sim-power", value_name = "idle=W,per_token=J", value_parser = super::power::parse)]
    pub power: Option<super::power::PowerModel>,
    /// A what-if on the batching engine (`default` or a twin), repeatable or comma-separated, keys in vLLM's words: max_num_seqs, max_num_batched_tokens (the chunked-prefill budget per step), kv_tokens or num_gpu_blocks [with block_size, default 16], prefill_us_per_token, decode_step_ms, decode_us_per_seq (either sets a twin's decode_curve aside for the line), replicas (N engines behind one endpoint), router (round-robin | least-loaded); a key here wins over its --sim-* flag, and every report lists the overrides
    #[arg(long = "sim", value_name = "KEY=VALUE", value_delimiter = ',')]
    pub what_if: Vec<String>,
}

impl Default for SimArgs {
    /// The `default` profile with no overrides (what clap yields for no flags).
    fn default() -> Self {
        SimArgs {
            profile: "default".to_string(),
            model: None,
            ttft_ms: None,
            ttft_jitter_ms: None,
            itl_ms: None,
            max_seqs: None,
            max_batched_tokens: None,
            kv_tokens: None,
            prefill_us_per_token: None,
            decode_step_ms: None,
            decode_us_per_seq: None,
            spec_decode: None,
            tokens_per_chunk: None,
            workers: None,
            reasoning_tokens: None,
            tool_call_ratio: None,
            slow_every: None,
            slow_ms: None,
            send_log: None,
            power: None,
            what_if: Vec::new(),
        }
    }
}

/// How the simulated engine spends time.
#[derive(Clone, Debug, PartialEq)]
pub enum Timing {
    /// Every request on its own: first chunk `ttft` after arrival, then one chunk every `itl`.
    Fixed { ttft: Duration, itl: Duration },
    /// No delays at all.
    Zero,
    /// A continuous-batching engine (see [`BatchParams`]).
    Batching(BatchParams),
}

/// The continuous-batching model of the `default` profile.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchParams {
    pub max_seqs: usize,
    pub max_batched_tokens: usize,
    pub kv_tokens: usize,
    pub prefill_us_per_token: f64,
    pub decode_step_ms: f64,
    pub decode_us_per_seq: f64,
    /// A twin's decode cost by sequences decoding, where the fit found the line above
    /// does not describe its engine: it prices a step that only decodes instead of
    /// `decode_step_ms` + `decode_us_per_seq` × decoding (a step that prefills keeps the
    /// line). A flag or `--sim` key that sets either of those sets the line instead.
    pub decode_curve: Option<DecodeCurve>,
    /// `--sim-spec-decode`'s draft model, if any.
    pub spec_decode: Option<super::spec_decode::DraftModel>,
}

impl Default for BatchParams {
    fn default() -> Self {
        BatchParams {
            max_seqs: MAX_SEQS,
            max_batched_tokens: MAX_BATCHED_TOKENS,
            kv_tokens: KV_TOKENS,
            prefill_us_per_token: PREFILL_US_PER_TOKEN,
            decode_step_ms: DECODE_STEP_MS,
            decode_us_per_seq: DECODE_US_PER_SEQ,
            decode_curve: None,
            spec_decode: None,
        }
    }
}

impl BatchParams {
    /// Simulated GPU time of one step with `decoding` sequences and `prefill` prompt tokens.
    pub fn step_time(&self, decoding: usize, prefill: usize) -> Duration {
        // A twin's curve prices the steps that only decode (see `decode_curve`).
        let decode_us = match &self.decode_curve {
            Some(curve) if prefill == 0 => curve.ms(decoding) * 1000.0,
            _ => self.decode_step_ms * 1000.0 + self.decode_us_per_seq * decoding as f64,
        };
        let us = decode_us + self.prefill_us_per_token * prefill as f64;
        // Parameters are validated finite and non-negative; the clamp keeps a huge step
        // from overflowing an Instant.
        Duration::from_nanos((us * 1000.0).round().clamp(0.0, MAX_MS * 1e6) as u64)
    }
}

/// Every `every`-th request the server receives (1-based) waits `delay` more before its first token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowRequests {
    /// At least 1.
    pub every: u64,
    pub delay: Duration,
}

impl SlowRequests {
    /// The extra delay of the request that arrived `nth` (counting from 1).
    pub fn delay_of(&self, nth: u64) -> Duration {
        if nth.is_multiple_of(self.every.max(1)) {
            self.delay
        } else {
            Duration::ZERO
        }
    }
}

/// A complete simulator configuration.
#[derive(Clone)]
pub struct SimConfig {
    /// Profile name it was built from (for reports).
    pub profile: String,
    /// Model name served on `/v1/models` and required in requests that name one.
    pub model: String,
    pub timing: Timing,
    /// Tokens per SSE event, at least 1.
    pub tokens_per_chunk: usize,
    /// Threads of the runtime [`super::SimServer::start`] builds, at least 1.
    pub workers: usize,
    /// Chat completions: leading tokens of each response sent as `reasoning_content` (0 = none).
    pub reasoning_tokens: usize,
    /// The share of requests with tools answered with a tool call, in [0, 1].
    pub tool_call_ratio: f64,
    /// Requests slowed down before their first token, if any.
    pub slow: Option<SlowRequests>,
    /// `fixed`: the most a request's first token comes later than its TTFT (a delay
    /// picked by a hash of its body, see [`SimConfig::ttft_jitter_of`]).
    pub ttft_jitter: Duration,
    /// Prompt token counter; when `None`, the estimate is ceil(bytes / 4).
    pub prompt_token_counter: Option<TokenCounter>,
    /// Where to log each stream's actual chunk send times (`--sim-send-log`).
    pub send_log: Option<PathBuf>,
    /// `--sim-power`: the GPU's power model, served at `/dcgm/metrics`.
    pub power: Option<super::power::PowerModel>,
    /// The twin file the profile came from (`--sim-profile FILE.toml`), for reports.
    pub twin: Option<Arc<TwinFile>>,
    /// `--sim replicas=N,router=…`: the batching engines behind the endpoint.
    pub replicas: Replicas,
    /// The engine parameters set over the profile's (`--sim` and the `--sim-*` engine
    /// flags), as `(vLLM key, value)`, so every report of a what-if says it is one.
    pub overrides: Vec<(String, String)>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            profile: "default".to_string(),
            model: DEFAULT_MODEL.to_string(),
            timing: Timing::Batching(BatchParams::default()),
            tokens_per_chunk: 1,
            workers: 1,
            reasoning_tokens: 0,
            tool_call_ratio: 0.0,
            slow: None,
            ttft_jitter: Duration::ZERO,
            prompt_token_counter: None,
            send_log: None,
            power: None,
            twin: None,
            replicas: Replicas::default(),
            overrides: Vec::new(),
        }
    }
}

impl fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimConfig")
            .field("profile", &self.profile)
            .field("model", &self.model)
            .field("timing", &self.timing)
            .field("tokens_per_chunk", &self.tokens_per_chunk)
            .field("workers", &self.workers)
            .field("reasoning_tokens", &self.reasoning_tokens)
            .field("tool_call_ratio", &self.tool_call_ratio)
            .field("slow", &self.slow)
            .field("ttft_jitter", &self.ttft_jitter)
            .field("prompt_token_counter", &self.prompt_token_counter.is_some())
            .field("send_log", &self.send_log)
            .field("power", &self.power)
            .field("twin", &self.twin)
            .field("replicas", &self.replicas)
            .field("overrides", &self.overrides)
            .finish()
    }
}

impl SimConfig {
    /// The named profile with its defaults.
    pub fn from_profile(name: &str) -> Result<SimConfig, SimError> {
        SimArgs {
            profile: name.to_string(),
            ..SimArgs::default()
        }
        .to_config()
    }

    /// Count prompt tokens with `counter` (e.g. the run's tokenizer) instead of bytes / 4.
    pub fn with_prompt_token_counter(
        mut self,
        counter: impl Fn(&str) -> usize + Send + Sync + 'static,
    ) -> SimConfig {
        self.prompt_token_counter = Some(Arc::new(counter));
        self
    }

    /// The extra delay before the first token of the request with `body`: a share of
    /// [`SimConfig::ttft_jitter`] drawn from the body's hash, uniform over requests.
    pub fn ttft_jitter_of(&self, body: &[u8]) -> Duration {
        if self.ttft_jitter.is_zero() {
            return Duration::ZERO;
        }
        // The top 53 bits of the hash as a fraction in [0, 1), as the tool-call ratio reads it.
        let share = (super::tool::body_hash(body) >> 11) as f64 / (1u64 << 53) as f64;
        self.ttft_jitter.mul_f64(share)
    }

    /// Prompt tokens of `text`, by the counter or the 4-bytes-per-token estimate.
    pub fn count_prompt_tokens(&self, text: &str) -> usize {
        match &self.prompt_token_counter {
            Some(count) => count(text),
            None => text.len().div_ceil(4),
        }
    }
}

impl SimArgs {
    /// Resolve the profile and apply every override, rejecting flags that do not apply.
    pub fn to_config(&self) -> Result<SimConfig, SimError> {
        let twin = if is_twin_path(&self.profile) {
            Some(Arc::new(TwinFile::load(std::path::Path::new(
                &self.profile,
            ))?))
        } else {
            None
        };
        let what_if = WhatIf::parse(&self.what_if)?;
        let timing = match self.profile.as_str() {
            _ if twin.is_some() => {
                self.reject_fixed_flags()?;
                let base = match &twin {
                    Some(t) => twin_base(t, &self.profile)?,
                    None => BatchParams::default(),
                };
                Timing::Batching(self.what_if_params(base, &what_if)?)
            }
            "default" => {
                self.reject_fixed_flags()?;
                Timing::Batching(self.what_if_params(BatchParams::default(), &what_if)?)
            }
            "fixed" | "zero" if !what_if.is_empty() => {
                return Err(SimError::Override {
                    item: what_if.first().unwrap_or_default(),
                    reason: format!(
                        "the `{}` profile has no batching engine; --sim applies to the `default` profile and to twins (FILE.toml)",
                        self.profile
                    ),
                });
            }
            "fixed" => {
                self.reject_batch_flags()?;
                Timing::Fixed {
                    ttft: millis("ttft-ms", self.ttft_ms.unwrap_or(FIXED_TTFT_MS))?,
                    itl: millis("itl-ms", self.itl_ms.unwrap_or(FIXED_ITL_MS))?,
                }
            }
            "zero" => {
                self.reject_fixed_flags()?;
                self.reject_batch_flags()?;
                Timing::Zero
            }
            other => {
                return Err(SimError::UnknownProfile {
                    name: other.to_string(),
                    known: PROFILES.join(", "),
                })
            }
        };
        let model = self
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_string());
        if model.trim().is_empty() {
            return Err(invalid("model", &model, "the model name must not be empty"));
        }
        Ok(SimConfig {
            profile: self.profile.clone(),
            model,
            timing,
            tokens_per_chunk: at_least_one("tokens-per-chunk", self.tokens_per_chunk, 1)?,
            workers: bounded("workers", self.workers.unwrap_or(1), 1, MAX_WORKERS)?,
            reasoning_tokens: self.reasoning_tokens.unwrap_or(0),
            tool_call_ratio: self.tool_call_ratio()?,
            slow: self.slow()?,
            ttft_jitter: millis("ttft-jitter-ms", self.ttft_jitter_ms.unwrap_or(0.0))?,
            prompt_token_counter: None,
            send_log: self.send_log.clone(),
            power: self.power,
            twin,
            replicas: what_if.replicas()?,
            overrides: self.overrides(&what_if),
        })
    }

    /// `base` with the `--sim-*` engine flags, then `--sim`'s keys over them (a key given
    /// both ways takes `--sim`'s value: it is the what-if layer, applied last), checked.
    fn what_if_params(&self, base: BatchParams, what_if: &WhatIf) -> Result<BatchParams, SimError> {
        let p = with_overrides(self.batch_params(base)?, what_if.engine()?);
        // Every running sequence must be able to decode in every step (vLLM enforces the same).
        if p.max_batched_tokens < p.max_seqs {
            return Err(invalid(
                "max-batched-tokens",
                &p.max_batched_tokens.to_string(),
                &format!(
                    "the step's token budget (max_num_batched_tokens) must be at least the number of sequences (max_num_seqs, {})",
                    p.max_seqs
                ),
            ));
        }
        Ok(p)
    }

    /// The engine parameters set over the profile's, in vLLM's words: the `--sim-*` engine
    /// flags, then `--sim`'s keys (which replace a flag's entry of the same key).
    fn overrides(&self, what_if: &WhatIf) -> Vec<(String, String)> {
        let flags = [
            ("max_num_seqs", self.max_seqs.map(|v| v.to_string())),
            (
                "max_num_batched_tokens",
                self.max_batched_tokens.map(|v| v.to_string()),
            ),
            ("kv_tokens", self.kv_tokens.map(|v| v.to_string())),
            (
                "prefill_us_per_token",
                self.prefill_us_per_token.map(|v| v.to_string()),
            ),
            ("decode_step_ms", self.decode_step_ms.map(|v| v.to_string())),
            (
                "decode_us_per_seq",
                self.decode_us_per_seq.map(|v| v.to_string()),
            ),
        ];
        let mut out: Vec<(String, String)> = flags
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?)))
            .collect();
        for (key, value) in what_if.applied() {
            // num_gpu_blocks sets the KV capacity the kv_tokens flag set.
            let replaces = |k: &str| k == key || (key == "num_gpu_blocks" && k == "kv_tokens");
            out.retain(|(k, _)| !replaces(k));
            out.push((key.clone(), value.clone()));
        }
        out
    }

    fn tool_call_ratio(&self) -> Result<f64, SimError> {
        match self.tool_call_ratio {
            None => Ok(0.0),
            Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
            Some(r) => Err(invalid(
                "tool-call-ratio",
                &r.to_string(),
                "it must be a share between 0 and 1",
            )),
        }
    }

    fn slow(&self) -> Result<Option<SlowRequests>, SimError> {
        match (self.slow_every, self.slow_ms) {
            (None, None) => Ok(None),
            (Some(every), Some(ms)) => {
                if every == 0 {
                    return Err(invalid("slow-every", "0", "it must be at least 1"));
                }
                Ok(Some(SlowRequests {
                    every,
                    delay: millis("slow-ms", ms)?,
                }))
            }
            (Some(_), None) => Err(SimError::MissingPair {
                flag: "slow-every",
                other: "slow-ms",
            }),
            (None, Some(_)) => Err(SimError::MissingPair {
                flag: "slow-ms",
                other: "slow-every",
            }),
        }
    }

    /// `d`'s parameters (the `default` profile's or a twin's) with the flags' overrides, validated.
    fn batch_params(&self, d: BatchParams) -> Result<BatchParams, SimError> {
        let p = BatchParams {
            max_seqs: at_least_one("max-seqs", self.max_seqs, d.max_seqs)?,
            max_batched_tokens: at_least_one(
                "max-batched-tokens",
                self.max_batched_tokens,
                d.max_batched_tokens,
            )?,
            kv_tokens: at_least_one("kv-tokens", self.kv_tokens, d.kv_tokens)?,
            prefill_us_per_token: number(
                "prefill-us-per-token",
                self.prefill_us_per_token.unwrap_or(d.prefill_us_per_token),
                MAX_MS * 1000.0,
                "microseconds",
            )?,
            decode_step_ms: number(
                "decode-step-ms",
                self.decode_step_ms.unwrap_or(d.decode_step_ms),
                MAX_MS,
                "milliseconds",
            )?,
            decode_us_per_seq: number(
                "decode-us-per-seq",
                self.decode_us_per_seq.unwrap_or(d.decode_us_per_seq),
                MAX_MS * 1000.0,
                "microseconds",
            )?,
            decode_curve: unless_the_line_is_set(
                d.decode_curve,
                self.decode_step_ms,
                self.decode_us_per_seq,
            ),
            spec_decode: self.spec_decode.clone(),
        };
        Ok(p)
    }

    fn reject_fixed_flags(&self) -> Result<(), SimError> {
        let hint = "only the `fixed` profile has a fixed TTFT and gap";
        self.reject(
            &[
                ("ttft-ms", self.ttft_ms.is_some()),
                ("ttft-jitter-ms", self.ttft_jitter_ms.is_some()),
                ("itl-ms", self.itl_ms.is_some()),
            ],
            hint,
        )
    }

    fn reject_batch_flags(&self) -> Result<(), SimError> {
        let hint = "only the `default` profile models batching";
        self.reject(
            &[
                ("max-seqs", self.max_seqs.is_some()),
                ("max-batched-tokens", self.max_batched_tokens.is_some()),
                ("kv-tokens", self.kv_tokens.is_some()),
                ("prefill-us-per-token", self.prefill_us_per_token.is_some()),
                ("decode-step-ms", self.decode_step_ms.is_some()),
                ("decode-us-per-seq", self.decode_us_per_seq.is_some()),
                ("spec-decode", self.spec_decode.is_some()),
            ],
            hint,
        )
    }

    fn reject(&self, flags: &[(&'static str, bool)], hint: &'static str) -> Result<(), SimError> {
        match flags.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(SimError::NotApplicable {
                flag,
                profile: self.profile.clone(),
                hint,
            }),
            None => Ok(()),
        }
    }
}

/// A twin's decode curve, unless a `--sim-*` flag or `--sim` key set a cost of the line
/// (`decode_step_ms`, `decode_us_per_seq`): a what-if that prices the line asks for the line.
fn unless_the_line_is_set(
    curve: Option<DecodeCurve>,
    step_ms: Option<f64>,
    per_seq_us: Option<f64>,
) -> Option<DecodeCurve> {
    curve.filter(|_| step_ms.is_none() && per_seq_us.is_none())
}

/// `p` with `--sim`'s engine keys over it.
fn with_overrides(p: BatchParams, o: EngineOverrides) -> BatchParams {
    BatchParams {
        max_seqs: o.max_seqs.unwrap_or(p.max_seqs),
        max_batched_tokens: o.max_batched_tokens.unwrap_or(p.max_batched_tokens),
        kv_tokens: o.kv_tokens.unwrap_or(p.kv_tokens),
        prefill_us_per_token: o.prefill_us_per_token.unwrap_or(p.prefill_us_per_token),
        decode_step_ms: o.decode_step_ms.unwrap_or(p.decode_step_ms),
        decode_us_per_seq: o.decode_us_per_seq.unwrap_or(p.decode_us_per_seq),
        decode_curve: unless_the_line_is_set(p.decode_curve, o.decode_step_ms, o.decode_us_per_seq),
        spec_decode: p.spec_decode,
    }
}

/// A twin's engine as the `default` profile's parameters (validated by `batch_params`).
fn twin_params(e: &TwinEngine) -> BatchParams {
    BatchParams {
        max_seqs: e.max_seqs,
        max_batched_tokens: e.max_batched_tokens,
        kv_tokens: e.kv_tokens,
        prefill_us_per_token: e.prefill_us_per_token,
        decode_step_ms: e.decode_step_ms,
        decode_us_per_seq: e.decode_us_per_seq,
        decode_curve: None,
        spec_decode: None,
    }
}

/// The twin's own values, checked as the flags are (before any flag overrides them), a
/// refusal naming the file's key rather than a flag the user never gave.
fn twin_base(twin: &TwinFile, path: &str) -> Result<BatchParams, SimError> {
    let mut base = SimArgs::default()
        .batch_params(twin_params(&twin.engine))
        .map_err(|e| match e {
            SimError::InvalidValue {
                flag,
                value,
                reason,
            } => SimError::TwinValue {
                path: path.to_string(),
                key: flag.replace('-', "_"),
                value,
                reason,
            },
            other => other,
        })?;
    base.decode_curve =
        match &twin.engine.decode_curve {
            Some(knots) => Some(DecodeCurve::new(knots.clone(), MAX_MS).map_err(|reason| {
                SimError::TwinValue {
                    path: path.to_string(),
                    key: "decode_curve".into(),
                    value: format!("{} knots", knots.len()),
                    reason,
                }
            })?),
            None => None,
        };
    Ok(base)
}

fn invalid(flag: &'static str, value: &str, reason: &str) -> SimError {
    SimError::InvalidValue {
        flag,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn at_least_one(
    flag: &'static str,
    value: Option<usize>,
    default: usize,
) -> Result<usize, SimError> {
    bounded(flag, value.unwrap_or(default), 1, usize::MAX)
}

fn bounded(flag: &'static str, value: usize, min: usize, max: usize) -> Result<usize, SimError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else if max == usize::MAX {
        Err(invalid(
            flag,
            &value.to_string(),
            &format!("it must be at least {min}"),
        ))
    } else {
        Err(invalid(
            flag,
            &value.to_string(),
            &format!("it must be between {min} and {max}"),
        ))
    }
}

/// A duration in milliseconds, validated by [`number`].
fn millis(flag: &'static str, ms: f64) -> Result<Duration, SimError> {
    let ms = number(flag, ms, MAX_MS, "milliseconds")?;
    Ok(Duration::from_nanos((ms * 1e6).round() as u64))
}

/// A finite number between 0 and `max` (an hour in its unit), so no instant can overflow.
fn number(flag: &'static str, value: f64, max: f64, unit: &str) -> Result<f64, SimError> {
    if value.is_finite() && (0.0..=max).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(
            flag,
            &readable(value),
            &format!("it must be a number of {unit} between 0 and {max}"),
        ))
    }
}

/// `value` in plain digits when short, else in scientific notation: 1e308 would otherwise
/// print as 309 digits.
fn readable(value: f64) -> String {
    let magnitude = value.abs();
    if value.is_finite() && magnitude != 0.0 && !(1e-4..1e9).contains(&magnitude) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_have_their_defaults() {
        let d = SimConfig::from_profile("default").expect("default profile");
        assert_eq!(d.model, DEFAULT_MODEL);
        assert_eq!(d.timing, Timing::Batching(BatchParams::default()));
        assert_eq!((d.tokens_per_chunk, d.workers), (1, 1));
        let f = SimConfig::from_profile("fixed").expect("fixed profile");
        assert_eq!(
            f.timing,
            Timing::Fixed {
                ttft: Duration::from_millis(50),
                itl: Duration::from_millis(10)
            }
        );
        assert_eq!(
            SimConfig::from_profile("zero").expect("zero").timing,
            Timing::Zero
        );
        assert_eq!(
            SimArgs::default().to_config().expect("args").timing,
            d.timing
        );
    }

    #[test]
    fn overrides_apply() {
        let args = SimArgs {
            model: Some("m".into()),
            max_seqs: Some(2),
            decode_step_ms: Some(1.5),
            tokens_per_chunk: Some(4),
            workers: Some(2),
            ..SimArgs::default()
        };
        let c = args.to_config().expect("config");
        assert_eq!(
            (c.model.as_str(), c.tokens_per_chunk, c.workers),
            ("m", 4, 2)
        );
        match c.timing {
            Timing::Batching(p) => assert_eq!((p.max_seqs, p.decode_step_ms), (2, 1.5)),
            other => panic!("unexpected timing {other:?}"),
        }
        let fixed = SimArgs {
            profile: "fixed".into(),
            ttft_ms: Some(5.0),
            itl_ms: Some(0.5),
            ..SimArgs::default()
        };
        assert_eq!(
            fixed.to_config().expect("fixed").timing,
            Timing::Fixed {
                ttft: Duration::from_millis(5),
                itl: Duration::from_micros(500)
            }
        );
    }

    #[test]
    fn bad_flags_are_rejected_with_a_clear_message() {
        let unknown = SimConfig::from_profile("turbo").expect_err("unknown profile");
        assert!(
            unknown.to_string().contains("default, fixed, zero"),
            "{unknown}"
        );
        let misplaced = SimArgs {
            ttft_ms: Some(5.0),
            ..SimArgs::default()
        };
        let e = misplaced.to_config().expect_err("ttft on default");
        assert!(e.to_string().contains("--sim-ttft-ms"), "{e}");
        let zero_seqs = SimArgs {
            max_seqs: Some(0),
            ..SimArgs::default()
        };
        assert!(zero_seqs.to_config().is_err());
        let negative = SimArgs {
            profile: "fixed".into(),
            itl_ms: Some(-1.0),
            ..SimArgs::default()
        };
        assert!(negative.to_config().is_err());
        let small_budget = SimArgs {
            max_seqs: Some(100),
            max_batched_tokens: Some(10),
            ..SimArgs::default()
        };
        assert!(small_budget.to_config().is_err());
    }

    #[test]
    fn extra_knobs_apply_to_every_profile() {
        for name in PROFILES {
            let c = SimArgs {
                profile: name.into(),
                reasoning_tokens: Some(5),
                slow_every: Some(3),
                slow_ms: Some(60.0),
                ..SimArgs::default()
            }
            .to_config()
            .expect(name);
            assert_eq!(c.reasoning_tokens, 5);
            assert_eq!(c.tool_call_ratio, 0.0);
            let slow = c.slow.expect("slow requests");
            let slow_ones: Vec<u64> = (1..=9).filter(|&n| !slow.delay_of(n).is_zero()).collect();
            assert_eq!(slow_ones, vec![3, 6, 9]);
            assert_eq!(slow.delay_of(6), Duration::from_millis(60));
        }
        let d = SimConfig::from_profile("fixed").expect("fixed");
        assert_eq!((d.reasoning_tokens, d.slow), (0, None));
        let ratio = |r| {
            SimArgs {
                tool_call_ratio: Some(r),
                ..SimArgs::default()
            }
            .to_config()
            .map(|c| c.tool_call_ratio)
        };
        assert_eq!(ratio(0.25).expect("a share"), 0.25);
        for bad in [-0.1, 1.5, f64::NAN] {
            let e = ratio(bad).expect_err("not a share");
            assert!(e.to_string().contains("--sim-tool-call-ratio"), "{e}");
        }
    }

    #[test]
    fn ttft_jitter_is_the_fixed_profiles_and_spreads_over_bodies() {
        let c = SimArgs {
            profile: "fixed".into(),
            ttft_jitter_ms: Some(10.0),
            ..SimArgs::default()
        }
        .to_config()
        .expect("fixed");
        let delays: Vec<Duration> = (0..1000)
            .map(|i| c.ttft_jitter_of(format!("{{\"prompt\":\"p{i}\"}}").as_bytes()))
            .collect();
        assert!(delays.iter().all(|d| *d < Duration::from_millis(10)));
        let mean_ms = delays.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / 1000.0;
        assert!(
            (mean_ms - 5.0).abs() < 0.5,
            "uniform over [0, 10): mean {mean_ms}"
        );
        assert_eq!(c.ttft_jitter_of(b"same"), c.ttft_jitter_of(b"same"));
        let other = SimArgs {
            ttft_jitter_ms: Some(1.0),
            ..SimArgs::default()
        };
        let e = other.to_config().expect_err("default profile");
        assert!(e.to_string().contains("--sim-ttft-jitter-ms"), "{e}");
    }

    #[test]
    fn slow_flags_come_together() {
        let alone = SimArgs {
            slow_every: Some(4),
            ..SimArgs::default()
        };
        let e = alone.to_config().expect_err("slow-every alone");
        assert!(e.to_string().contains("--sim-slow-ms"), "{e}");
        let alone = SimArgs {
            slow_ms: Some(4.0),
            ..SimArgs::default()
        };
        let e = alone.to_config().expect_err("slow-ms alone");
        assert!(e.to_string().contains("--sim-slow-every"), "{e}");
        let zero = SimArgs {
            slow_every: Some(0),
            slow_ms: Some(4.0),
            ..SimArgs::default()
        };
        assert!(zero.to_config().is_err());
        let negative = SimArgs {
            slow_every: Some(2),
            slow_ms: Some(-4.0),
            ..SimArgs::default()
        };
        assert!(negative.to_config().is_err());
    }

    #[test]
    fn sim_keys_win_over_the_engine_flags_and_every_override_is_recorded() {
        let c = SimArgs {
            max_seqs: Some(64),
            decode_step_ms: Some(3.0),
            what_if: vec!["max_num_seqs=512".into(), "replicas=2".into()],
            ..SimArgs::default()
        }
        .to_config()
        .expect("config");
        match &c.timing {
            Timing::Batching(p) => assert_eq!((p.max_seqs, p.decode_step_ms), (512, 3.0)),
            other => panic!("unexpected timing {other:?}"),
        }
        assert_eq!(c.replicas.count, 2);
        let recorded: Vec<String> = c
            .overrides
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            recorded,
            ["decode_step_ms=3", "max_num_seqs=512", "replicas=2"]
        );
        let budget = SimArgs {
            what_if: vec![
                "max_num_seqs=512".into(),
                "max_num_batched_tokens=256".into(),
            ],
            ..SimArgs::default()
        };
        let e = budget.to_config().expect_err("budget below the slots");
        assert!(e.to_string().contains("max_num_seqs, 512"), "{e}");
        assert!(SimConfig::from_profile("default")
            .expect("default")
            .overrides
            .is_empty());
    }

    #[test]
    fn step_time_follows_the_formula() {
        let p = BatchParams::default();
        // 6 ms + 55 µs × 512 = 34.16 ms: the reference's TPOT at batch 512.
        assert_eq!(p.step_time(512, 0), Duration::from_micros(34_160));
        assert_eq!(
            p.step_time(1, 80),
            Duration::from_micros(6_000 + 55 + 1_600)
        );
    }

    #[test]
    fn prompt_tokens_default_to_bytes_over_four() {
        let c = SimConfig::default();
        assert_eq!(c.count_prompt_tokens(""), 0);
        assert_eq!(c.count_prompt_tokens("abcde"), 2);
        let c = c.with_prompt_token_counter(|s| s.split_whitespace().count());
        assert_eq!(c.count_prompt_tokens("a b c"), 3);
    }

    /// A twin.toml with `engine` as its [engine] table.
    fn twin_file(dir: &std::path::Path, engine: &str) -> String {
        let path = dir.join("twin.toml");
        let text = format!(
            "format = 1\nsources = {{}}\nruns = []\n[engine]\n{engine}\n[fit]\nsteps = 10\nresidual_rms_ms = 0.1\nr_squared = 0.9\n"
        );
        std::fs::write(&path, text).expect("write twin");
        path.display().to_string()
    }

    #[test]
    fn a_twins_decode_curve_prices_decode_steps_until_a_flag_or_key_sets_the_line() {
        let dir = tempfile::tempdir().expect("dir");
        let engine = |curve: &str| {
            format!("max_seqs = 4\nmax_batched_tokens = 8192\nkv_tokens = 1000\nprefill_us_per_token = 1000.0\ndecode_step_ms = 1.0\ndecode_us_per_seq = 2000.0\ndecode_curve = [{curve}]")
        };
        let path = twin_file(
            dir.path(),
            &engine("{ seqs = 1, ms = 4.0 }, { seqs = 2, ms = 7.0 }, { seqs = 4, ms = 10.0 }"),
        );
        let params = |a: SimArgs| match a.to_config().expect("config").timing {
            Timing::Batching(p) => p,
            other => panic!("{other:?}"),
        };
        let twin = || SimArgs {
            profile: path.clone(),
            ..SimArgs::default()
        };
        let p = params(twin());
        assert_eq!(p.step_time(2, 0), Duration::from_millis(7));
        assert_eq!(p.step_time(3, 0), Duration::from_micros(8_500));
        // A step that prefills keeps the line: 1 + 2 × 2 + 1 × 10 ms.
        assert_eq!(p.step_time(2, 10), Duration::from_millis(15));
        // A flag or a what-if key on the line's costs prices decode steps by the line.
        let flag = SimArgs {
            decode_us_per_seq: Some(2500.0),
            ..twin()
        };
        assert_eq!(params(flag).step_time(2, 0), Duration::from_millis(6));
        let key = SimArgs {
            what_if: vec!["decode_step_ms=2".into()],
            ..twin()
        };
        assert_eq!(params(key).step_time(2, 0), Duration::from_millis(6));
        // Other keys leave the curve in place.
        let key = SimArgs {
            what_if: vec!["max_num_seqs=8".into()],
            ..twin()
        };
        assert_eq!(params(key).step_time(2, 0), Duration::from_millis(7));
        // Knots out of order are the file's key, in one line.
        let path = twin_file(
            dir.path(),
            &engine("{ seqs = 2, ms = 1.0 }, { seqs = 1, ms = 2.0 }"),
        );
        let e = SimArgs {
            profile: path.clone(),
            ..SimArgs::default()
        }
        .to_config()
        .expect_err("knots out of order")
        .to_string();
        assert_eq!(
            e,
            format!("{path} [engine] decode_curve = 2 knots is invalid: the knots' seqs must strictly increase")
        );
    }

    #[test]
    fn a_twin_files_bad_value_is_named_by_its_key_and_printed_short() {
        let dir = tempfile::tempdir().expect("dir");
        let engine = |max_seqs: &str, step: &str| {
            format!("max_seqs = {max_seqs}\nmax_batched_tokens = 8192\nkv_tokens = 1000\nprefill_us_per_token = 1.0\ndecode_step_ms = {step}\ndecode_us_per_seq = 1.0")
        };
        let args = |path: String| SimArgs {
            profile: path,
            ..SimArgs::default()
        };
        let path = twin_file(dir.path(), &engine("0", "5.0"));
        let e = args(path.clone())
            .to_config()
            .expect_err("max_seqs 0")
            .to_string();
        assert_eq!(
            e,
            format!("{path} [engine] max_seqs = 0 is invalid: it must be at least 1")
        );
        let path = twin_file(dir.path(), &engine("4", "1e308"));
        let e = args(path.clone())
            .to_config()
            .expect_err("huge step")
            .to_string();
        assert!(
            e.starts_with(&format!(
                "{path} [engine] decode_step_ms = 1e308 is invalid"
            )),
            "{e}"
        );
        let path = twin_file(dir.path(), &engine("4", "-1e-300"));
        let e = args(path)
            .to_config()
            .expect_err("negative step")
            .to_string();
        assert!(e.contains("= -1e-300 is invalid"), "{e}");
        // A flag's own bad value still names the flag, over a good twin.
        let path = twin_file(dir.path(), &engine("4", "5.0"));
        let flag = SimArgs {
            decode_step_ms: Some(1e300),
            ..args(path)
        };
        let e = flag.to_config().expect_err("flag").to_string();
        assert!(
            e.starts_with("--sim-decode-step-ms 1e300 is invalid"),
            "{e}"
        );
    }
}
