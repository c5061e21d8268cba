//! The encoder of the bundled tiktoken encodings: the same output as tiktoken-rs's
//! `CoreBPE::encode_ordinary` (checked against it in tests), in time linear in the text
//! up to a log factor.
//!
//! Splitting: tiktoken-rs splits text with `fancy-regex`, which costs about 2 µs per
//! token (60 ms for a 32k-token prompt). On ASCII input the split patterns reduce to
//! simple byte classes, so this module hand-codes them; other text goes through the same
//! patterns with `fancy-regex`.
//!
//! Merging: tiktoken's byte-pair merge scans the whole piece for the best pair at every
//! merge, so a long run without whitespace (one 200k-character "word") costs O(n²) and
//! took minutes. Long pieces here merge in the same order through a heap, O(n log n).
//! Pieces longer than [`MAX_PIECE_BYTES`] (no real text has them) are merged in chunks of
//! that size, which bounds memory; the count of such a piece may differ from tiktoken's
//! by the merges that would have crossed a chunk boundary, at most a few tokens per
//! MiB.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::ranks::Ranks;

/// Pieces up to this length merge with tiktoken's scan, which is faster when short.
const SCAN_MERGE_BYTES: usize = 64;

/// Longer pieces are merged in chunks of this size (see the module comment).
pub(super) const MAX_PIECE_BYTES: usize = 1 << 20;

/// The split patterns of tiktoken-rs 0.7 (`tiktoken_ext/openai_public.rs`, MIT).
const CL100K_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);

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

pub(super) struct FastBpe {
    ranks: Ranks,
    pattern: Pattern,
    /// The split pattern for text that is not all ASCII (boxed: it is large).
    regex: Box<fancy_regex::Regex>,
}

impl FastBpe {
    /// `tokens`: the bytes and id of every ordinary (non-special) token.
    pub(super) fn new<'a>(
        pattern: Pattern,
        tokens: impl Iterator<Item = (&'a [u8], u32)>,
    ) -> Result<Self, String> {
        let ranks = Ranks::new(tokens);
        let regex = Box::new(
            fancy_regex::Regex::new(match pattern {
                Pattern::Cl100k => CL100K_PATTERN,
                Pattern::O200k => O200K_PATTERN,
            })
            .map_err(|e| e.to_string())?,
        );
        Ok(FastBpe {
            ranks,
            pattern,
            regex,
        })
    }

    /// Token ids of `text`, or `None` if a byte has no rank (the bundled encodings rank
    /// every byte).
    pub(super) fn encode(&self, text: &str) -> Option<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        if text.is_ascii() {
            self.encode_ascii(text.as_bytes(), &mut out)?;
        } else {
            self.encode_unicode(text, &mut out)?;
        }
        Some(out)
    }

    fn encode_ascii(&self, b: &[u8], out: &mut Vec<u32>) -> Option<()> {
        let mut p = 0;
        while p < b.len() {
            let end = match self.pattern {
                Pattern::Cl100k => cl100k_piece_end(b, p),
                Pattern::O200k => o200k_piece_end(b, p),
            };
            // Every byte starts some alternative, so a piece is never empty; guard anyway
            // so that a logic slip cannot loop forever.
            let end = end.max(p + 1);
            self.encode_piece(&b[p..end], out)?;
            p = end;
        }
        Some(())
    }

    /// Splits like tiktoken-rs (`find_iter` over the pattern, whose state is reused
    /// from match to match). Should the regex give up (its backtracking limit), the text
    /// up to the next whitespace is taken as one piece and the search starts again after
    /// it: the patterns look ahead, never behind, so a restart matches the same.
    fn encode_unicode(&self, text: &str, out: &mut Vec<u32>) -> Option<()> {
        let mut rest = text;
        while !rest.is_empty() {
            let mut done = 0;
            let mut gave_up = false;
            for found in self.regex.find_iter(rest) {
                let Ok(m) = found else {
                    gave_up = true;
                    break;
                };
                self.encode_piece(m.as_str().as_bytes(), out)?;
                done = m.end();
            }
            if !gave_up || done >= rest.len() {
                break;
            }
            let end = next_whitespace(rest, done);
            self.encode_piece(&rest.as_bytes()[done..end], out)?;
            rest = &rest[end..];
        }
        Some(())
    }

    fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) -> Option<()> {
        if let Some(id) = self.ranks.get(piece) {
            out.push(id);
            return Some(());
        }
        if piece.len() <= MAX_PIECE_BYTES {
            return self.byte_pair_encode(piece, out);
        }
        let mut rest = piece;
        while !rest.is_empty() {
            let mut cut = rest.len().min(MAX_PIECE_BYTES);
            // Cut between characters: a continuation byte is 0b10xx_xxxx.
            while cut < rest.len() && cut > 1 && rest[cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            self.byte_pair_encode(&rest[..cut], out)?;
            rest = &rest[cut..];
        }
        Some(())
    }

    fn rank(&self, bytes: &[u8]) -> u32 {
        self.ranks.get(bytes).unwrap_or(u32::MAX)
    }

    fn byte_pair_encode(&self, piece: &[u8], out: &mut Vec<u32>) -> Option<()> {
        if piece.len() <= SCAN_MERGE_BYTES {
            self.scan_merge(piece, out)
        } else {
            self.heap_merge(piece, out)
        }
    }

    /// tiktoken's `byte_pair_encode`: repeatedly merge the adjacent pair whose joined bytes
    /// have the lowest rank (leftmost on ties). Ported from tiktoken-rs 0.7 (MIT).
    fn scan_merge(&self, piece: &[u8], out: &mut Vec<u32>) -> Option<()> {
        if piece.len() == 1 {
            out.push(self.ranks.get(piece)?);
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
            out.push(self.ranks.get(&piece[w[0].0..w[1].0])?);
        }
        Some(())
    }

    /// The same merges as [`FastBpe::scan_merge`], in the same order, with the candidate
    /// pairs in a heap keyed by (rank, start): popping the least key is tiktoken's "lowest
    /// rank, leftmost on ties". Parts are named by their start offset. An entry is stale
    /// when its part's pair rank has changed since (a pair only ever grows, and ranks
    /// name distinct byte strings, so an unchanged rank is the same pair).
    fn heap_merge(&self, piece: &[u8], out: &mut Vec<u32>) -> Option<()> {
        let n = piece.len();
        let mut merge = HeapMerge {
            piece,
            bpe: self,
            next: (1..=n as u32).collect(),
            prev: (0..n as u32).map(|i| i.wrapping_sub(1)).collect(),
            rank: vec![u32::MAX; n],
            heap: BinaryHeap::with_capacity(n),
        };
        for s in 0..n - 1 {
            merge.update(s);
        }
        while let Some(Reverse(key)) = merge.heap.pop() {
            let (rank, s) = ((key >> 32) as u32, (key & 0xFFFF_FFFF) as usize);
            if merge.rank[s] == rank {
                merge.join(s);
            }
        }
        let mut s = 0;
        while s < n {
            let e = merge.next[s] as usize;
            out.push(self.ranks.get(&piece[s..e])?);
            s = e;
        }
        Some(())
    }
}

/// The state of [`FastBpe::heap_merge`]: a linked list of parts and the heap of pairs.
struct HeapMerge<'a> {
    piece: &'a [u8],
    bpe: &'a FastBpe,
    /// Start of the part after the part starting at `s` (`piece.len()` after the last).
    next: Vec<u32>,
    /// Start of the part before (`u32::MAX` before the first).
    prev: Vec<u32>,
    /// Rank of the pair starting at `s`; `u32::MAX` for none or for a merged-away part.
    rank: Vec<u32>,
    heap: BinaryHeap<Reverse<u64>>,
}

impl HeapMerge<'_> {
    /// Recomputes the rank of the pair starting at part `s` and queues it.
    fn update(&mut self, s: usize) {
        let n = self.piece.len();
        let mid = self.next[s] as usize;
        let rank = if mid < n {
            let end = self.next[mid] as usize;
            self.bpe.rank(&self.piece[s..end])
        } else {
            u32::MAX
        };
        self.rank[s] = rank;
        if rank != u32::MAX {
            self.heap.push(Reverse((u64::from(rank) << 32) | s as u64));
        }
    }

    /// Merges the part at `s` with the one after it.
    fn join(&mut self, s: usize) {
        let gone = self.next[s] as usize;
        let after = self.next[gone];
        self.next[s] = after;
        if (after as usize) < self.piece.len() {
            self.prev[after as usize] = s as u32;
        }
        self.rank[gone] = u32::MAX;
        self.update(s);
        let before = self.prev[s];
        if before != u32::MAX {
            self.update(before as usize);
        }
    }
}

/// Byte offset of the first whitespace character at or after `from` (or the end).
fn next_whitespace(text: &str, from: usize) -> usize {
    text[from..]
        .char_indices()
        .find(|&(i, c)| i > 0 && c.is_whitespace())
        .map_or(text.len(), |(i, _)| from + i)
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
        (fast.encode(text), bpe.get().unwrap().encode_ordinary(text))
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
        assert_same(include_str!(
            "../../../../tests/fixtures/tokenizer/corpus.txt"
        ));
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
    fn non_ascii_matches_tiktoken() {
        for text in [
            "café naïve Ünïcödé",
            "你好，世界！这是一个测试。",
            "emoji 🚀🚀 and flags 🇫🇷 ok",
            "combining e\u{301}e\u{301} marks",
            "ΑΒΓ αβγ ДЖЗ джз ǅǈ",
            "mixed\u{a0}spaces\u{2003}and\u{3000}more",
            "٣٤٥ digits ١٢٣٤٥",
        ] {
            assert_same(text);
        }
        const HOT: &[char] = &[
            ' ', ' ', '\n', 'a', 'A', 'é', 'É', '你', '好', '🚀', '\u{301}', '\u{a0}', '\'', 's',
            '1', '٣', '!', '/', 'ǅ', 'ß', '\t', '\r', '\u{3000}', '\u{2003}',
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(2025);
        for _ in 0..5_000 {
            let len = rng.random_range(0..40);
            let text: String = (0..len)
                .map(|_| HOT[rng.random_range(0..HOT.len())])
                .collect();
            assert_same(&text);
        }
    }

    #[test]
    fn long_pieces_merge_like_tiktoken() {
        // Past SCAN_MERGE_BYTES the heap merge runs; tiktoken-rs scans (fine at this size).
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for len in [65, 100, 300, 1_000, 3_000] {
            for alphabet in ["ab", "abcdefghij", "etaoinshrdlu", "é你a"] {
                let chars: Vec<char> = alphabet.chars().collect();
                let word: String = (0..len)
                    .map(|_| chars[rng.random_range(0..chars.len())])
                    .collect();
                assert_same(&word);
                assert_same(&format!("x {word} y"));
            }
            assert_same(&"a".repeat(len));
            assert_same(&"!?".repeat(len));
        }
    }

    /// A single 1 MB "word": tiktoken's scan merge is quadratic on it (minutes); here it
    /// takes well under a second in a release build. The bound is loose: debug builds on
    /// a busy machine are slow, and only a quadratic merge would come near it.
    #[test]
    fn a_one_megabyte_word_counts_in_bounded_time() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let ascii: String = (0..1_000_000)
            .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
            .collect();
        let cjk: String = (0..330_000)
            .map(|_| char::from_u32(0x4E00 + rng.random_range(0..2000)).unwrap())
            .collect();
        for (name, word) in [("ascii", &ascii), ("cjk", &cjk)] {
            for tok in [o200k(), cl100k()] {
                let start = std::time::Instant::now();
                let n = tok.count(word);
                let took = start.elapsed();
                eprintln!("{}: 1 MB {name} word: {n} tokens in {took:?}", tok.name());
                assert!(n > 100_000, "{n}");
                assert!(took < std::time::Duration::from_secs(30), "{took:?}");
            }
        }
    }

    /// Figures for a 10 MB single word, and tiktoken-rs's quadratic merge on shorter ones
    /// for comparison; run with `cargo test -p runner --lib --release
    /// tokenizer::fast_bpe::tests::long_word_timings -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn long_word_timings() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let ascii: String = (0..10_000_000)
            .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
            .collect();
        let cjk: String = (0..3_400_000)
            .map(|_| char::from_u32(0x4E00 + rng.random_range(0..2000)).unwrap())
            .collect();
        for tok in [o200k(), cl100k()] {
            for (what, word) in [("ascii", &ascii), ("cjk", &cjk)] {
                let start = std::time::Instant::now();
                let n = tok.count(word);
                eprintln!(
                    "{}: {} byte {what} word: {n} tokens in {:?}",
                    tok.name(),
                    word.len(),
                    start.elapsed()
                );
            }
            let Backend::Tiktoken { bpe, .. } = &tok.backend else {
                unreachable!()
            };
            for len in [25_000, 50_000, 100_000, 200_000] {
                let start = std::time::Instant::now();
                let n = bpe.get().unwrap().encode_ordinary(&ascii[..len]).len();
                eprintln!(
                    "{}: tiktoken-rs on a {len} byte word: {n} tokens in {:?}",
                    tok.name(),
                    start.elapsed()
                );
            }
        }
    }

    #[test]
    fn a_piece_over_the_chunk_size_counts_close_to_exact() {
        // Exact reference: one heap merge over the whole piece, no chunks.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let word: Vec<u8> = (0..super::MAX_PIECE_BYTES * 3 + 123)
            .map(|_| b'a' + rng.random_range(0..26u8))
            .collect();
        let Backend::Tiktoken { fast, .. } = &o200k().backend else {
            unreachable!()
        };
        let mut exact = Vec::new();
        fast.heap_merge(&word, &mut exact).unwrap();
        let chunked = fast.encode(std::str::from_utf8(&word).unwrap()).unwrap();
        let diff = exact.len().abs_diff(chunked.len());
        eprintln!(
            "3 MiB word: exact {} tokens, chunked {} (diff {diff})",
            exact.len(),
            chunked.len()
        );
        assert!(diff <= 3 * 4, "{diff}");
    }
}
