//! A prefix cache warm before the run began: the run's first request was served from it,
//! though no request of this run could have filled it. An engine keeps prompts across
//! runs (llama.cpp keeps each slot's, vLLM and SGLang their prefix caches), and a second
//! run with the same seed then measures a warm cache: llama.cpp served 16,576 of 16,592
//! prompt tokens from cache and TTFT read 18 ms instead of 1,251. `--reset-prefix-cache
//! run` empties it first.

use super::run_report::RunReport;

/// Share of the first request's prompt served from cache that counts as left over: a
/// chat template's few shared tokens stay below it.
pub const LEFTOVER_SHARE: f64 = 0.1;

/// The first request's cached and prompt tokens, when the cache held enough of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leftover {
    pub cached: u64,
    pub prompt: u64,
}

/// What the run's first phase's first request found in the cache (from its usage).
pub fn check(report: &RunReport) -> Option<Leftover> {
    let first = report.phases.first()?.summary.prefix_cache.as_ref()?;
    let (cached, prompt) = (
        first.first_request_cached_tokens,
        first.first_request_prompt_tokens,
    );
    (prompt > 0 && cached as f64 >= LEFTOVER_SHARE * prompt as f64)
        .then_some(Leftover { cached, prompt })
}

impl Leftover {
    /// The warning, one line.
    pub fn warning(&self) -> String {
        format!(
            "warning: the server served {} of the run's first request's {} prompt tokens from its prefix cache, which no request of this run could have filled: a cache left warm by an earlier run (this run's hit rates and TTFT read a warm cache; --reset-prefix-cache run empties it first)",
            self.cached, self.prompt
        )
    }
}
