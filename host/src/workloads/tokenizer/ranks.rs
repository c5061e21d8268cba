//! The id of a byte string among an encoding's ordinary tokens: an open-addressing table
//! over one buffer of token bytes. A `HashMap<Box<[u8]>, u32>` needs an allocation per
//! token, and filling (and freeing) one for o200k_base's 200k tokens was most of a load
//! from the cache.

use std::hash::Hasher;

pub(super) struct Ranks {
    /// Every token's bytes, back to back.
    bytes: Vec<u8>,
    /// Per entry: its range in `bytes` and its id.
    entries: Vec<(u32, u32, u32)>,
    /// Per slot: one plus the entry's index (0 is empty) and the top half of its key's
    /// hash, which rules out most mismatches without comparing bytes. The length is a
    /// power of two at least twice the entries, so probing always meets an empty slot.
    slots: Vec<(u32, u32)>,
    /// The hash is shifted right by this much to index `slots`.
    shift: u32,
}

impl Ranks {
    /// `tokens`: bytes and id; a repeated byte string keeps its last id (as a map would).
    pub(super) fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)>) -> Ranks {
        let mut bytes = Vec::new();
        let mut entries = Vec::new();
        for (token, id) in tokens {
            let start = offset(bytes.len());
            bytes.extend_from_slice(token);
            entries.push((start, offset(bytes.len()), id));
        }
        let len = (entries.len() * 2).next_power_of_two().max(2);
        let mut ranks = Ranks {
            bytes,
            entries: Vec::with_capacity(entries.len()),
            slots: vec![(0, 0); len],
            shift: 64 - len.trailing_zeros(),
        };
        for (start, end, id) in entries {
            ranks.insert(start, end, id);
        }
        ranks
    }

    fn insert(&mut self, start: u32, end: u32, id: u32) {
        let key = self
            .bytes
            .get(start as usize..end as usize)
            .unwrap_or_default();
        let (mut i, tag) = self.home(key);
        let mask = self.slots.len() - 1;
        loop {
            let (slot, slot_tag) = self.slots[i];
            if slot == 0 {
                self.entries.push((start, end, id));
                self.slots[i] = (offset(self.entries.len()), tag);
                return;
            }
            if slot_tag == tag && self.key(slot) == Some(key) {
                self.entries[slot as usize - 1].2 = id;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of the token whose bytes are `key`.
    pub(super) fn get(&self, key: &[u8]) -> Option<u32> {
        let (mut i, tag) = self.home(key);
        let mask = self.slots.len() - 1;
        loop {
            let (slot, slot_tag) = *self.slots.get(i)?;
            if slot == 0 {
                return None;
            }
            if slot_tag == tag && self.key(slot) == Some(key) {
                return Some(self.entries.get(slot as usize - 1)?.2);
            }
            i = (i + 1) & mask;
        }
    }

    fn key(&self, slot: u32) -> Option<&[u8]> {
        let &(start, end, _) = self.entries.get((slot as usize).checked_sub(1)?)?;
        self.bytes.get(start as usize..end as usize)
    }

    /// The first slot to probe and the tag: the Fx hash's high bits are its best mixed.
    fn home(&self, key: &[u8]) -> (usize, u32) {
        let mut h = FxHasher::default();
        h.write(key);
        let hash = h.finish();
        ((hash >> self.shift) as usize, (hash >> 32) as u32)
    }
}

/// Offsets and counts fit in 32 bits: a token table's offsets are u32 (mod.rs).
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The Fx hash (as in rustc-hash, which tiktoken itself uses): much faster than SipHash
/// on short keys, and lookups need no DoS resistance.
#[derive(Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.add(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_token_and_nothing_else() {
        let words: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!("w{i}").into_bytes())
            .chain([Vec::new(), b"x".to_vec()])
            .collect();
        let ranks = Ranks::new(words.iter().zip(0..).map(|(w, id)| (&w[..], id)));
        for (id, w) in words.iter().enumerate() {
            assert_eq!(ranks.get(w), Some(id as u32), "{w:?}");
        }
        for missing in [&b"w5000"[..], b"y", b"w", b"w00"] {
            assert_eq!(ranks.get(missing), None);
        }
        // A repeated key keeps its last id, like a map.
        let dup = Ranks::new([(&b"a"[..], 1), (b"a", 2)].into_iter());
        assert_eq!(dup.get(b"a"), Some(2));
        assert_eq!(Ranks::new(std::iter::empty()).get(b"a"), None);
    }
}
