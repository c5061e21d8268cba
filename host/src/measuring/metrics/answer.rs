//! What a request's answer was made of beyond vLLM's view of it: the endpoint it went
//! to, when its first answer token came (after any reasoning: time to first answer,
//! TTFA, beside vLLM's TTFT of any token), and how many of its output tokens were
//! reasoning. Per phase: the TTFA distribution, reasoning and answer token totals, and
//! the requests sent to each endpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::record::AnswerRecord;
use super::record::RequestRecord;
use super::stat::{add_count, in_field, Distribution, StatState, StatStateError, StreamingStat};

/// The path embeddings go to, as `client::api` posts them: named here so the statistics
/// need nothing from the client, which records into them.
pub const EMBEDDINGS_PATH: &str = "/v1/embeddings";

impl RequestRecord {
    /// Time to first answer token, ns: the first answer chunk minus send.
    pub fn ttfa_ns(&self) -> Option<u64> {
        self.answer
            .first_answer_ns
            .map(|t| t.saturating_sub(self.sent_ns))
    }
}

/// Requests sent to one endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCount {
    pub endpoint: String,
    pub requests: u64,
}

/// A phase's answer statistics, reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerSummary {
    /// Time to first answer token of the successful requests, ms.
    pub ttfa: Distribution,
    /// Reasoning and answer output tokens of the successful requests.
    pub reasoning_tokens: u64,
    pub answer_tokens: u64,
    /// Successful requests that spent any token reasoning.
    pub reasoning_requests: u64,
    /// Every request sent, by endpoint, in path order.
    pub endpoints: Vec<EndpointCount>,
}

impl AnswerSummary {
    /// Whether every request of the phase went to `/v1/embeddings`.
    pub fn only_embeddings(&self) -> bool {
        !self.endpoints.is_empty() && self.endpoints.iter().all(|e| e.endpoint == EMBEDDINGS_PATH)
    }
}

/// Answer statistics as they accumulate.
#[derive(Clone, Debug)]
pub struct AnswerStats {
    ttfa: StreamingStat,
    reasoning_tokens: u64,
    answer_tokens: u64,
    reasoning_requests: u64,
    endpoints: BTreeMap<String, u64>,
}

impl Default for AnswerStats {
    fn default() -> AnswerStats {
        AnswerStats {
            ttfa: StreamingStat::new(),
            reasoning_tokens: 0,
            answer_tokens: 0,
            reasoning_requests: 0,
            endpoints: BTreeMap::new(),
        }
    }
}

/// [`AnswerStats`] as a serialisable state, for merging shards.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerState {
    pub ttfa: Option<StatState>,
    pub reasoning_tokens: u64,
    pub answer_tokens: u64,
    pub reasoning_requests: u64,
    pub endpoints: Vec<EndpointCount>,
}

impl AnswerStats {
    /// Every finished request counts for its endpoint; a successful one adds its TTFA and
    /// its token split.
    pub fn record(&mut self, r: &RequestRecord) {
        if !r.answer.endpoint.is_empty() {
            *self.endpoints.entry(r.answer.endpoint.clone()).or_default() += 1;
        }
        if !r.succeeded() {
            return;
        }
        if let Some(t) = r.ttfa_ns() {
            self.ttfa.record(t as f64);
        }
        let reasoning = r.answer.reasoning_tokens.min(r.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(reasoning);
        self.answer_tokens = self
            .answer_tokens
            .saturating_add(r.output_tokens - reasoning);
        self.reasoning_requests += u64::from(reasoning > 0);
    }

    fn endpoint_counts(&self) -> Vec<EndpointCount> {
        self.endpoints
            .iter()
            .map(|(endpoint, &requests)| EndpointCount {
                endpoint: endpoint.clone(),
                requests,
            })
            .collect()
    }

    pub fn summarize(&self, percentiles: &[f64]) -> AnswerSummary {
        AnswerSummary {
            ttfa: self.ttfa.distribution(percentiles),
            reasoning_tokens: self.reasoning_tokens,
            answer_tokens: self.answer_tokens,
            reasoning_requests: self.reasoning_requests,
            endpoints: self.endpoint_counts(),
        }
    }

    pub fn state(&self) -> AnswerState {
        AnswerState {
            ttfa: Some(self.ttfa.state()),
            reasoning_tokens: self.reasoning_tokens,
            answer_tokens: self.answer_tokens,
            reasoning_requests: self.reasoning_requests,
            endpoints: self.endpoint_counts(),
        }
    }

    pub fn from_state(s: &AnswerState) -> Result<AnswerStats, StatStateError> {
        Ok(AnswerStats {
            ttfa: match &s.ttfa {
                Some(t) => StreamingStat::from_state(t).map_err(in_field("ttfa"))?,
                None => StreamingStat::new(),
            },
            reasoning_tokens: s.reasoning_tokens,
            answer_tokens: s.answer_tokens,
            reasoning_requests: s.reasoning_requests,
            endpoints: s
                .endpoints
                .iter()
                .map(|e| (e.endpoint.clone(), e.requests))
                .collect(),
        })
    }

    pub fn merge(&mut self, o: &AnswerStats) -> Result<(), StatStateError> {
        self.ttfa.merge(&o.ttfa).map_err(in_field("ttfa"))?;
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(o.reasoning_tokens);
        self.answer_tokens = self.answer_tokens.saturating_add(o.answer_tokens);
        add_count(
            "reasoning_requests",
            &mut self.reasoning_requests,
            o.reasoning_requests,
        )?;
        for (endpoint, &n) in &o.endpoints {
            let count = self.endpoints.entry(endpoint.clone()).or_default();
            add_count(&format!("endpoints.{endpoint}"), count, n)?;
        }
        Ok(())
    }
}

/// The endpoints of a run, for its header: the one path, or each with its count.
pub fn describe_endpoints(endpoints: &[EndpointCount]) -> Option<String> {
    match endpoints {
        [] => None,
        [one] => Some(one.endpoint.clone()),
        many => Some(
            many.iter()
                .map(|e| format!("{} ({})", e.endpoint, e.requests))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_counted_and_described() {
        let mut stats = AnswerStats::default();
        for endpoint in ["/v1/completions", "/v1/chat/completions", "/v1/completions"] {
            let mut state = AnswerStats::default().state();
            state.endpoints = vec![EndpointCount {
                endpoint: endpoint.into(),
                requests: 1,
            }];
            let one = AnswerStats::from_state(&state).expect("state");
            stats.merge(&one).expect("merge");
        }
        let summary = stats.summarize(&[99.0]);
        assert_eq!(
            describe_endpoints(&summary.endpoints).as_deref(),
            Some("/v1/chat/completions (1), /v1/completions (2)")
        );
        assert!(!summary.only_embeddings());
        assert_eq!(
            describe_endpoints(&summary.endpoints[..1]).as_deref(),
            Some("/v1/chat/completions")
        );
    }
}
