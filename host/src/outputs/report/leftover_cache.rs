//! A prefix cache warm before the run began: the run's first request was served from it,
//! though no request of this run could have filled it. An engine keeps prompts across
//! runs (llama.cpp keeps each slot's, vLLM and SGLang their prefix caches), and a second
//! run with the same seed then measures a warm cache: llama.cpp served 16,576 of 16,592
//! prompt tokens from cache and TTFT read 18 ms instead of 1,251. `--reset-prefix-cache
//! run` empties it first.
//!
//! A shard cannot tell an earlier run from its own siblings: the shards of one run send
//! the same prefixes to the same server, and the one that reaches it first fills the
//! cache the others then hit. A shard's warning says so; the merged report judges the
//! whole run's early requests together.

use super::run_report::RunReport;

/// Share of its prompt each early request must have found in cache for the cache to count
/// as left over: a chat template's few shared tokens stay below it.
pub const LEFTOVER_SHARE: f64 = 0.1;

/// The run's early requests (sent before any of its requests had a first token: no
/// prefill of the run had ended) and what they found in cache, when every one of them
/// found at least [`LEFTOVER_SHARE`] of its prompt there. Requests in flight together may
/// reach the server out of send order, and vLLM caches a long prompt's blocks chunk by
/// chunk, so one early request's hit alone proves nothing; all of them hitting does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leftover {
    pub requests: u64,
    pub cached: u64,
    pub prompt: u64,
    /// The shard the report is of (I, N), if it is one.
    pub shard: Option<(u32, u32)>,
}

/// What the run's first phase's early requests found in the cache (from their usage).
pub fn check(report: &RunReport) -> Option<Leftover> {
    let cache = report.phases.first()?.summary.prefix_cache.as_ref()?;
    (cache.early_prompt_tokens > 0 && cache.early_least_share >= LEFTOVER_SHARE).then_some(
        Leftover {
            requests: cache.early_requests,
            cached: cache.early_cached_tokens,
            prompt: cache.early_prompt_tokens,
            shard: report.shard,
        },
    )
}

impl Leftover {
    /// The warning, one line.
    pub fn warning(&self) -> String {
        let first = if self.requests == 1 {
            "request".to_string()
        } else {
            format!("{} requests", self.requests)
        };
        match self.shard {
            None => format!(
                "warning: the server served {} of the {} prompt tokens of the run's first {first} from its prefix cache, which no request of this run could have filled yet: a cache left warm by an earlier run (this run's hit rates and TTFT read a warm cache; --reset-prefix-cache run empties it first)",
                self.cached, self.prompt,
            ),
            Some((index, count)) => format!(
                "note: the server served {} of the {} prompt tokens of shard {index}/{count}'s first {first} from its prefix cache, which no request of this shard could have filled yet: most likely warmed by a sibling shard of this run that reached the server first (expected when shards share prefixes), else left warm by an earlier run; `runner merge` judges the whole run",
                self.cached, self.prompt,
            ),
        }
    }
}
