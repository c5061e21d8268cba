//! Per-tag statistics as a serialisable state, and their merge across shards (tag by tag;
//! a tag beyond [`MAX_TAGS`] joins [`OTHER_TAGS`], as it would in one process).

use serde::{Deserialize, Serialize};

use super::super::stat::{add_count, in_field, StatState, StatStateError, StreamingStat};
use super::{TagAccumulator, TagStats};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TagState {
    pub tag: String,
    pub completed: u64,
    pub failed: u64,
    #[serde(default)]
    pub cancelled: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub ttft: StatState,
    pub tpot: StatState,
    pub e2el: StatState,
}

impl TagAccumulator {
    fn merge(&mut self, o: &TagAccumulator) -> Result<(), StatStateError> {
        for (field, a, b) in [
            ("completed", &mut self.completed, o.completed),
            ("failed", &mut self.failed, o.failed),
            ("cancelled", &mut self.cancelled, o.cancelled),
        ] {
            add_count(field, a, b)?;
        }
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.ttft.merge(&o.ttft).map_err(in_field("ttft"))?;
        self.tpot.merge(&o.tpot).map_err(in_field("tpot"))?;
        self.e2el.merge(&o.e2el).map_err(in_field("e2el"))
    }
}

impl TagStats {
    /// Every tag's state, sorted by tag so the file is stable.
    pub(crate) fn state(&self) -> Vec<TagState> {
        let mut out: Vec<TagState> = self
            .by_tag
            .iter()
            .map(|(tag, a)| TagState {
                tag: tag.clone(),
                completed: a.completed,
                failed: a.failed,
                cancelled: a.cancelled,
                input_tokens: a.input_tokens,
                output_tokens: a.output_tokens,
                ttft: a.ttft.state(),
                tpot: a.tpot.state(),
                e2el: a.e2el.state(),
            })
            .collect();
        out.sort_by(|a, b| a.tag.cmp(&b.tag));
        out
    }

    pub(crate) fn from_state(states: &[TagState]) -> Result<TagStats, StatStateError> {
        let mut stats = TagStats::default();
        for s in states {
            let acc = Self::tag_from_state(s).map_err(in_field(&s.tag))?;
            stats.by_tag.insert(s.tag.clone(), acc);
        }
        Ok(stats)
    }

    fn tag_from_state(s: &TagState) -> Result<TagAccumulator, StatStateError> {
        Ok(TagAccumulator {
            completed: s.completed,
            failed: s.failed,
            cancelled: s.cancelled,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            ttft: StreamingStat::from_state(&s.ttft).map_err(in_field("ttft"))?,
            tpot: StreamingStat::from_state(&s.tpot).map_err(in_field("tpot"))?,
            e2el: StreamingStat::from_state(&s.e2el).map_err(in_field("e2el"))?,
        })
    }

    pub(crate) fn merge(&mut self, other: &TagStats) -> Result<(), StatStateError> {
        let mut tags: Vec<&String> = other.by_tag.keys().collect();
        tags.sort();
        for tag in tags {
            self.slot(tag)
                .merge(&other.by_tag[tag])
                .map_err(in_field(tag))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::record::RequestRecord;

    fn record(tag: &str, i: u64) -> RequestRecord {
        serde_json::from_value(serde_json::json!({
            "phase": 0, "index": i, "tag": tag, "scheduled_ns": 0, "sent_ns": 0,
            "first_byte_ns": 1_000_000 + i * 10_000,
            "chunks": [{"t_ns": 1_000_000 + i * 10_000, "tokens": 1},
                       {"t_ns": 3_000_000 + i * 50_000, "tokens": 2}],
            "end_ns": 3_000_000 + i * 50_000, "input_tokens": 10 + i, "output_tokens": 3,
            "text_tokens": 3,
        }))
        .expect("a valid record")
    }

    #[test]
    fn merged_tags_read_like_one_process() {
        let mut whole = TagStats::default();
        let mut parts = [TagStats::default(), TagStats::default()];
        for i in 0..200 {
            let r = record(["a", "b", "turn-10"][(i % 3) as usize], i);
            whole.record(&r);
            parts[(i % 2) as usize].record(&r);
        }
        let mut merged = TagStats::default();
        for p in &parts {
            let json = serde_json::to_string(&p.state()).unwrap();
            let back = TagStats::from_state(&serde_json::from_str::<Vec<TagState>>(&json).unwrap())
                .unwrap();
            merged.merge(&back).unwrap();
        }
        let (a, b) = (merged.summarize(), whole.summarize());
        assert_eq!(a.len(), 3);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (&x.tag, x.completed, x.failed),
                (&y.tag, y.completed, y.failed)
            );
            assert_eq!(x.ttft.percentiles, y.ttft.percentiles);
            assert_eq!(x.e2el.percentiles, y.e2el.percentiles);
            assert!((x.mean_input_tokens - y.mean_input_tokens).abs() < 1e-9);
        }
    }
}
