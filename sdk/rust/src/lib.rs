//! Write benchmark scenarios for `runner` in Rust, as WebAssembly components.
//!
//! A scenario decides what to send and when; the runner owns the HTTP client, the clock,
//! the scheduler, the statistics and the reports. This crate wraps the bindings of the
//! `bench:scenario@0.4.0` WIT package (`wit/scenario.wit`, the contract itself) in a
//! [`Scenario`] trait, builders for requests and phases, and helpers for arrival
//! processes, stop conditions and sessions (`sessions`: chat history, tool schemas,
//! think times, fan-out and join, a growing shared prefix).
//!
//! # A complete scenario
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "my-scenario"
//! edition = "2021"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! bench-scenario-sdk = { path = "…/sdk/rust" }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use bench_scenario_sdk::prelude::*;
//!
//! struct LongPrompts {
//!     input_tokens: u32,
//!     output_tokens: u64,
//! }
//!
//! impl Scenario for LongPrompts {
//!     fn describe() -> Description {
//!         Description::new("long_prompts", "Long prompts at a steady Poisson rate.")
//!             .param("requests", 100, "number of requests")
//!             .param("input_tokens", 32000, "prompt length, tokens")
//!             .param("output_tokens", 100, "tokens generated per request")
//!             .param("rate", 1.0, "offered request rate, req/s")
//!             .param("seed", 42, "random seed")
//!     }
//!
//!     fn new() -> Result<Self, String> {
//!         Ok(LongPrompts {
//!             input_tokens: param_u32("input_tokens")?,
//!             output_tokens: param_u64("output_tokens")?,
//!         })
//!     }
//!
//!     fn phases(&mut self) -> Result<Vec<Phase>, String> {
//!         Ok(vec![Phase::new("main")
//!             .poisson(param_f64("rate")?)
//!             .max_requests(param_u64("requests")?)])
//!     }
//!
//!     fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
//!         let prompt = synthetic_text(self.input_tokens);
//!         Ok(Request::text(prompt)
//!             .max_tokens(self.output_tokens)
//!             .ignore_eos()
//!             .input_tokens(u64::from(self.input_tokens))
//!             .into())
//!     }
//! }
//!
//! export_scenario!(LongPrompts);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (after
//! `rustup target add wasm32-wasip2`): rustc writes a component,
//! `target/wasm32-wasip2/release/my_scenario.wasm`, which `runner my_scenario.wasm` runs
//! and `runner info my_scenario.wasm` describes.
//!
//! # The sandbox
//!
//! A component sees no network, no environment variables and no real clock (time starts
//! at zero and advances one microsecond per read). It can read its own directory, read
//! only, at `/scenario` (or through [`read_file`]). Every call must return within a
//! second (`phases` within ten), and its memory is capped at 1 GiB. Randomness must come
//! from [`random`] and the other functions of this crate that draw from the run's seed,
//! so that the same seed gives the same requests.

// Lets the generated bindings and the export macro name this crate by its public path,
// so scenarios need no direct dependency on wit-bindgen.
extern crate self as bench_scenario_sdk;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

/// The raw bindings generated from `wit/scenario.wit`.
pub mod bindings {
    wit_bindgen::generate!({
        world: "scenario",
        path: "../../wit",
        pub_export_macro: true,
        default_bindings_module: "::bench_scenario_sdk::bindings",
        runtime_path: "::bench_scenario_sdk::__wit_bindgen::rt",
        bitflags_path: "::bench_scenario_sdk::__wit_bindgen::rt::bitflags",
    });
}

mod builders;
pub mod gaps;
mod host;
pub mod sessions;
pub mod stops;

#[doc(hidden)]
pub mod __export;

pub use bindings::bench::scenario::types::{
    Arrival, Cancel, Description, GammaArrival, Header, Hooks, Latency, Message, Next, Outcome,
    ParamSpec, Phase, PhaseSummary, Prompt, Request, SendStep, ServerStat, ServerValue,
    SessionState, Snapshot, Step, Tool, ToolCall, Value,
};
pub use host::*;

/// The version of the WIT package this SDK implements; the runner refuses components
/// built against an incompatible one.
pub const WIT_VERSION: &str = "0.4.0";

/// Everything a scenario usually needs: `use bench_scenario_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::sessions::{self, Chat, Prefix, ThinkTime, ToolSchema};
    pub use crate::stops::StopWhen;
    pub use crate::{
        count_tokens, decode, encode, exponential, export_scenario, gamma, gaps, log, normal, note,
        param, param_bool, param_f64, param_i64, param_str, param_u32, param_u64, rand_int, random,
        random_token_text, read_file, synthetic_text, uniform, Arrival, Description, Latency,
        Message, Next, Outcome, Phase, PhaseSummary, Prompt, Request, Scenario, ServerStat,
        SessionState, Snapshot, Step, Tool, ToolCall, Value,
    };
}

/// A benchmark scenario. The runner calls `describe` first (parameters are not known
/// yet), then `new` once the `-p` overrides are resolved, then `phases`, then for each
/// phase `next_request(phase, 0)`, `next_request(phase, 1)`, … ahead of send time. An
/// adaptive scenario ([`Scenario::NEXT_PHASE`]) then gives each further phase from
/// [`Scenario::next_phase`].
///
/// Calls come one at a time on one thread; the value `new` returns is your state.
pub trait Scenario: Sized + 'static {
    /// Name, description and parameters with defaults (see [`Description::param`]).
    /// Set [`Scenario::ON_RESPONSE`] or [`Scenario::STOP`] to enable those hooks.
    fn describe() -> Description;

    /// Builds the scenario's state; [`param`] and friends return this run's values.
    fn new() -> Result<Self, String>;

    /// The phases of the run, in order. With [`Scenario::NEXT_PHASE`] this may be only the
    /// first phases, or none.
    fn phases(&mut self) -> Result<Vec<Phase>, String>;

    /// Request `index` of `phase` (both from 0): `Ok(request.into())` to send it,
    /// `Ok(Next::Done)` when the phase's dataset is exhausted, or `Ok(Next::Wait)` to be
    /// asked again (same index) after the next response — the next turn of a
    /// conversation needs the last answer; only with [`Scenario::ON_RESPONSE`]. An `Err`
    /// ends the run with your message. A scenario whose phases all have sessions may
    /// leave it out: it is never called then.
    fn next_request(&mut self, phase: u32, index: u64) -> Result<Next, String> {
        let _ = (phase, index);
        Err("the scenario has a phase without sessions but no next_request".into())
    }

    /// For phases with [`Phase::custom`] arrivals: seconds after the previous request's
    /// scheduled time (see [`gaps`]). Called right after `next_request` of the same index.
    fn arrival(&mut self, phase: u32, index: u64) -> Result<f64, String> {
        let _ = (phase, index);
        Ok(0.0)
    }

    /// Whether the runner should call [`Scenario::on_response`]. It then keeps every
    /// response's text, so leave it off unless you use them.
    const ON_RESPONSE: bool = false;

    /// A finished request (only when [`Scenario::ON_RESPONSE`] is true).
    fn on_response(&mut self, outcome: Outcome) -> Result<(), String> {
        let _ = outcome;
        Ok(())
    }

    /// Whether the runner should poll [`Scenario::stop`] during each phase.
    const STOP: bool = false;

    /// Whether to end the current phase now (only when [`Scenario::STOP`] is true); see
    /// [`stops::StopWhen`] for the usual conditions.
    fn stop(&mut self, snapshot: Snapshot) -> Result<bool, String> {
        let _ = snapshot;
        Ok(false)
    }

    /// Whether the runner should call [`Scenario::next_phase`] once the phases given so
    /// far are done.
    const NEXT_PHASE: bool = false;

    /// The next phase, decided from every finished phase's summary (in run order), or
    /// `Ok(None)` to end the run (only when [`Scenario::NEXT_PHASE`] is true).
    fn next_phase(&mut self, history: Vec<PhaseSummary>) -> Result<Option<Phase>, String> {
        let _ = history;
        Ok(None)
    }

    /// Whether the runner should call [`Scenario::session_step`] for the phases with
    /// [`Phase::sessions`].
    const SESSIONS: bool = false;

    /// The next step of a session (only when [`Scenario::SESSIONS`] is true): called when
    /// it starts (`state.step == 0`), after each of its requests ends (`state.last`), and
    /// once the children of a fan-out have all ended (`state.joined`). Return
    /// `Step::send(request, after)` (or `request.into()` to send at once),
    /// `Step::fan_out(names)` or `Step::End`. The random functions draw from the
    /// session's own stream here, so a session's requests are the same however the
    /// sessions interleave. See [`sessions`] for the helpers.
    fn session_step(&mut self, state: SessionState) -> Result<Step, String> {
        let _ = state;
        Err("the scenario has phases with sessions but no session_step".into())
    }
}

/// Exports a type implementing [`Scenario`] as the component's `bench:scenario/workload`.
/// Use it once per crate, at the top level.
#[macro_export]
macro_rules! export_scenario {
    ($ty:ty) => {
        #[doc(hidden)]
        struct __BenchScenarioExport;

        impl $crate::bindings::exports::bench::scenario::workload::Guest for __BenchScenarioExport {
            fn describe() -> $crate::Description {
                $crate::__export::describe::<$ty>()
            }
            fn phases() -> ::core::result::Result<::std::vec::Vec<$crate::Phase>, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.phases())
            }
            fn next_request(
                phase: u32,
                index: u64,
            ) -> ::core::result::Result<$crate::Next, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.next_request(phase, index))
            }
            fn arrival(phase: u32, index: u64) -> ::core::result::Result<f64, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.arrival(phase, index))
            }
            fn on_response(outcome: $crate::Outcome) -> ::core::result::Result<(), ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.on_response(outcome))
            }
            fn stop(snapshot: $crate::Snapshot) -> ::core::result::Result<bool, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.stop(snapshot))
            }
            fn next_phase(
                history: ::std::vec::Vec<$crate::PhaseSummary>,
            ) -> ::core::result::Result<::core::option::Option<$crate::Phase>, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.next_phase(history))
            }
            fn session_step(
                state: $crate::SessionState,
            ) -> ::core::result::Result<$crate::Step, ::std::string::String> {
                $crate::__export::with_state::<$ty, _>(|s| s.session_step(state))
            }
        }

        $crate::bindings::export!(__BenchScenarioExport with_types_in $crate::bindings);
    };
}
