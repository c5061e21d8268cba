//! The prefix cache as the answers' usage told it (`prompt_tokens_details.cached_tokens`
//! and its kin, `RequestRecord::answer.cached_prompt_tokens`): the share of prompt tokens
//! served from cache, a source of the report's prefix-cache line where the server's
//! counters are missing, and the phase's first request, which no request of this run
//! could have warmed the cache for.

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;

/// Counts over the requests whose usage said how many prompt tokens came from cache; a
/// phase's accumulator and its shard state (counts add, the earliest first request wins).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheStats {
    requests: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
    /// The earliest sent of them: (sent ns, cached, prompt tokens).
    first: Option<(u64, u64, u64)>,
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
    /// The first request sent: its cached and prompt tokens.
    pub first_request_cached_tokens: u64,
    pub first_request_prompt_tokens: u64,
}

impl PrefixCacheStats {
    pub fn record(&mut self, r: &RequestRecord) {
        let Some(cached) = r.answer.cached_prompt_tokens else {
            return;
        };
        self.requests += 1;
        self.prompt_tokens = self.prompt_tokens.saturating_add(r.input_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(cached);
        if self.first.is_none_or(|(sent, _, _)| r.sent_ns < sent) {
            self.first = Some((r.sent_ns, cached, r.input_tokens));
        }
    }

    pub fn merge(&mut self, o: &PrefixCacheStats) {
        self.requests = self.requests.saturating_add(o.requests);
        self.prompt_tokens = self.prompt_tokens.saturating_add(o.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(o.cached_tokens);
        if let Some(theirs) = o.first {
            if self.first.is_none_or(|(sent, _, _)| theirs.0 < sent) {
                self.first = Some(theirs);
            }
        }
    }

    /// `None` when no answer said.
    pub fn summarize(&self) -> Option<PrefixCacheSummary> {
        let (_, first_cached, first_prompt) = self.first?;
        Some(PrefixCacheSummary {
            requests: self.requests,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            hit_rate: if self.prompt_tokens == 0 {
                0.0
            } else {
                self.cached_tokens as f64 / self.prompt_tokens as f64
            },
            first_request_cached_tokens: first_cached,
            first_request_prompt_tokens: first_prompt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sent_ns: u64, input: u64, cached: Option<u64>) -> RequestRecord {
        let mut r: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "scheduled_ns": 0, "sent_ns": sent_ns,
            "chunks": [], "end_ns": sent_ns + 1, "input_tokens": input,
            "output_tokens": 0, "text_tokens": 0,
        }))
        .expect("a record");
        r.answer.cached_prompt_tokens = cached;
        r
    }

    #[test]
    fn shares_add_up_and_the_first_request_is_the_earliest_sent() {
        let mut a = PrefixCacheStats::default();
        assert_eq!(a.summarize(), None);
        a.record(&record(50, 100, Some(80)));
        a.record(&record(10, 100, Some(0)));
        a.record(&record(5, 100, None));
        let mut b = PrefixCacheStats::default();
        b.record(&record(20, 200, Some(120)));
        a.merge(&b);
        let s = a.summarize().expect("reported");
        assert_eq!(
            (s.requests, s.prompt_tokens, s.cached_tokens),
            (3, 400, 200)
        );
        assert_eq!(s.hit_rate, 0.5);
        assert_eq!(
            (s.first_request_cached_tokens, s.first_request_prompt_tokens),
            (0, 100)
        );
        let mut warm = PrefixCacheStats::default();
        warm.record(&record(1, 100, Some(96)));
        a.merge(&warm);
        assert_eq!(a.summarize().unwrap().first_request_cached_tokens, 96);
    }
}
