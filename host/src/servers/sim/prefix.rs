//! The `default` profile's prefix cache, in the manner of vLLM's automatic prefix caching:
//! a prompt is cut into blocks, each block hashed together with everything before it, and
//! a request admitted skips the prefill of its leading blocks already in the cache. The
//! cache holds as many blocks as the KV cache, least recently used out first.
//!
//! The simulator counts tokens without keeping them, so a text prompt is cut every
//! [`BLOCK_BYTES`] bytes (a block of 16 tokens at ~4 bytes per token) and a hit covers the
//! same share of the prompt's tokens as of its bytes; a prompt of token ids is cut every
//! 16 ids, exactly.
//!
//! `POST /reset_prefix_cache` (vLLM's route) empties it through a [`PrefixReset`]: the
//! cache lives on the scheduler's task, so the handler raises the reset and the cache
//! empties itself before the next prompt it admits.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hashlink::LruCache;

/// vLLM's default KV block size, tokens.
pub const BLOCK_TOKENS: usize = 16;
/// A block of text: 16 tokens at the ~4 bytes per token of English BPE.
const BLOCK_BYTES: usize = 64;

/// The chained hashes of a prompt's full blocks, and the share of the prompt each covers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptBlocks {
    hashes: Vec<u64>,
    /// Length of a block and of the whole prompt, in bytes or ids.
    block: usize,
    total: usize,
}

impl PromptBlocks {
    pub fn of_text(text: &str) -> PromptBlocks {
        let bytes = text.as_bytes();
        PromptBlocks::chain(bytes.chunks_exact(BLOCK_BYTES), BLOCK_BYTES, bytes.len())
    }

    pub fn of_ids(ids: &[u64]) -> PromptBlocks {
        PromptBlocks::chain(ids.chunks_exact(BLOCK_TOKENS), BLOCK_TOKENS, ids.len())
    }

    fn chain<T: Hash>(blocks: impl Iterator<Item = T>, block: usize, total: usize) -> PromptBlocks {
        let mut previous = 0u64;
        let hashes = blocks
            .map(|b| {
                let mut h = DefaultHasher::new();
                previous.hash(&mut h);
                b.hash(&mut h);
                previous = h.finish();
                previous
            })
            .collect();
        PromptBlocks {
            hashes,
            block,
            total,
        }
    }

    /// Tokens of a prompt of `prompt_tokens` that its first `blocks` blocks cover.
    pub fn covered(&self, blocks: usize, prompt_tokens: usize) -> usize {
        let covered = blocks.saturating_mul(self.block).min(self.total);
        match self.total {
            0 => 0,
            total => (covered as u128 * prompt_tokens as u128 / total as u128) as usize,
        }
    }
}

/// Asks a [`PrefixCache`] on another task to empty itself: a count of the resets asked.
#[derive(Clone, Debug, Default)]
pub struct PrefixReset(Arc<AtomicU64>);

impl PrefixReset {
    /// Every block cached so far is gone for the next prompt admitted.
    pub fn request(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn asked(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Block hashes in the cache, least recently used first out.
pub struct PrefixCache {
    blocks: LruCache<u64, ()>,
    reset: PrefixReset,
    /// Resets done: the cache is emptied when `reset` has asked for more.
    resets_done: u64,
}

impl PrefixCache {
    /// A cache of `capacity` blocks (at least one).
    pub fn new(capacity: usize) -> PrefixCache {
        PrefixCache {
            blocks: LruCache::new(capacity.max(1)),
            reset: PrefixReset::default(),
            resets_done: 0,
        }
    }

    /// What empties this cache from another task.
    pub fn reset_handle(&self) -> PrefixReset {
        self.reset.clone()
    }

    /// How many leading blocks of `prompt` the cache holds; then every block of it is
    /// cached (the prefill about to run computes them).
    pub fn admit(&mut self, prompt: &PromptBlocks) -> usize {
        let asked = self.reset.asked();
        if asked != self.resets_done {
            self.blocks.clear();
            self.resets_done = asked;
        }
        let hits = prompt
            .hashes
            .iter()
            .take_while(|h| self.blocks.get(h).is_some())
            .count();
        for h in &prompt.hashes[hits..] {
            self.blocks.insert(*h, ());
        }
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_prefix_hits_and_a_changed_block_ends_the_match() {
        let prefix = "p".repeat(BLOCK_BYTES * 3);
        let a = PromptBlocks::of_text(&format!("{prefix}{}", "a".repeat(BLOCK_BYTES)));
        let b = PromptBlocks::of_text(&format!("{prefix}{}", "b".repeat(BLOCK_BYTES)));
        let mut cache = PrefixCache::new(100);
        assert_eq!(cache.admit(&a), 0);
        assert_eq!(cache.admit(&b), 3);
        assert_eq!(b.covered(3, 400), 300);
        // Same blocks at another position hash differently: the chain holds the prefix.
        let moved = PromptBlocks::of_text(&format!("{}{prefix}", "x".repeat(BLOCK_BYTES)));
        assert_eq!(cache.admit(&moved), 0);
    }

    #[test]
    fn the_least_recently_used_blocks_leave_first() {
        let ids = |start: u64| (start..start + 32).collect::<Vec<u64>>();
        let (a, b) = (
            PromptBlocks::of_ids(&ids(0)),
            PromptBlocks::of_ids(&ids(1000)),
        );
        let mut cache = PrefixCache::new(2);
        cache.admit(&a);
        cache.admit(&b);
        assert_eq!(cache.admit(&a), 0, "b's two blocks pushed a's out");
        assert_eq!(a.covered(2, 32), 32);
    }

    #[test]
    fn a_reset_from_another_handle_empties_the_cache_once() {
        let a = PromptBlocks::of_ids(&(0..48).collect::<Vec<u64>>());
        let mut cache = PrefixCache::new(100);
        cache.admit(&a);
        assert_eq!(cache.admit(&a), 3);
        let reset = cache.reset_handle();
        reset.request();
        reset.request();
        assert_eq!(
            cache.admit(&a),
            0,
            "two resets asked before one admission empty it once"
        );
        assert_eq!(
            cache.admit(&a),
            3,
            "what was admitted after the reset stays"
        );
    }
}
