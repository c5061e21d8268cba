//! Exact fast path for the bundled tiktoken encodings on ASCII text.
//!
//! tiktoken-rs splits text with `fancy-regex`, which costs about 2 µs per token (60 ms for
//! a 32k-token prompt). On ASCII input the split patterns reduce to simple byte classes, so
//! this module hand-codes them, then applies tiktoken's byte-pair merge to each piece.
//! The output is identical to `CoreBPE::encode_ordinary` (checked against it in tests);
//! non-ASCII text is left to tiktoken-rs.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Which split pattern the encoding uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pattern {
    /// `cl100k_base`: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    /// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Cl100k,
    /// `o200k_base`: like cl100k, but a word is `[upper]*[lower]+` or `[upper]+[lower]*`
    /// with an optional trailing contraction, and punctuation may absorb `[\r\n/]*`.
    O200k,
}

type Ranks = HashMap<Box<[u8]>, u32, BuildHasherDefault<FxHasher>>;

pub(super) struct FastBpe {
    ranks: Ranks,
    pattern: Pattern,
}

impl FastBpe {
    /// `tokens`: the bytes and id of every ordinary (non-special) token.
    pub(super) fn new<'a>(pattern: Pattern, tokens: impl Iterator<Item = (&'a [u8], u32)>) -> Self {
        let mut ranks = Ranks::default();
        for (bytes, id) in tokens {
            ranks.insert(bytes.into(), id);
        }
        FastBpe { ranks, pattern }
    }

    /// Token ids of `text`, or `None` when the fast path does not apply (non-ASCII text,
    /// or a byte without a rank, which the bundled encodings never lack).
    pub(super) fn encode(&self, text: &str) -> Option<Vec<u32>> {
        let b = text.as_bytes();
        if !b.is_ascii() {
            return None;
        }
        let mut out = Vec::with_capacity(b.len() / 4 + 1);
        let mut p = 0;
        while p < b.len() {
            let end = match self.pattern {
                Pattern::Cl100k => cl100k_piece_end(b, p),
                Pattern::O200k => o200k_piece_end(b, p),
            };
            // Every byte starts some alternative, so a piece is never empty; guard anyway
            // so that a logic slip cannot loop forever.
            let end = end.max(p + 1);
            let piece = &b[p..end];
            match self.ranks.get(piece) {
                Some(&id) => out.push(id),
                None => self.byte_pair_encode(piece, &mut out)?,
            }
            p = end;
        }
        Some(out)
    }

    fn rank(&self, bytes: &[u8]) -> u32 {
        self.ranks.get(bytes).copied().unwrap_or(u32::MAX)
    }

    /// tiktoken's `byte_pair_encode`: repeatedly merge the adjacent pair whose joined bytes
    /// have the lowest rank (leftmost on ties). Ported from tiktoken-rs 0.7 (MIT).
    fn byte_pair_encode(&self, piece: &[u8], out: &mut Vec<u32>) -> Option<()> {
        if piece.len() == 1 {
            out.push(*self.ranks.get(piece)?);
            return Some(());
        }
        // (start, rank of the pair starting here)
        let mut parts: Vec<(usize, u32)> = Vec::with_capacity(piece.len() + 1);
        let mut min_rank = (u32::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank < min_rank.0 {
                min_rank = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let get_rank = |parts: &[(usize, u32)], i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                u32::MAX
            }
        };
        while min_rank.0 != u32::MAX {
            let i = min_rank.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
            min_rank = (u32::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min_rank.0 {
                    min_rank = (rank, i);
                }
            }
        }
        for w in parts.windows(2) {
            out.push(*self.ranks.get(&piece[w[0].0..w[1].0])?);
        }
        Some(())
    }
}

// Byte classes of the split patterns, restricted to ASCII. `\s` is Unicode White_Space:
// tab, LF, VT, FF, CR and space.
fn is_ws(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}
fn is_nl(c: u8) -> bool {
    c == b'\r' || c == b'\n'
}
/// `[^\s\p{L}\p{N}]`
fn is_other(c: u8) -> bool {
    !is_ws(c) && !c.is_ascii_alphanumeric()
}
/// `[^\r\n\p{L}\p{N}]`
fn is_prefix(c: u8) -> bool {
    !is_nl(c) && !c.is_ascii_alphanumeric()
}

/// First index at or after `from` whose byte fails `pred`.
fn run(b: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    let mut i = from;
    while i < b.len() && pred(b[i]) {
        i += 1;
    }
    i
}

/// Length of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `p`, or 0.
fn contraction(b: &[u8], p: usize) -> usize {
    if b.get(p) != Some(&b'\'') {
        return 0;
    }
    let at = |i: usize| b.get(p + i).map(u8::to_ascii_lowercase);
    match at(1) {
        Some(b's' | b't' | b'm' | b'd') => 2,
        Some(b'r') | Some(b'v') if at(2) == Some(b'e') => 3,
        Some(b'l') if at(2) == Some(b'l') => 3,
        _ => 0,
    }
}

/// ` ?[^\s\p{L}\p{N}]+` followed by a run of `tail`, if it matches at `p`.
fn punctuation(b: &[u8], p: usize, tail: impl Fn(u8) -> bool) -> Option<usize> {
    let q = if b[p] == b' ' && b.get(p + 1).is_some_and(|&c| is_other(c)) {
        p + 1
    } else {
        p
    };
    if !is_other(b[q]) {
        return None;
    }
    Some(run(b, run(b, q, is_other), tail))
}

/// `\s*[\r\n]+|\s+(?!\S)|\s+` at `p`, where `b[p]` is whitespace.
fn whitespace(b: &[u8], p: usize) -> usize {
    let r = run(b, p, is_ws);
    // `\s*[\r\n]+`: backtracking stops at the last newline of the run.
    if let Some(last_nl) = (p..r).rev().find(|&i| is_nl(b[i])) {
        return last_nl + 1;
    }
    // `\s+(?!\S)`: leave the last space to the word that follows.
    if r < b.len() && r - p >= 2 {
        return r - 1;
    }
    r
}

fn cl100k_piece_end(b: &[u8], p: usize) -> usize {
    let c = b[p];
    let k = contraction(b, p);
    if k > 0 {
        return p + k;
    }
    if c.is_ascii_alphabetic() {
        return run(b, p, |c| c.is_ascii_alphabetic());
    }
    if is_prefix(c) && b.get(p + 1).is_some_and(u8::is_ascii_alphabetic) {
        return run(b, p + 1, |c| c.is_ascii_alphabetic());
    }
    if c.is_ascii_digit() {
        return run(b, p, |c| c.is_ascii_digit()).min(p + 3);
    }
    if let Some(end) = punctuation(b, p, is_nl) {
        return end;
    }
    whitespace(b, p)
}

fn o200k_piece_end(b: &[u8], p: usize) -> usize {
    let c = b[p];
    // With ASCII input the optional prefix, once taken, never needs to be given back: a
    // prefix byte is not a letter, so the word alternatives cannot start on it.
    let q = if is_prefix(c) { p + 1 } else { p };
    let upper = run(b, q, |c| c.is_ascii_uppercase());
    let lower = run(b, upper, |c| c.is_ascii_lowercase());
    // `[upper]*[lower]+'s?`
    if lower > upper {
        return lower + contraction(b, lower);
    }
    // `[upper]+[lower]*'s?` (the lower run is empty here)
    if upper > q {
        return upper + contraction(b, upper);
    }
    if c.is_ascii_digit() {
        return run(b, p, |c| c.is_ascii_digit()).min(p + 3);
    }
    if let Some(end) = punctuation(b, p, |c| is_nl(c) || c == b'/') {
        return end;
    }
    whitespace(b, p)
}

/// The Fx hash (as in rustc-hash, which tiktoken itself uses): much faster than SipHash
/// on short keys, and lookups need no DoS resistance.
#[derive(Default, Clone, Copy)]
pub(super) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
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

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cl100k, o200k};
    use super::super::Backend;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The fast path and tiktoken-rs on the same text.
    fn both(tok: &super::super::Tokenizer, text: &str) -> (Option<Vec<u32>>, Vec<u32>) {
        let Backend::Tiktoken { bpe, fast, .. } = &tok.backend else {
            unreachable!()
        };
        (fast.encode(text), bpe.encode_ordinary(text))
    }

    fn assert_same(text: &str) {
        for tok in [o200k(), cl100k()] {
            let (fast, slow) = both(tok, text);
            assert_eq!(fast.as_ref(), Some(&slow), "{}: {text:?}", tok.name());
        }
    }

    #[test]
    fn edge_cases_match_tiktoken() {
        for text in [
            "",
            " ",
            "  ",
            "a",
            " a",
            "  a",
            "\t\tword",
            "hello world",
            "Hello World HELLO wORLD HeLLo",
            "don't DON'T I'm we'll they've she'd you're 'sam 'S 'Re 'LL",
            "it's' 's '",
            "12 123 1234 1234567 a1b2",
            "a/b/c //x !/\n/ ?!\n\r\n/",
            "line\nline\r\nline\n\n\n  \n  x",
            "trailing spaces   ",
            "trailing newline\n",
            " \n \t \x0b \x0c x\x0b\x0cy",
            "ctrl\x01\x02x \x1f\x7f",
            "\"quoted\" (paren) [bracket] {brace} <angle> #hash $dollar %pct",
            "snake_case camelCase PascalCase SCREAMING_CASE kebab-case",
            "e.g. i.e. U.S.A. Mr. Smith's",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "                                                    x",
            "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
        ] {
            assert_same(text);
        }
        assert_same(include_str!("../../../tests/fixtures/tokenizer/corpus.txt"));
    }

    #[test]
    fn random_ascii_matches_tiktoken() {
        // Weighted towards the bytes the patterns care about, plus every ASCII byte.
        const HOT: &[u8] = b"   \n\n\r\t\x0b\x0c''/!.,-_aAbBsStTrReElLdDmMvVzZ019";
        let mut rng = ChaCha8Rng::seed_from_u64(2024);
        for _ in 0..20_000 {
            let len = rng.random_range(0..60);
            let text: String = (0..len)
                .map(|_| {
                    if rng.random_bool(0.8) {
                        HOT[rng.random_range(0..HOT.len())] as char
                    } else {
                        rng.random_range(0u8..128) as char
                    }
                })
                .collect();
            assert_same(&text);
        }
    }

    #[test]
    fn non_ascii_is_left_to_tiktoken() {
        let (fast, _) = both(o200k(), "café");
        assert!(fast.is_none());
    }
}
