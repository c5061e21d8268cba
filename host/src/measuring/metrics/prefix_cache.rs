//! The prefix cache as the answers' usage told it (`prompt_tokens_details.cached_tokens`
//! and its kin, `RequestRecord::answer.cached_prompt_tokens`): the share of prompt tokens
//! served from cache, a source of the report's prefix-cache line where the server's
//! counters are missing, and the phase's first request, which no request of this run
//! could have warmed the cache for.

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;

/// Most of the earliest requests kept to find those sent before any first token.
const EARLY_KEPT: usize = 64;

/// Counts over the requests whose usage said how many prompt tokens came from cache; a
/// phase's accumulator and its shard state (counts add, the earliest requests merge).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheStats {
    requests: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
    /// The earliest sent of them, ascending: (sent ns, cached, prompt tokens).
    early: Vec<(u64, u64, u64)>,
    /// The earliest first token of any request of the phase, ns.
    first_token_ns: Option<u64>,
}

/// What the phase's answers said of the prefix cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct PrefixCacheSummary {
    /// Requests whose usage gave a cached-token count.
    pub requests: u64,
    /// Their prompt tokens, and of them those served from cache.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// `cached_tokens / prompt_tokens`, 0 to 1.
    pub hit_rate: f64,
    /// The requests sent before any request of the phase had its first token (at least
    /// the first sent): no prefill of the phase had ended, so none of them could have
    /// found a prompt of the phase in the cache.
    pub early_requests: u64,
    /// Their cached and prompt tokens.
    pub early_cached_tokens: u64,
    pub early_prompt_tokens: u64,
    /// The least share of its prompt any of them found in cache, 0 to 1.
    pub early_least_share: f64,
}

impl PrefixCacheStats {
    pub fn record(&mut self, r: &RequestRecord) {
        if let Some(first) = r.chunks.first() {
            self.first_token_ns = Some(
                self.first_token_ns
                    .map_or(first.t_ns, |t| t.min(first.t_ns)),
            );
        }
        let Some(cached) = r.answer.cached_prompt_tokens else {
            return;
        };
        self.requests += 1;
        self.prompt_tokens = self.prompt_tokens.saturating_add(r.input_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(cached);
        // Records come in completion order, mostly later sent than the kept ones.
        let full = self.early.len() >= EARLY_KEPT;
        if !full || self.early.last().is_some_and(|last| r.sent_ns < last.0) {
            self.keep_early(&[(r.sent_ns, cached, r.input_tokens)]);
        }
    }

    /// Keeps the [`EARLY_KEPT`] earliest sent of `early` and those already kept.
    fn keep_early(&mut self, early: &[(u64, u64, u64)]) {
        self.early.extend_from_slice(early);
        self.early.sort_unstable();
        self.early.truncate(EARLY_KEPT);
    }

    pub fn merge(&mut self, o: &PrefixCacheStats) {
        self.requests = self.requests.saturating_add(o.requests);
        self.prompt_tokens = self.prompt_tokens.saturating_add(o.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(o.cached_tokens);
        self.keep_early(&o.early);
        self.first_token_ns = match (self.first_token_ns, o.first_token_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// `None` when no answer said.
    pub fn summarize(&self) -> Option<PrefixCacheSummary> {
        let first = self.early.first()?;
        let before =
            |&&(sent, _, _): &&(u64, u64, u64)| self.first_token_ns.is_none_or(|t| sent < t);
        let early: Vec<&(u64, u64, u64)> = std::iter::once(first)
            .chain(self.early.iter().skip(1).filter(before))
            .collect();
        let share = |&&(_, cached, prompt): &&(u64, u64, u64)| {
            if prompt == 0 {
                0.0
            } else {
                cached as f64 / prompt as f64
            }
        };
        Some(PrefixCacheSummary {
            requests: self.requests,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            hit_rate: if self.prompt_tokens == 0 {
                0.0
            } else {
                self.cached_tokens as f64 / self.prompt_tokens as f64
            },
            early_requests: early.len() as u64,
            early_cached_tokens: early.iter().map(|e| e.1).sum(),
            early_prompt_tokens: early.iter().map(|e| e.2).sum(),
            early_least_share: early.iter().map(share).fold(f64::INFINITY, f64::min),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sent_ns: u64, first_ns: u64, input: u64, cached: Option<u64>) -> RequestRecord {
        let mut r: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "scheduled_ns": 0, "sent_ns": sent_ns,
            "chunks": [{"t_ns": first_ns, "tokens": 1}], "end_ns": first_ns + 1,
            "input_tokens": input, "output_tokens": 1, "text_tokens": 1,
        }))
        .expect("a record");
        r.answer.cached_prompt_tokens = cached;
        r
    }

    #[test]
    fn shares_add_up_and_the_early_requests_are_those_before_any_first_token() {
        let mut a = PrefixCacheStats::default();
        assert_eq!(a.summarize(), None);
        a.record(&record(50, 90, 100, Some(80)));
        a.record(&record(10, 60, 100, Some(0)));
        a.record(&record(5, 40, 100, None));
        let mut b = PrefixCacheStats::default();
        b.record(&record(20, 70, 200, Some(120)));
        a.merge(&b);
        let s = a.summarize().expect("reported");
        assert_eq!(
            (s.requests, s.prompt_tokens, s.cached_tokens),
            (3, 400, 200)
        );
        assert_eq!(s.hit_rate, 0.5);
        // The first token came at 40 ns: the requests sent at 10 and 20 were early; one
        // of them found nothing in cache.
        assert_eq!(
            (
                s.early_requests,
                s.early_cached_tokens,
                s.early_prompt_tokens
            ),
            (2, 120, 300)
        );
        assert_eq!(s.early_least_share, 0.0);
        // Alone before any first token and mostly cached: left over.
        let mut warm = PrefixCacheStats::default();
        warm.record(&record(1, 30, 100, Some(96)));
        warm.record(&record(35, 60, 100, Some(0)));
        let w = warm.summarize().unwrap();
        assert_eq!((w.early_requests, w.early_least_share), (1, 0.96));
    }
}
