//! The run's tokenizer: counts tokens, decodes ids and makes synthetic prompts of an exact
//! token length.
//!
//! Built-ins are the tiktoken encodings bundled with `tiktoken-rs` (`o200k_base`, the
//! default, and `cl100k_base`); anything else is a path to a Hugging Face `tokenizer.json`.
//! Nothing is downloaded. A [`Tokenizer`] is immutable after [`Tokenizer::load`] and is
//! shared across threads as `Arc<Tokenizer>`.
//!
//! Synthetic text is built from a pool of "word" tokens picked once at load: tokens whose
//! text is a space followed by 2–8 lowercase ASCII letters and that encode back to exactly
//! that one token. Words joined by single spaces tokenize word-for-word under byte-level
//! BPE, Metaspace and whitespace pre-tokenizers, so the first draft usually has exactly
//! `n` tokens; the result is always re-encoded and, if off, adjusted in a bounded loop
//! (append words when short, cut the token ids at `n` and decode when long).
//!
//! A bundled encoding is loaded from what an earlier run derived (cache.rs) when it can
//! be: tiktoken-rs's `CoreBPE` is then built only if an encode ever needs it.

mod cache;
mod fast_bpe;
mod ranks;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rand::{Rng, RngCore};
use tiktoken_rs::CoreBPE;

use fast_bpe::FastBpe;

/// The tokenizer used when the run names none.
pub const DEFAULT_TOKENIZER: &str = "o200k_base";

/// Names accepted by [`Tokenizer::load`] besides a path to a `tokenizer.json`.
pub const BUILTIN_TOKENIZERS: &[&str] = &["o200k_base", "cl100k_base"];

/// Upper bound on encode-and-adjust rounds: each round re-encodes the whole text, so this
/// bounds the cost of a tokenizer on which word-for-word construction does not hold.
const MAX_FIT_ROUNDS: usize = 24;

/// Word tokens are a space plus this many lowercase ASCII letters.
const WORD_LETTERS: std::ops::RangeInclusive<usize> = 2..=8;

/// Below this many "common" words (see `build_pools`) all word tokens are used instead, so
/// that small vocabularies still give varied text.
const MIN_COMMON_WORDS: usize = 256;

/// Why a tokenizer could not be loaded, or token ids could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("unknown tokenizer `{name}`: expected one of {} or a path to a Hugging Face tokenizer.json", BUILTIN_TOKENIZERS.join(", "))]
    UnknownName { name: String },
    #[error("tokenizer file not found: {}", path.display())]
    NotFound { path: PathBuf },
    #[error("cannot read tokenizer file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a usable Hugging Face tokenizer.json: {reason}", path.display())]
    InvalidFile { path: PathBuf, reason: String },
    #[error("built-in tokenizer {name} failed to initialise: {reason}")]
    Builtin { name: String, reason: String },
    #[error("cannot decode token ids with tokenizer {tokenizer}: {reason}")]
    Decode { tokenizer: String, reason: String },
}

/// A loaded tokenizer plus the token pools used to make synthetic text. Immutable, `Send`
/// and `Sync`: load it once per run and share it as `Arc<Tokenizer>`.
pub struct Tokenizer {
    name: String,
    backend: Backend,
    /// One past the highest valid token id (special tokens included).
    vocab_size: usize,
    pools: Pools,
}

enum Backend {
    Tiktoken {
        bpe: LazyCore,
        /// Same output as `bpe`, about 30× faster on ASCII text, and never quadratic.
        fast: Box<FastBpe>,
        table: TokenTable,
    },
    Hf(Box<tokenizers::Tokenizer>),
}

/// The tiktoken encodings bundled with tiktoken-rs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Builtin {
    O200k,
    Cl100k,
}

impl Builtin {
    fn from_name(name: &str) -> Option<Builtin> {
        match name {
            "o200k_base" => Some(Builtin::O200k),
            "cl100k_base" => Some(Builtin::Cl100k),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Builtin::O200k => "o200k_base",
            Builtin::Cl100k => "cl100k_base",
        }
    }

    fn pattern(self) -> fast_bpe::Pattern {
        match self {
            Builtin::O200k => fast_bpe::Pattern::O200k,
            Builtin::Cl100k => fast_bpe::Pattern::Cl100k,
        }
    }

    /// tiktoken-rs's encoder: parses the embedded vocabulary (most of a fresh load's time).
    fn build(self) -> Result<CoreBPE, TokenizerError> {
        let built = match self {
            Builtin::O200k => tiktoken_rs::o200k_base(),
            Builtin::Cl100k => tiktoken_rs::cl100k_base(),
        };
        built.map_err(|e| TokenizerError::Builtin {
            name: self.name().into(),
            reason: e.to_string(),
        })
    }
}

/// tiktoken-rs's `CoreBPE`, built on first use: `FastBpe` encodes every text of the
/// bundled encodings, so a load from the cache never needs it.
struct LazyCore {
    encoding: Builtin,
    cell: OnceLock<Option<Box<CoreBPE>>>,
}

impl LazyCore {
    fn new(encoding: Builtin, built: Option<CoreBPE>) -> LazyCore {
        let cell = OnceLock::new();
        if let Some(bpe) = built {
            let _ = cell.set(Some(Box::new(bpe)));
        }
        LazyCore { encoding, cell }
    }

    /// `None` only if tiktoken-rs failed to build it, which a load has already ruled out
    /// unless the load came from the cache.
    fn get(&self) -> Option<&CoreBPE> {
        self.cell
            .get_or_init(|| self.encoding.build().ok().map(Box::new))
            .as_deref()
    }
}

/// Bytes of every tiktoken id, so that decoding is lossy on split UTF-8 (like Python's
/// tiktoken) instead of failing, and unknown ids are reported instead of panicking.
struct TokenTable {
    bytes: Vec<u8>,
    /// `starts[id]..starts[id + 1]` is the byte range of `id`.
    starts: Vec<u32>,
    known: Vec<bool>,
    special: Vec<bool>,
}

impl TokenTable {
    fn push(&mut self, bytes: Option<&[u8]>) {
        self.known.push(bytes.is_some());
        self.special.push(false);
        self.bytes.extend_from_slice(bytes.unwrap_or_default());
        self.starts.push(self.bytes.len() as u32);
    }

    fn get(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if !*self.known.get(i)? {
            return None;
        }
        // Checked reads: a table from the cache is validated, but a slip must not panic.
        let (start, end) = (*self.starts.get(i)?, *self.starts.get(i + 1)?);
        self.bytes.get(start as usize..end as usize)
    }
}

/// Token pools picked once at load; all sorted by token id so that the same seed gives
/// the same text on every run and platform.
struct Pools {
    /// Letters of the word tokens (the token is the letters with a leading space).
    words: Vec<Box<str>>,
    /// Indices into `words` whose letters alone (no leading space) are also one token,
    /// so the text can start without a space.
    heads: Vec<u32>,
    /// Ordinary (non-special) ids whose text on its own is valid, printable UTF-8.
    clean: Vec<u32>,
}

impl Tokenizer {
    /// Loads `"o200k_base"` (the default), `"cl100k_base"`, or a Hugging Face
    /// `tokenizer.json` (a path to the file, or to a directory that holds one).
    pub fn load(spec: &str) -> Result<Tokenizer, TokenizerError> {
        if let Some(encoding) = Builtin::from_name(spec) {
            let entry = cache::default_path(encoding.name());
            return Self::load_builtin(encoding, entry.as_deref());
        }
        let path = Path::new(spec);
        let looks_like_path = spec.contains(['/', '\\']) || spec.ends_with(".json");
        if path.exists() {
            Self::load_hf(spec, path)
        } else if looks_like_path {
            Err(TokenizerError::NotFound { path: path.into() })
        } else {
            Err(TokenizerError::UnknownName { name: spec.into() })
        }
    }

    /// A bundled encoding, from the cache entry at `entry` when it holds a sound one, else
    /// built from tiktoken-rs and then kept there. The cache never fails the load: with no
    /// entry path, or one that cannot be read or written, this is a plain build.
    fn load_builtin(encoding: Builtin, entry: Option<&Path>) -> Result<Tokenizer, TokenizerError> {
        if let Some(Ok((table, pools))) = entry.map(|p| cache::read(p, encoding.name())) {
            return Self::from_table(encoding, table, Some(pools), None);
        }
        let bpe = encoding.build()?;
        let table = build_table(&bpe);
        let tok = Self::from_table(encoding, table, None, Some(bpe))?;
        if let (Some(path), Backend::Tiktoken { table, .. }) = (entry, &tok.backend) {
            // A read-only or missing cache only costs the next run this build again.
            let _ = cache::write(path, encoding.name(), table, &tok.pools);
        }
        Ok(tok)
    }

    /// The tokenizer over `table`; `pools` are picked here unless given (from the cache).
    fn from_table(
        encoding: Builtin,
        table: TokenTable,
        pools: Option<Pools>,
        bpe: Option<CoreBPE>,
    ) -> Result<Tokenizer, TokenizerError> {
        let vocab_size = table.known.len();
        let ordinary = (0..vocab_size as u32)
            .filter(|&id| !table.special[id as usize])
            .filter_map(|id| Some((table.get(id)?, id)));
        let fast = FastBpe::new(encoding.pattern(), ordinary).map_err(|reason| {
            TokenizerError::Builtin {
                name: encoding.name().into(),
                reason,
            }
        })?;
        let mut tok = Tokenizer {
            name: encoding.name().into(),
            backend: Backend::Tiktoken {
                bpe: LazyCore::new(encoding, bpe),
                fast: Box::new(fast),
                table,
            },
            vocab_size,
            pools: Pools::empty(),
        };
        tok.pools = match pools {
            Some(pools) => pools,
            None => tok.build_pools(),
        };
        Ok(tok)
    }

    fn load_hf(spec: &str, path: &Path) -> Result<Tokenizer, TokenizerError> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let bytes = std::fs::read(&file).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                TokenizerError::NotFound { path: file.clone() }
            } else {
                TokenizerError::Unreadable {
                    path: file.clone(),
                    source,
                }
            }
        })?;
        let invalid = |reason: String| TokenizerError::InvalidFile {
            path: file.clone(),
            reason,
        };
        let mut hf =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| invalid(e.to_string()))?;
        // Truncation or padding in the file would make counts lie; counting needs neither.
        hf.with_truncation(None)
            .map_err(|e| invalid(e.to_string()))?;
        hf.with_padding(None);
        // A tokenizer that fails on ordinary text (e.g. WordLevel without an unknown token)
        // cannot count a server's output; refuse it here with a clear message.
        hf.encode_fast("Hello, world! Ünïcödé 123 你好.", false)
            .map_err(|e| invalid(format!("it cannot encode ordinary text: {e}")))?;
        let vocab_size = hf
            .get_vocab(true)
            .values()
            .max()
            .map_or(0, |&m| m as usize + 1);
        if vocab_size == 0 {
            return Err(invalid("its vocabulary is empty".into()));
        }
        let mut tok = Tokenizer {
            name: spec.into(),
            backend: Backend::Hf(Box::new(hf)),
            vocab_size,
            pools: Pools::empty(),
        };
        tok.pools = tok.build_pools();
        Ok(tok)
    }

    /// `"o200k_base"`, `"cl100k_base"`, or the path given to [`Tokenizer::load`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of `text`; no special tokens are added (no BOS) and, for tiktoken
    /// encodings, special-token text is encoded as ordinary text.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.backend {
            // FastBpe gives up only on a byte without a rank; tiktoken-rs then decides.
            Backend::Tiktoken { bpe, fast, .. } => fast
                .encode(text)
                .or_else(|| Some(bpe.get()?.encode_ordinary(text)))
                .unwrap_or_default(),
            // Load checked that ordinary text encodes; an error here has no token count
            // to give, so it yields none rather than panicking.
            Backend::Hf(hf) => hf
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
        }
    }

    /// Number of tokens in `text` (as [`Tokenizer::encode`]).
    pub fn count(&self, text: &str) -> usize {
        match &self.backend {
            Backend::Tiktoken { .. } => self.encode(text).len(),
            Backend::Hf(hf) => hf.encode_fast(text, false).map_or(0, |e| e.len()),
        }
    }

    /// Text of `ids`, special tokens included. Invalid UTF-8 (an id sequence that splits a
    /// character) becomes U+FFFD; an id outside the vocabulary is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let unknown = |id: u32| TokenizerError::Decode {
            tokenizer: self.name.clone(),
            reason: format!(
                "token id {id} is not in the vocabulary (valid ids are below {})",
                self.vocab_size
            ),
        };
        match &self.backend {
            Backend::Tiktoken { table, .. } => {
                let mut bytes = Vec::with_capacity(ids.len() * 4);
                for &id in ids {
                    bytes.extend_from_slice(table.get(id).ok_or_else(|| unknown(id))?);
                }
                Ok(match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                })
            }
            Backend::Hf(hf) => {
                // HF silently drops unknown ids; report them instead.
                if let Some(&id) = ids.iter().find(|&&id| hf.id_to_token(id).is_none()) {
                    return Err(unknown(id));
                }
                hf.decode(ids, false).map_err(|e| TokenizerError::Decode {
                    tokenizer: self.name.clone(),
                    reason: e.to_string(),
                })
            }
        }
    }

    /// An upper bound on the bytes [`Tokenizer::decode`] returns for `ids`, found without
    /// decoding, so a caller can refuse a huge text before it is built. Exact for the
    /// tiktoken encodings; for Hugging Face, the length of each token's string plus one
    /// (a decoder turns a token's string into at most as many bytes, plus a separator).
    pub fn decoded_len_bound(&self, ids: &[u32]) -> u64 {
        match &self.backend {
            Backend::Tiktoken { table, .. } => ids
                .iter()
                .map(|&id| table.get(id).map_or(0, |b| b.len() as u64))
                .sum(),
            Backend::Hf(hf) => ids
                .iter()
                .map(|&id| hf.id_to_token(id).map_or(0, |t| t.len() as u64 + 1))
                .sum(),
        }
    }

    /// One past the highest valid token id, special tokens included (200019 for
    /// o200k_base, 100277 for cl100k_base, like Python tiktoken's `n_vocab`).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Text that encodes to exactly `n` tokens, made of ordinary lowercase words drawn with
    /// `rng` (the same rng state gives the same text). `n = 0` gives `""`.
    ///
    /// Exactness is verified by re-encoding. If the tokenizer has no usable word tokens,
    /// the text is made of random tokens instead. On a tokenizer where no text has exactly
    /// `n` tokens (none of the bundled or fixture tokenizers), the closest text found is
    /// returned, preferring fewer tokens over more.
    pub fn synthetic_text(&self, n: usize, rng: &mut dyn RngCore) -> String {
        if n == 0 {
            return String::new();
        }
        let pools = &self.pools;
        if pools.words.is_empty() {
            return self.random_token_text(n, rng);
        }
        let mut text = String::with_capacity(n * 7);
        let mut k = n;
        if !pools.heads.is_empty() {
            let h = pools.heads[pick(rng, pools.heads.len())] as usize;
            text.push_str(&pools.words[h]);
            k -= 1;
        }
        push_words(&pools.words, k, rng, &mut text);
        self.fit(n, text, rng, &mut |rng, m, text| {
            push_words(&pools.words, m, rng, text)
        })
    }

    /// Decoded text of `n` random token ids drawn with `rng`, re-encoded and adjusted to
    /// exactly `n` tokens (vLLM's "random" dataset). Ids are drawn from ordinary tokens
    /// whose text alone is printable UTF-8, so the prompt holds no special tokens.
    pub fn random_token_text(&self, n: usize, rng: &mut dyn RngCore) -> String {
        if n == 0 {
            return String::new();
        }
        let mut text = String::with_capacity(n * 5);
        self.push_random_tokens(n, rng, &mut text);
        self.fit(n, text, rng, &mut |rng, m, text| {
            self.push_random_tokens(m, rng, text)
        })
    }

    /// Adjusts `text` to exactly `n` tokens: encode; if long, truncate the ids to `n` and
    /// decode; if short, append `filler` for the missing count; repeat. Bounded by
    /// [`MAX_FIT_ROUNDS`]; returns the closest text seen (fewer tokens win ties).
    fn fit(
        &self,
        n: usize,
        mut text: String,
        rng: &mut dyn RngCore,
        filler: &mut dyn FnMut(&mut dyn RngCore, usize, &mut String),
    ) -> String {
        let mut best: Option<(usize, bool, String)> = None;
        for _ in 0..MAX_FIT_ROUNDS {
            let ids = self.encode(&text);
            let c = ids.len();
            if c == n {
                return text;
            }
            let key = (c.abs_diff(n), c > n);
            let better = best.as_ref().is_none_or(|(d, over, _)| key < (*d, *over));
            let next = if c > n {
                // Truncating ids keeps the prefix exact for well-behaved tokenizers; the
                // decode may still merge or split at the cut, hence the next round.
                self.decode(&ids[..n]).unwrap_or_default()
            } else {
                let mut t = text.clone();
                filler(rng, n - c, &mut t);
                t
            };
            if better {
                best = Some((key.0, key.1, std::mem::replace(&mut text, next)));
            } else {
                text = next;
            }
        }
        // The text from the last round has not been counted yet.
        let c = self.count(&text);
        match best {
            Some((d, over, b)) if (d, over) <= (c.abs_diff(n), c > n) => b,
            _ => text,
        }
    }

    fn push_random_tokens(&self, m: usize, rng: &mut dyn RngCore, text: &mut String) {
        let clean = &self.pools.clean;
        if clean.is_empty() {
            // No printable single tokens at all: fall back to ASCII letters.
            for _ in 0..m {
                text.push(' ');
                text.push(char::from(b'a' + pick(rng, 26) as u8));
            }
            return;
        }
        let ids: Vec<u32> = (0..m).map(|_| clean[pick(rng, clean.len())]).collect();
        text.push_str(&self.decode(&ids).unwrap_or_default());
    }

    /// Text of one token on its own, if it is ordinary (not special) and valid UTF-8.
    fn token_text(&self, id: u32) -> Option<Cow<'_, str>> {
        match &self.backend {
            Backend::Tiktoken { table, .. } => {
                if table.special.get(id as usize).copied().unwrap_or(true) {
                    return None;
                }
                std::str::from_utf8(table.get(id)?).ok().map(Cow::Borrowed)
            }
            Backend::Hf(hf) => hf.decode(&[id], false).ok().map(Cow::Owned),
        }
    }

    fn build_pools(&self) -> Pools {
        let added: Vec<u32> = match &self.backend {
            // Added tokens (BOS, chat markers, ...) are matched in text by HF: keep them
            // out of both pools.
            Backend::Hf(hf) => {
                let mut v: Vec<u32> = hf.get_added_tokens_decoder().into_keys().collect();
                v.sort_unstable();
                v
            }
            Backend::Tiktoken { .. } => Vec::new(),
        };
        let mut pools = Pools::empty();
        let mut word_ids: Vec<(u32, Box<str>)> = Vec::new();
        for id in 0..self.vocab_size as u32 {
            if added.binary_search(&id).is_ok() {
                continue;
            }
            let Some(text) = self.token_text(id) else {
                continue;
            };
            if text.is_empty()
                || text
                    .chars()
                    .any(|c| c == '\u{fffd}' || (c.is_control() && c != '\n' && c != '\t'))
            {
                continue;
            }
            pools.clean.push(id);
            let letters = text.strip_prefix(' ').unwrap_or(&text);
            if WORD_LETTERS.contains(&letters.len())
                && letters.bytes().all(|b| b.is_ascii_lowercase())
            {
                word_ids.push((id, letters.into()));
            }
        }
        // Keep a word only if " word" is that very token; several ids may share letters
        // (e.g. "▁foo" and "foo"), and the check keeps the one used in running text.
        let single = |text: &str| self.encode(text).len() == 1;
        let mut verified: Vec<(Box<str>, bool, bool)> = Vec::new();
        for (id, letters) in word_ids {
            if self.encode(&format!(" {letters}")) != [id] {
                continue;
            }
            let head = single(&letters);
            let mut capital = letters.to_string();
            capital[..1].make_ascii_uppercase();
            // Fragments ("oot", "liwat") rarely have capitalised forms in the vocabulary;
            // real words do.
            let common =
                head && letters.len() >= 3 && single(&capital) && single(&format!(" {capital}"));
            verified.push((letters, head, common));
        }
        if verified.iter().filter(|w| w.2).count() >= MIN_COMMON_WORDS {
            verified.retain(|w| w.2);
        }
        for (letters, head, _) in verified {
            if head {
                pools.heads.push(pools.words.len() as u32);
            }
            pools.words.push(letters);
        }
        pools
    }
}

impl Pools {
    fn empty() -> Pools {
        Pools {
            words: Vec::new(),
            heads: Vec::new(),
            clean: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .field("vocab_size", &self.vocab_size)
            .field("word_pool", &self.pools.words.len())
            .finish_non_exhaustive()
    }
}

/// Uniform index below `len` (> 0). Sampled as u32 so the stream of values is the same on
/// 32- and 64-bit platforms.
fn pick(rng: &mut dyn RngCore, len: usize) -> usize {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    rng.random_range(0..len) as usize
}

fn push_words(words: &[Box<str>], m: usize, rng: &mut dyn RngCore, text: &mut String) {
    for _ in 0..m {
        text.push(' ');
        text.push_str(&words[pick(rng, words.len())]);
    }
}

/// Bytes of every id below the highest special id (ordinary ranks are dense below the
/// special ids in the bundled encodings).
fn build_table(bpe: &CoreBPE) -> TokenTable {
    let mut special_ids: Vec<u32> = bpe
        .special_tokens()
        .into_iter()
        .filter_map(|s| match bpe.encode_with_special_tokens(s).as_slice() {
            [id] => Some(*id),
            _ => None,
        })
        .collect();
    special_ids.sort_unstable();
    let bound = special_ids.last().map_or(0, |&m| m + 1);
    let mut table = TokenTable {
        bytes: Vec::with_capacity(bound as usize * 7),
        starts: Vec::with_capacity(bound as usize + 1),
        known: Vec::with_capacity(bound as usize),
        special: Vec::with_capacity(bound as usize),
    };
    table.starts.push(0);
    // `_decode_native_and_split` panics on an unknown id, so it only gets ids that
    // `decode` has shown to exist: whole chunks at once (ranks are dense, so nearly every
    // chunk passes), then one by one in a chunk that holds a gap.
    const CHUNK: u32 = 1024;
    for first in (0..bound).step_by(CHUNK as usize) {
        let ids: Vec<u32> = (first..bound.min(first + CHUNK)).collect();
        if all_known(bpe, ids.clone()) {
            for bytes in bpe._decode_native_and_split(ids) {
                table.push(Some(&bytes));
            }
        } else {
            for id in ids {
                let bytes = all_known(bpe, vec![id])
                    .then(|| bpe._decode_native_and_split(vec![id]).next())
                    .flatten();
                table.push(bytes.as_deref());
            }
        }
    }
    for &id in &special_ids {
        table.special[id as usize] = true;
    }
    table
}

/// Whether every id is in the encoding. tiktoken-rs hides which error `decode` hit; a
/// UTF-8 error (a token holding part of a character) still means all ids exist.
fn all_known(bpe: &CoreBPE, ids: Vec<u32>) -> bool {
    match bpe.decode(ids) {
        Ok(_) => true,
        Err(e) => e
            .to_string()
            .starts_with("Unable to decode into a valid UTF-8"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::sync::{Arc, OnceLock};
    use std::time::Instant;

    fn fixture(name: &str) -> String {
        format!(
            "{}/../tests/fixtures/tokenizer/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    // Building a tiktoken encoding takes a while; share one per built-in across tests.
    // Built fresh (no cache entry): cache.rs's tests compare cached loads with these.
    pub(super) fn o200k() -> &'static Tokenizer {
        static T: OnceLock<Tokenizer> = OnceLock::new();
        T.get_or_init(|| Tokenizer::load_builtin(Builtin::O200k, None).unwrap())
    }
    pub(super) fn cl100k() -> &'static Tokenizer {
        static T: OnceLock<Tokenizer> = OnceLock::new();
        T.get_or_init(|| Tokenizer::load_builtin(Builtin::Cl100k, None).unwrap())
    }
    fn hf(name: &str) -> Tokenizer {
        Tokenizer::load(&fixture(name)).unwrap()
    }

    const HF_FIXTURES: &[&str] = &[
        "bytelevel_bpe.json",
        "metaspace_bpe.json",
        "wordlevel.json",
        "bytes_only.json",
    ];

    /// The n values every tokenizer must hit exactly.
    fn targets(max_random: usize) -> Vec<usize> {
        let mut ns = vec![0, 1, 2, 3, 7, 100, 1000, 32000];
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        ns.extend((0..200).map(|_| rng.random_range(0..=max_random)));
        ns
    }

    fn assert_synthetic_exact(tok: &Tokenizer, max_random: usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in targets(max_random) {
            let text = tok.synthetic_text(n, &mut rng);
            assert_eq!(tok.count(&text), n, "{}: synthetic_text({n})", tok.name());
        }
    }

    fn assert_random_exact(tok: &Tokenizer, max_random: usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        for n in targets(max_random) {
            let text = tok.random_token_text(n, &mut rng);
            assert_eq!(
                tok.count(&text),
                n,
                "{}: random_token_text({n})",
                tok.name()
            );
        }
    }

    #[test]
    fn tokenizer_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tokenizer>();
        check::<Arc<Tokenizer>>();
    }

    #[test]
    fn builtins_load_with_names_and_vocab_sizes() {
        assert_eq!(o200k().name(), "o200k_base");
        assert_eq!(o200k().vocab_size(), 200_019);
        assert_eq!(cl100k().name(), "cl100k_base");
        assert_eq!(cl100k().vocab_size(), 100_277);
        assert_eq!(DEFAULT_TOKENIZER, BUILTIN_TOKENIZERS[0]);
    }

    #[test]
    fn tiktoken_table_holds_every_rank() {
        // Guards the error-message check in build_table: every ordinary rank plus the
        // special tokens must be decodable.
        for (tok, expected) in [(o200k(), 199_998 + 2), (cl100k(), 100_256 + 5)] {
            let Backend::Tiktoken { table, .. } = &tok.backend else {
                unreachable!()
            };
            assert_eq!(table.known.iter().filter(|k| **k).count(), expected);
        }
    }

    #[test]
    fn encode_matches_reference_ids_and_adds_no_bos() {
        assert_eq!(o200k().encode("hello world"), vec![24912, 2375]);
        assert_eq!(cl100k().encode("hello world"), vec![15339, 1917]);
        assert_eq!(o200k().count(""), 0);
        // Special-token text is ordinary text for counting.
        assert!(o200k().count("<|endoftext|>") > 1);
        let meta = hf("metaspace_bpe.json");
        let ids = meta.encode("the train");
        assert!(!ids.is_empty());
        let Backend::Hf(inner) = &meta.backend else {
            unreachable!()
        };
        let bos = inner.token_to_id("<s>").unwrap();
        assert!(!ids.contains(&bos), "no BOS expected: {ids:?}");
    }

    #[test]
    fn decode_roundtrips_and_reports_bad_ids() {
        let text = "Benchmarks ask precise questions. Ünïcödé 你好 🚀";
        for tok in [o200k(), cl100k()] {
            assert_eq!(tok.decode(&tok.encode(text)).unwrap(), text);
            let err = tok.decode(&[1, tok.vocab_size() as u32]).unwrap_err();
            assert!(matches!(err, TokenizerError::Decode { .. }));
            assert!(err.to_string().contains(tok.name()), "{err}");
        }
        // A split character decodes lossily instead of failing.
        let ids = o200k().encode("🚀");
        assert!(ids.len() > 1, "{ids:?}");
        assert!(o200k().decode(&ids[..1]).unwrap().contains('\u{fffd}'));
        for name in HF_FIXTURES {
            let tok = hf(name);
            let plain = "the train left the station";
            assert_eq!(tok.decode(&tok.encode(plain)).unwrap(), plain, "{name}");
            assert!(tok.decode(&[tok.vocab_size() as u32]).is_err());
        }
    }

    #[test]
    fn load_errors_are_clear() {
        let err = Tokenizer::load("gpt9_base").unwrap_err();
        assert!(matches!(err, TokenizerError::UnknownName { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("gpt9_base") && msg.contains("o200k_base") && msg.contains("cl100k_base")
        );

        let err = Tokenizer::load("/nonexistent/tokenizer.json").unwrap_err();
        assert!(matches!(err, TokenizerError::NotFound { .. }));
        assert!(err.to_string().contains("/nonexistent/tokenizer.json"));

        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("tokenizer.json");
        std::fs::write(&bad, "{\"not\": \"a tokenizer\"}").unwrap();
        let err = Tokenizer::load(bad.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, TokenizerError::InvalidFile { .. }));
        assert!(err.to_string().contains(bad.to_str().unwrap()), "{err}");

        // A directory holding no tokenizer.json names the file it looked for.
        let empty = tempfile::tempdir().unwrap();
        let err = Tokenizer::load(empty.path().to_str().unwrap()).unwrap_err();
        assert!(matches!(err, TokenizerError::NotFound { .. }), "{err}");
    }

    #[test]
    fn hf_loads_from_directory_and_ignores_truncation_in_file() {
        let dir = tempfile::tempdir().unwrap();
        let json = std::fs::read_to_string(fixture("bytelevel_bpe.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["truncation"] = serde_json::json!({
            "direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0
        });
        std::fs::write(dir.path().join("tokenizer.json"), v.to_string()).unwrap();
        let tok = Tokenizer::load(dir.path().to_str().unwrap()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let text = tok.synthetic_text(50, &mut rng);
        assert_eq!(tok.count(&text), 50);
    }

    #[test]
    fn synthetic_text_exact_o200k() {
        assert_synthetic_exact(o200k(), 40_000);
    }

    #[test]
    fn synthetic_text_exact_cl100k() {
        assert_synthetic_exact(cl100k(), 40_000);
    }

    #[test]
    fn synthetic_text_exact_hf_fixtures() {
        for name in HF_FIXTURES {
            let tok = hf(name);
            assert_synthetic_exact(&tok, 5_000);
        }
    }

    #[test]
    fn random_token_text_exact_builtins() {
        assert_random_exact(o200k(), 5_000);
        assert_random_exact(cl100k(), 5_000);
    }

    #[test]
    fn random_token_text_exact_hf_fixtures() {
        for name in HF_FIXTURES {
            assert_random_exact(&hf(name), 5_000);
        }
    }

    #[test]
    fn word_pools_are_found_where_expected() {
        for tok in [o200k(), cl100k()] {
            // The "common" tier: every word can also start the text.
            assert!(tok.pools.words.len() > 2_000, "{tok:?}");
            assert_eq!(tok.pools.heads.len(), tok.pools.words.len(), "{tok:?}");
        }
        for name in ["bytelevel_bpe.json", "metaspace_bpe.json", "wordlevel.json"] {
            let tok = hf(name);
            assert!(tok.pools.words.len() > 50, "{tok:?}");
        }
        // Only single bytes: no word tokens, synthetic text falls back to random tokens.
        assert!(hf("bytes_only.json").pools.words.is_empty());
    }

    #[test]
    fn synthetic_text_is_plain_words() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for tok in [o200k(), cl100k(), &hf("metaspace_bpe.json")] {
            let text = tok.synthetic_text(500, &mut rng);
            assert!(!text.starts_with(' '), "{}", tok.name());
            assert!(text.bytes().all(|b| b == b' ' || b.is_ascii_lowercase()));
            assert_eq!(text.split(' ').count(), 500, "{}", tok.name());
        }
    }

    #[test]
    fn same_seed_same_text() {
        for tok in [o200k(), &hf("bytelevel_bpe.json"), &hf("bytes_only.json")] {
            let make = |seed| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                (
                    tok.synthetic_text(300, &mut rng),
                    tok.random_token_text(300, &mut rng),
                )
            };
            assert_eq!(make(11), make(11), "{}", tok.name());
            assert_ne!(make(11), make(12), "{}", tok.name());
        }
        // A fresh load picks the same pools: the text does not depend on load order.
        let again = Tokenizer::load_builtin(Builtin::O200k, None).unwrap();
        let mut a = ChaCha8Rng::seed_from_u64(5);
        let mut b = ChaCha8Rng::seed_from_u64(5);
        assert_eq!(
            again.synthetic_text(200, &mut a),
            o200k().synthetic_text(200, &mut b)
        );
    }

    #[test]
    fn golden_text_is_stable() {
        // Pins the exact stream: a change here changes every bundled workload.
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let text = o200k().synthetic_text(8, &mut rng);
        assert_eq!(text, GOLDEN_O200K_8);
    }
    const GOLDEN_O200K_8: &str = "stop axios sob jac herr kap blood wal";

    #[test]
    fn impossible_target_returns_closest_without_hanging() {
        // Every text normalises to nothing, so no text has 50 tokens.
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": {"type": "Replace", "pattern": {"Regex": "[\\s\\S]"}, "content": ""},
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1}, "unk_token": "[UNK]"}
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("void.json");
        std::fs::write(&path, json.to_string()).unwrap();
        let tok = Tokenizer::load(path.to_str().unwrap()).unwrap();
        assert_eq!(tok.count("hello world"), 0);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        assert_eq!(tok.count(&tok.synthetic_text(50, &mut rng)), 0);
        assert_eq!(tok.count(&tok.random_token_text(50, &mut rng)), 0);
    }

    #[test]
    fn shared_across_threads() {
        let tok = Arc::new(hf("bytelevel_bpe.json"));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let tok = Arc::clone(&tok);
                std::thread::spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(i);
                    let text = tok.synthetic_text(1000 + i as usize, &mut rng);
                    tok.count(&text)
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), 1000 + i);
        }
    }

    /// A single long "word" through each Hugging Face fixture: their BPE merges with a
    /// heap and their pre-tokenizers split in linear time, so this stays far from the
    /// bound (a quadratic merge would not).
    #[test]
    fn hf_long_words_count_in_bounded_time() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let ascii: String = (0..1_000_000)
            .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
            .collect();
        let accents: String = (0..300_000)
            .map(|_| ['é', 'à', 'ü', 'ß'][rng.random_range(0..4)])
            .collect();
        for name in HF_FIXTURES {
            let tok = hf(name);
            for (what, word) in [("ascii", &ascii), ("accented", &accents)] {
                let start = Instant::now();
                let n = tok.count(word);
                let took = start.elapsed();
                eprintln!(
                    "{name}: {} byte {what} word: {n} tokens in {took:?}",
                    word.len()
                );
                assert!(
                    took < std::time::Duration::from_secs(30),
                    "{name}: {took:?}"
                );
            }
        }
    }

    /// Speed figures; run with
    /// `cargo test -p runner --lib --release tokenizer::tests::timings -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timings() {
        for name in BUILTIN_TOKENIZERS {
            let t = Instant::now();
            let tok = Tokenizer::load(name).unwrap();
            let load = t.elapsed();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            tok.synthetic_text(32_000, &mut rng); // warm-up
            let t = Instant::now();
            let texts: Vec<String> = (0..100)
                .map(|_| tok.synthetic_text(32_000, &mut rng))
                .collect();
            let synth = t.elapsed() / 100;
            let t = Instant::now();
            for text in &texts {
                assert_eq!(tok.count(text), 32_000);
            }
            let count = t.elapsed() / 100;
            let t = Instant::now();
            tok.random_token_text(32_000, &mut rng);
            let random = t.elapsed();
            eprintln!(
                "{name}: load {load:?} ({} words), synthetic_text(32000) {synth:?}, count(32k) {count:?}, random_token_text(32000) {random:?}",
                tok.pools.words.len()
            );
        }
        for name in HF_FIXTURES {
            let t = Instant::now();
            let tok = hf(name);
            let load = t.elapsed();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let t = Instant::now();
            let text = tok.synthetic_text(32_000, &mut rng);
            let synth = t.elapsed();
            let t = Instant::now();
            tok.count(&text);
            eprintln!(
                "{name}: load {load:?}, synthetic_text(32000) {synth:?}, count(32k) {:?}",
                t.elapsed()
            );
        }
    }

    /// Regenerates the HF fixtures from corpus.txt; run with
    /// `cargo test -p runner --lib tokenizer::tests::generate_fixtures -- --ignored`.
    #[test]
    #[ignore]
    fn generate_fixtures() {
        use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
        use tokenizers::decoders::metaspace::Metaspace as MetaspaceDecoder;
        use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
        use tokenizers::models::wordlevel::{WordLevel, WordLevelTrainer};
        use tokenizers::models::TrainerWrapper;
        use tokenizers::normalizers::Lowercase;
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;
        use tokenizers::pre_tokenizers::metaspace::Metaspace;
        use tokenizers::pre_tokenizers::whitespace::Whitespace;
        use tokenizers::processors::template::TemplateProcessing;
        use tokenizers::AddedToken;

        let corpus = std::fs::read_to_string(fixture("corpus.txt")).unwrap();
        let lines: Vec<&str> = corpus.lines().collect();
        let special = |names: &[&str]| -> Vec<AddedToken> {
            names
                .iter()
                .map(|s| AddedToken::from(s.to_string(), true))
                .collect()
        };
        let byte_alphabet = || ByteLevel::alphabet().into_iter().collect();
        let save =
            |tok: &tokenizers::Tokenizer, name: &str| tok.save(fixture(name), false).unwrap();

        // GPT-2 style: byte-level BPE.
        for (name, vocab) in [("bytelevel_bpe.json", 1200), ("bytes_only.json", 0)] {
            let mut tok = tokenizers::Tokenizer::new(BPE::default());
            tok.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
            tok.with_decoder(Some(ByteLevelDecoder::default()));
            let mut trainer = TrainerWrapper::BpeTrainer(
                BpeTrainerBuilder::new()
                    .show_progress(false)
                    .vocab_size(vocab)
                    .min_frequency(1)
                    .initial_alphabet(byte_alphabet())
                    .special_tokens(special(&["<|endoftext|>"]))
                    .build(),
            );
            tok.train(&mut trainer, lines.iter()).unwrap();
            save(&tok, name);
        }

        // Llama-2 / SentencePiece style: Metaspace BPE with <unk> and a BOS template.
        let mut tok =
            tokenizers::Tokenizer::new(BPE::builder().unk_token("<unk>".into()).build().unwrap());
        tok.with_pre_tokenizer(Some(Metaspace::default()));
        tok.with_decoder(Some(MetaspaceDecoder::default()));
        let mut trainer = TrainerWrapper::BpeTrainer(
            BpeTrainerBuilder::new()
                .show_progress(false)
                .vocab_size(800)
                .min_frequency(1)
                .special_tokens(special(&["<unk>", "<s>", "</s>"]))
                .build(),
        );
        tok.train(&mut trainer, lines.iter()).unwrap();
        let bos = tok.token_to_id("<s>").unwrap();
        tok.with_post_processor(Some(
            TemplateProcessing::builder()
                .try_single("<s> $A")
                .unwrap()
                .special_tokens(vec![("<s>", bos)])
                .build()
                .unwrap(),
        ));
        save(&tok, "metaspace_bpe.json");

        // Whole words split on whitespace, lowercased, no decoder.
        let mut tok = tokenizers::Tokenizer::new(
            WordLevel::builder()
                .unk_token("[UNK]".into())
                .build()
                .unwrap(),
        );
        tok.with_normalizer(Some(Lowercase));
        tok.with_pre_tokenizer(Some(Whitespace {}));
        let mut trainer = TrainerWrapper::WordLevelTrainer(
            WordLevelTrainer::builder()
                .show_progress(false)
                .special_tokens(special(&["[UNK]"]))
                .build()
                .unwrap(),
        );
        tok.train(&mut trainer, lines.iter()).unwrap();
        save(&tok, "wordlevel.json");
    }
}
