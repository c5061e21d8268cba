//! The built-in target: a simulated OpenAI-compatible LLM server on loopback.
//!
//! With no `--target` the runner benchmarks this server over real HTTP, and the tests
//! measure against it, so its timing is exact: the `fixed` profile emits chunks on absolute
//! deadlines, and the `default` profile models a continuous-batching engine (vLLM on one
//! H100 serving a ~9B model) whose TTFT and TPOT respond to load.
//!
//! - [`profile`]: `--sim-*` flags, profiles and their defaults.
//! - [`server`]: routes, handlers, and the server thread.
//! - `openai`: request parsing and the JSON / SSE wire format; `responses`, `messages`:
//!   OpenAI Responses and Anthropic Messages, parsed as the chat request they mean;
//!   `answer`: what their writers share; `wire`: which of them a request speaks;
//!   `embeddings`: `/v1/embeddings`.
//! - `engine`: a request's timed event stream; `batch`: the continuous-batching scheduler
//!   (both sleep on [`crate::both_sides::timer`], the timer the dispatcher uses too);
//!   `wake_lead`: how early the scheduler aims its wake-ups, so tokens leave on time.
//! - `metrics`: `/metrics` in vLLM's names; `prefix`: the `default` profile's prefix cache;
//!   `power`: `--sim-power`, a GPU power model at `/dcgm/metrics` in DCGM's names.
//! - `send_log`: `--sim-send-log`, the actual send time of every chunk; `arrival`: when
//!   each request arrived (the kernel's receive time of its headers).
//! - `words`: the output text, one OpenAI token per word; `tool`: answers that are a
//!   tool call (`tool_choice`, `sim_tool_call`, `--sim-tool-call-ratio`).
//! - [`twin_file`]: `--sim-profile twin.toml`, a profile fitted from real runs by `runner calibrate`.
//! - `spec_decode`: `--sim-spec-decode`, a draft model; its acceptance counts in `/metrics`.
//! - [`whatif`]: `--sim KEY=VALUE`, what-if overrides of the batching engine in vLLM's
//!   words; `router`: `replicas=N` engines behind one endpoint and the router between them.

mod answer;
mod arrival;
mod batch;
pub mod decode_curve;
mod embeddings;
mod engine;
mod error;
mod event;
mod messages;
mod metrics;
mod openai;
mod pipe_server;
pub mod power;
mod prefix;
pub mod profile;
mod responses;
mod router;
mod send_log;
pub mod server;
mod spec_decode;
mod tool;
pub mod twin_file;
mod wake_lead;
pub mod whatif;
mod wire;
mod words;

#[cfg(test)]
mod tests;

pub use error::SimError;
pub use profile::{
    BatchParams, SimArgs, SimConfig, SlowRequests, Timing, TokenCounter, DEFAULT_MODEL, PROFILES,
};
pub use server::{bind, serve, SimServer};
