//! Per-tag statistics: the main metrics of the requests that carry each tag (tenant,
//! prompt class, conversation turn), for the report's per-tag table.
//!
//! Memory: three HDR histograms per tag, for at most [`MAX_TAGS`] tags; requests with
//! further tags are counted under [`OTHER_TAGS`], so a scenario that tags every request
//! differently cannot grow memory without bound.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;
use super::stat::{Distribution, StreamingStat};

mod mergeable;
pub use mergeable::TagState;

/// Distinct tags with their own row.
pub const MAX_TAGS: usize = 256;
/// The row of requests whose tag came after [`MAX_TAGS`] others.
pub const OTHER_TAGS: &str = "(other tags)";
/// The percentiles of the per-tag table.
pub const TAG_PERCENTILES: [f64; 2] = [50.0, 99.0];

/// The main metrics of one tag. Latencies in ms; token means over successful requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TagSummary {
    pub tag: String,
    pub completed: u64,
    pub failed: u64,
    /// Cancelled by the scenario mid-stream: only their TTFT is in `ttft`.
    #[serde(default)]
    pub cancelled: u64,
    pub ttft: Distribution,
    pub tpot: Distribution,
    pub e2el: Distribution,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
}

#[derive(Clone, Debug)]
struct TagAccumulator {
    completed: u64,
    failed: u64,
    cancelled: u64,
    input_tokens: u64,
    output_tokens: u64,
    ttft: StreamingStat,
    tpot: StreamingStat,
    e2el: StreamingStat,
}

impl TagAccumulator {
    fn new() -> Self {
        TagAccumulator {
            completed: 0,
            failed: 0,
            cancelled: 0,
            input_tokens: 0,
            output_tokens: 0,
            ttft: StreamingStat::new(),
            tpot: StreamingStat::new(),
            e2el: StreamingStat::new(),
        }
    }

    fn record(&mut self, r: &RequestRecord) {
        if r.cancelled {
            self.cancelled += 1;
            if let Some(t) = r.ttft_ns() {
                self.ttft.record(t as f64);
            }
            return;
        }
        if r.error.is_some() {
            self.failed += 1;
            return;
        }
        self.completed += 1;
        self.input_tokens += r.input_tokens;
        self.output_tokens += r.output_tokens;
        if let Some(t) = r.ttft_ns() {
            self.ttft.record(t as f64);
        }
        if let Some(t) = r.tpot_ns() {
            self.tpot.record(t);
        }
        if let Some(e) = r.e2el_ns() {
            self.e2el.record(e as f64);
        }
    }

    fn summarize(&self, tag: &str, percentiles: &[f64]) -> TagSummary {
        let mean = |total: u64| {
            if self.completed == 0 {
                0.0
            } else {
                total as f64 / self.completed as f64
            }
        };
        TagSummary {
            tag: tag.to_string(),
            completed: self.completed,
            failed: self.failed,
            cancelled: self.cancelled,
            ttft: self.ttft.distribution(percentiles),
            tpot: self.tpot.distribution(percentiles),
            e2el: self.e2el.distribution(percentiles),
            mean_input_tokens: mean(self.input_tokens),
            mean_output_tokens: mean(self.output_tokens),
        }
    }
}

/// The per-tag accumulators of one phase.
#[derive(Clone, Debug, Default)]
pub(crate) struct TagStats {
    by_tag: HashMap<String, TagAccumulator>,
}

impl TagStats {
    /// Adds a finished request; untagged requests are not counted here.
    pub(crate) fn record(&mut self, r: &RequestRecord) {
        let Some(tag) = &r.tag else { return };
        self.slot(tag).record(r);
    }

    /// Adds a finished request under `key` instead of its tag (the per-target rows).
    pub(crate) fn record_as(&mut self, key: &str, r: &RequestRecord) {
        self.slot(key).record(r);
    }

    /// The accumulator of `tag`, or of "(other tags)" once [`MAX_TAGS`] others exist.
    fn slot(&mut self, tag: &str) -> &mut TagAccumulator {
        let key = if self.by_tag.contains_key(tag) || self.by_tag.len() < MAX_TAGS {
            tag
        } else {
            OTHER_TAGS
        };
        self.by_tag
            .entry(key.to_string())
            .or_insert_with(TagAccumulator::new)
    }

    /// One summary per tag, in natural order (`turn-2` before `turn-10`).
    pub(crate) fn summarize(&self) -> Vec<TagSummary> {
        self.summarize_at(&TAG_PERCENTILES)
    }

    /// [`TagStats::summarize`] with these percentiles of each latency.
    pub(crate) fn summarize_at(&self, percentiles: &[f64]) -> Vec<TagSummary> {
        let mut tags: Vec<&String> = self.by_tag.keys().collect();
        tags.sort_by(|a, b| natural_cmp(a, b));
        tags.into_iter()
            .map(|t| self.by_tag[t].summarize(t, percentiles))
            .collect()
    }
}

/// Compares strings with runs of digits compared as numbers.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.len() - a.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let db = b.len() - b.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (na, nb) = (
                    a[..da].trim_start_matches('0'),
                    b[..db].trim_start_matches('0'),
                );
                let order = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (&a[da..], &b[db..]);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(&y);
                }
                (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::record::{Chunk, RequestError};
    use crate::measuring::metrics::ErrorKind;

    fn record(tag: Option<&str>, ttft_ms: u64, input_tokens: u64, ok: bool) -> RequestRecord {
        let ms = 1_000_000;
        RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase: 0,
            index: 0,
            tag: tag.map(str::to_string),
            scheduled_ns: 0,
            sent_ns: 0,
            first_byte_ns: Some(ttft_ms * ms),
            end_ns: (ttft_ms + 10) * ms,
            input_tokens,
            output_tokens: 2,
            usage_output_tokens: Some(2),
            text_tokens: 2,
            warmup: false,
            http_status: Some(200),
            chunks: vec![
                Chunk {
                    t_ns: ttft_ms * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
                Chunk {
                    t_ns: (ttft_ms + 10) * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
            ],
            error: (!ok).then(|| RequestError {
                kind: ErrorKind::Http5xx,
                message: "503".into(),
            }),
            server_timings: None,
            reached: Default::default(),
            retried: false,
            send_write_ns: None,
            cancelled: false,
            target: None,
            answer: Default::default(),
            session: Default::default(),
        }
    }

    #[test]
    fn tags_are_summarized_apart_and_in_natural_order() {
        let mut stats = TagStats::default();
        stats.record(&record(Some("turn-10"), 40, 300, true));
        stats.record(&record(Some("turn-2"), 20, 100, true));
        stats.record(&record(Some("turn-2"), 30, 200, true));
        stats.record(&record(Some("turn-2"), 30, 200, false));
        stats.record(&record(None, 99, 999, true));
        let rows = stats.summarize();
        let names: Vec<&str> = rows.iter().map(|r| r.tag.as_str()).collect();
        assert_eq!(names, ["turn-2", "turn-10"]);
        assert_eq!((rows[0].completed, rows[0].failed), (2, 1));
        assert_eq!(rows[0].mean_input_tokens, 150.0);
        assert_eq!(rows[0].ttft.mean, 25.0);
        assert_eq!(rows[0].e2el.percentile(99.0), Some(39.9));
        assert_eq!(rows[1].ttft.median, 40.0);
        assert_eq!(rows[1].tpot.mean, 10.0);
    }

    #[test]
    fn tags_past_the_cap_share_one_row() {
        let mut stats = TagStats::default();
        for i in 0..MAX_TAGS + 5 {
            stats.record(&record(Some(&format!("t{i}")), 10, 1, true));
        }
        let rows = stats.summarize();
        assert_eq!(rows.len(), MAX_TAGS + 1);
        let other = rows.iter().find(|r| r.tag == OTHER_TAGS).unwrap();
        assert_eq!(other.completed, 5);
    }

    #[test]
    fn natural_order_compares_digit_runs_as_numbers() {
        let mut v = vec!["b", "a10", "a9", "a09x", "a", "a100"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["a", "a9", "a09x", "a10", "a100", "b"]);
    }
}
