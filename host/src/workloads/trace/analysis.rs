//! What a trace will do before it is replayed: its load, its sessions, how much of its
//! prompts repeat by hash id, and the hit rate a prefix cache of a given size would reach.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::{Trace, TraceFormat, TraceRequest};

/// Cache sizes (in blocks) shown when none are asked for: unlimited, then half and a
/// tenth of the trace's distinct blocks, what a fixed size would say nothing about on
/// traces a thousand times apart in size.
fn default_cache_blocks(distinct: u64) -> Vec<u64> {
    vec![0, (distinct / 2).max(1), (distinct / 10).max(1)]
}

#[derive(Debug, Serialize)]
pub struct TraceAnalysis {
    pub format: TraceFormat,
    pub requests: u64,
    /// From the first request's timestamp to the last's.
    pub span_s: f64,
    /// Requests over the span (`None` for a span of 0).
    pub rate_per_s: Option<f64>,
    pub input_tokens: TokenTotals,
    pub output_tokens: TokenTotals,
    /// `None` where the format has no chat ids.
    pub sessions: Option<TraceSessions>,
    /// `None` where the format has no hash ids.
    pub prefix: Option<PrefixReuse>,
}

#[derive(Debug, Serialize)]
pub struct TokenTotals {
    pub total: u64,
    pub mean: f64,
}

/// Bailian's conversations, followed by `parent_chat_id`: a chat continues its parent's
/// session when its turn is above 1 and the parent has no earlier continuation; a chat of
/// turn 1 under a parent (or a second continuation of one parent) opens a child session,
/// a sub-agent's conversation of its own.
#[derive(Debug, PartialEq, Serialize)]
pub struct TraceSessions {
    /// Root and child sessions.
    pub count: u64,
    /// Sessions that start at a root chat (`parent_chat_id` -1, or a parent not in the trace).
    pub roots: u64,
    /// Sessions opened from a chat of another session.
    pub child_chats: u64,
    pub turns_mean: f64,
    pub turns_max: u64,
}

#[derive(Debug, PartialEq, Serialize)]
pub struct PrefixReuse {
    pub block_tokens: u64,
    /// Hash ids over all requests.
    pub blocks: u64,
    pub distinct: u64,
    /// Of `blocks`, the share an earlier request (or an earlier block) already had.
    pub seen_before: f64,
    pub hit_rates: Vec<CacheHitRate>,
}

/// The prefix-cache hit rate of an LRU cache of `cache_blocks` blocks.
#[derive(Debug, PartialEq, Serialize)]
pub struct CacheHitRate {
    /// `None`: unlimited.
    pub cache_blocks: Option<u64>,
    pub hits: u64,
    pub blocks: u64,
    pub rate: f64,
}

/// Analyses `trace`; `cache_blocks` are the cache sizes (0: unlimited; none: unlimited,
/// half and a tenth of the distinct blocks), `block_tokens` overrides the format's own
/// block size.
pub fn analyze(trace: &Trace, block_tokens: Option<u64>, cache_blocks: &[u64]) -> TraceAnalysis {
    let mut order: Vec<&TraceRequest> = trace.requests.iter().collect();
    // Stable: requests of one timestamp keep the file's order.
    order.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let n = order.len() as u64;
    let first = order.first().map_or(0.0, |r| r.at_s);
    let span_s = order.last().map_or(0.0, |r| r.at_s) - first;
    let totals = |f: fn(&TraceRequest) -> u64| {
        // Saturating: each count is at most `MAX_TOKENS`, but a trace built in code may
        // hold any.
        let total = order.iter().fold(0u64, |t, r| t.saturating_add(f(r)));
        TokenTotals {
            total,
            mean: if n == 0 { 0.0 } else { total as f64 / n as f64 },
        }
    };
    let hashed: Option<Vec<&[u64]>> = order
        .iter()
        .map(|r| r.hash_ids.as_deref())
        .collect::<Option<Vec<_>>>();
    TraceAnalysis {
        format: trace.format,
        requests: n,
        span_s,
        rate_per_s: (span_s > 0.0).then(|| n as f64 / span_s),
        input_tokens: totals(|r| r.input_tokens),
        output_tokens: totals(|r| r.output_tokens),
        // In the file's order, as the replay reads it (`chats.rs`).
        sessions: (trace.format == TraceFormat::Bailian)
            .then(|| sessions(&trace.requests.iter().collect::<Vec<_>>())),
        prefix: hashed.map(|ids| {
            let block_tokens = block_tokens.or(trace.format.block_tokens()).unwrap_or(16);
            prefix_reuse(&ids, block_tokens, cache_blocks)
        }),
    }
}

/// Sessions of `order` (the file's order), as [`TraceSessions`] says.
fn sessions(order: &[&TraceRequest]) -> TraceSessions {
    // chat id -> (its session, whether a later chat already continues it)
    let mut chats: HashMap<i64, (usize, bool)> = HashMap::new();
    let mut turns: Vec<u64> = Vec::new();
    let mut roots = 0;
    for chat in order.iter().filter_map(|r| r.chat.as_ref()) {
        let parent = chats.get_mut(&chat.parent);
        let session = match parent {
            Some((session, continued)) if chat.turn > 1 && !*continued => {
                *continued = true;
                *session
            }
            found => {
                if found.is_none() {
                    roots += 1;
                }
                turns.push(0);
                turns.len() - 1
            }
        };
        turns[session] += 1;
        chats.insert(chat.id, (session, false));
    }
    let count = turns.len() as u64;
    TraceSessions {
        count,
        roots,
        child_chats: count - roots,
        turns_mean: if count == 0 {
            0.0
        } else {
            turns.iter().sum::<u64>() as f64 / count as f64
        },
        turns_max: turns.iter().copied().max().unwrap_or(0),
    }
}

fn prefix_reuse(ids: &[&[u64]], block_tokens: u64, cache_blocks: &[u64]) -> PrefixReuse {
    let blocks: u64 = ids.iter().map(|r| r.len() as u64).sum();
    let distinct = ids
        .iter()
        .flat_map(|r| r.iter())
        .collect::<HashSet<_>>()
        .len() as u64;
    let sizes = if cache_blocks.is_empty() {
        default_cache_blocks(distinct)
    } else {
        cache_blocks.to_vec()
    };
    PrefixReuse {
        block_tokens,
        blocks,
        distinct,
        seen_before: fraction(blocks - distinct, blocks),
        hit_rates: sizes
            .iter()
            .map(|&size| {
                let capacity = (size > 0).then_some(size);
                let hits = lru_prefix_hits(ids, capacity);
                CacheHitRate {
                    cache_blocks: capacity,
                    hits,
                    blocks,
                    rate: fraction(hits, blocks),
                }
            })
            .collect(),
    }
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Prefix-cache hits of `requests` (each its hash ids, in arrival order) on an LRU cache
/// of `capacity` blocks (`None`: unlimited). A request hits on its leading blocks that are
/// cached and stops at its first miss, as a prefix cache matches; then all its blocks are
/// inserted or refreshed, in order, so its last block is the most recently used.
pub fn lru_prefix_hits(requests: &[&[u64]], capacity: Option<u64>) -> u64 {
    let mut cache = Lru::default();
    let mut hits = 0;
    for ids in requests {
        hits += ids.iter().take_while(|id| cache.contains(**id)).count() as u64;
        for &id in ids.iter() {
            cache.touch(id, capacity);
        }
    }
    hits
}

/// Blocks by last use: `used` maps a block to its stamp, `by_stamp` orders them for
/// eviction.
#[derive(Default)]
struct Lru {
    used: HashMap<u64, u64>,
    by_stamp: BTreeMap<u64, u64>,
    clock: u64,
}

impl Lru {
    fn contains(&self, id: u64) -> bool {
        self.used.contains_key(&id)
    }

    fn touch(&mut self, id: u64, capacity: Option<u64>) {
        self.clock += 1;
        if let Some(old) = self.used.insert(id, self.clock) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(self.clock, id);
        if let Some(cap) = capacity {
            while self.used.len() as u64 > cap {
                let Some((_, oldest)) = self.by_stamp.pop_first() else {
                    break;
                };
                self.used.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::trace::TraceChat;

    /// Four requests on a cache of 4 blocks (the cache listed oldest first):
    ///
    /// | request | hash ids | cache before | leading hits            | cache after |
    /// |---------|----------|--------------|-------------------------|-------------|
    /// | A       | 1 2 3    | (empty)      | 0 (1 misses)            | 1 2 3       |
    /// | B       | 1 2 4    | 1 2 3        | 2 (4 misses)            | 3 1 2 4     |
    /// | C       | 1 2 3 5  | 3 1 2 4      | 3 (5 misses)            | 1 2 3 5 (4 evicted) |
    /// | D       | 1 2 4 3  | 1 2 3 5      | 2 (4 misses; 3 after it not counted) | 1 2 4 3 |
    ///
    /// Hits 0 + 2 + 3 + 2 = 7 of 3 + 3 + 4 + 4 = 14 blocks: 1/2. Unlimited, D finds 4 still
    /// cached and hits all four: 0 + 2 + 3 + 4 = 9 of 14.
    #[test]
    fn lru_hits_stop_at_the_first_miss_and_evict_the_least_recent() {
        let requests: [&[u64]; 4] = [&[1, 2, 3], &[1, 2, 4], &[1, 2, 3, 5], &[1, 2, 4, 3]];
        assert_eq!(lru_prefix_hits(&requests, Some(4)), 7);
        assert_eq!(lru_prefix_hits(&requests, None), 9);
        let reuse = prefix_reuse(&requests, 16, &[4, 0]);
        assert_eq!((reuse.blocks, reuse.distinct), (14, 5));
        assert_eq!(reuse.hit_rates[0].rate, 7.0 / 14.0);
        assert_eq!(reuse.hit_rates[1].rate, 9.0 / 14.0);
        // One block of room: every request evicts its own first blocks, nothing hits.
        assert_eq!(lru_prefix_hits(&requests, Some(1)), 0);
    }

    fn chat(at_s: f64, id: i64, parent: i64, turn: u64) -> TraceRequest {
        TraceRequest {
            at_s,
            input_tokens: 10,
            output_tokens: 2,
            hash_ids: Some(vec![]),
            chat: Some(TraceChat { id, parent, turn }),
        }
    }

    #[test]
    fn chats_chain_into_sessions_and_children() {
        // Session of 1 -> 2 -> 3; 4 is a child of 2 (turn 1 under a parent), continued by 5;
        // 6 is a root alone; 7 is a second continuation of 1, so a child too.
        let trace = Trace {
            format: TraceFormat::Bailian,
            requests: vec![
                chat(0.0, 1, -1, 1),
                chat(1.0, 2, 1, 2),
                chat(1.5, 4, 2, 1),
                chat(2.0, 3, 2, 3),
                chat(2.5, 5, 4, 2),
                chat(3.0, 6, -1, 1),
                chat(4.0, 7, 1, 2),
            ],
        };
        let a = analyze(&trace, None, &[0]);
        assert_eq!(
            a.sessions.unwrap(),
            TraceSessions {
                count: 4,
                roots: 2,
                child_chats: 2,
                turns_mean: 7.0 / 4.0,
                turns_max: 3,
            }
        );
        assert_eq!(a.rate_per_s, Some(7.0 / 4.0));
    }
}
