//! What loading a bundled tiktoken encoding derives (the token table and the word pools),
//! kept on disk so that a run skips tiktoken-rs's `CoreBPE` and the pool search.
//!
//! Where: `<cache root>/tokenizers/<name>-v1.bin` (cache_dir.rs picks the root). An entry
//! is a magic line, the format version, the encoding's name, the tiktoken-rs version, a
//! digest of the code that derives it (so a change to the pools or the encoder is never
//! answered from an older entry), the payload, and a SHA-256 of all that. Anything that
//! is not a whole, well-formed entry for this build is a miss: built again and rewritten.
//! Entries are written to a temporary file in the same directory and renamed into place,
//! so a reader sees a whole entry or none; racing writers each write a whole one.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Pools, TokenTable};
use crate::workloads::cache_dir::root;

/// What every entry starts with.
const MAGIC: &[u8] = b"runner-tokenizer-cache\n";

/// Bumped when the layout below changes; also in the file name.
const FORMAT_VERSION: u32 = 1;

/// The tiktoken-rs release whose vocabularies the entries hold (a test checks it against
/// Cargo.lock, so a dependency bump cannot reuse entries of the old one).
pub(super) const TIKTOKEN_RS_VERSION: &str = "0.7.0";

/// An o200k_base entry is about 4 MB; a file far larger is not ours and is not read.
const MAX_ENTRY_BYTES: u64 = 32 << 20;

const DIGEST_BYTES: usize = 32;

/// Why an entry was not used or not kept. The load goes on either way.
#[derive(Debug, thiserror::Error)]
pub(super) enum CacheError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the entry is larger than {MAX_ENTRY_BYTES} bytes")]
    TooLarge,
    #[error("the entry is not one this build wrote for this encoding")]
    Foreign,
    #[error("the entry's contents do not match its digest")]
    Corrupt,
    #[error("the entry is malformed: {0}")]
    Malformed(&'static str),
}

/// The entry's path for encoding `name` under the cache root, if there is a root.
pub(super) fn default_path(name: &str) -> Option<PathBuf> {
    let (root, _) = root()?;
    Some(
        root.join("tokenizers")
            .join(format!("{name}-v{FORMAT_VERSION}.bin")),
    )
}

/// The table and pools kept for `name` at `path`.
pub(super) fn read(path: &Path, name: &str) -> Result<(TokenTable, Pools), CacheError> {
    let file = std::fs::File::open(path)?;
    // Bounded before anything is allocated for it.
    if file.metadata()?.len() > MAX_ENTRY_BYTES {
        return Err(CacheError::TooLarge);
    }
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(CacheError::TooLarge);
    }
    parse(&bytes, name)
}

/// Keeps `table` and `pools` for `name` at `path`, replacing any entry there.
pub(super) fn write(
    path: &Path,
    name: &str,
    table: &TokenTable,
    pools: &Pools,
) -> Result<(), CacheError> {
    let bytes = serialize(name, table, pools)?;
    let dir = path
        .parent()
        .ok_or(CacheError::Malformed("the entry path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::Builder::new()
        .prefix(".writing-")
        .tempfile_in(dir)?;
    file.write_all(&bytes)?;
    // No fsync: an entry torn by a crash fails its digest and is built again.
    file.persist(path).map_err(|e| CacheError::Io(e.error))?;
    Ok(())
}

/// Everything before the payload: it names the format, the encoding, tiktoken-rs's
/// version and the deriving code, so an entry only matches the build that wrote it.
fn header(name: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for field in [name, TIKTOKEN_RS_VERSION] {
        out.extend_from_slice(&(field.len() as u32).to_le_bytes());
        out.extend_from_slice(field.as_bytes());
    }
    // The pools depend on this code (which tokens count as words, how text encodes), and
    // a code change rarely bumps a version: its source is part of the key.
    let code = Sha256::new()
        .chain_update(include_bytes!("mod.rs"))
        .chain_update(include_bytes!("fast_bpe.rs"))
        .chain_update(include_bytes!("ranks.rs"))
        .chain_update(include_bytes!("cache.rs"))
        .finalize();
    out.extend_from_slice(&code);
    out
}

/// The entry's bytes: header, payload (all integers little-endian u32), digest.
fn serialize(name: &str, table: &TokenTable, pools: &Pools) -> Result<Vec<u8>, CacheError> {
    let too_big = || CacheError::Malformed("a length does not fit in 32 bits");
    let len = |n: usize| u32::try_from(n).map_err(|_| too_big());
    let mut out = header(name);
    let put = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    put(&mut out, len(table.known.len())?);
    for &s in &table.starts {
        put(&mut out, s);
    }
    out.extend_from_slice(&table.bytes);
    out.extend(
        (table.known.iter().zip(&table.special)).map(|(&k, &s)| u8::from(k) | u8::from(s) << 1),
    );
    put(&mut out, len(pools.words.len())?);
    for w in &pools.words {
        out.push(u8::try_from(w.len()).map_err(|_| too_big())?);
    }
    for w in &pools.words {
        out.extend_from_slice(w.as_bytes());
    }
    for list in [&pools.heads, &pools.clean] {
        put(&mut out, len(list.len())?);
        for &v in list {
            put(&mut out, v);
        }
    }
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    Ok(out)
}

/// The table and pools of a whole entry for `name`, every length and index checked so
/// that no content can make the tokenizer panic later.
fn parse(bytes: &[u8], name: &str) -> Result<(TokenTable, Pools), CacheError> {
    let header = header(name);
    if bytes.len() < header.len() + DIGEST_BYTES || !bytes.starts_with(&header) {
        return Err(CacheError::Foreign);
    }
    let (body, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
    if Sha256::digest(body).as_slice() != digest {
        return Err(CacheError::Corrupt);
    }
    let mut r = Reader(&body[header.len()..]);
    let table = parse_table(&mut r)?;
    let pools = parse_pools(&mut r, table.known.len())?;
    if !r.0.is_empty() {
        return Err(CacheError::Malformed("bytes after the payload"));
    }
    Ok((table, pools))
}

fn parse_table(r: &mut Reader<'_>) -> Result<TokenTable, CacheError> {
    let ids = r.u32()? as usize;
    let starts = r.u32s(
        ids.checked_add(1)
            .ok_or(CacheError::Malformed("id count"))?,
    )?;
    if starts.first() != Some(&0) || starts.windows(2).any(|w| w[0] > w[1]) {
        return Err(CacheError::Malformed(
            "token offsets are not increasing from 0",
        ));
    }
    let total = starts.last().copied().unwrap_or(0) as usize;
    let bytes = r.take(total)?.to_vec();
    let flags = r.take(ids)?;
    if flags.iter().any(|&f| f > 3) {
        return Err(CacheError::Malformed("unknown token flags"));
    }
    Ok(TokenTable {
        bytes,
        starts,
        known: flags.iter().map(|&f| f & 1 != 0).collect(),
        special: flags.iter().map(|&f| f & 2 != 0).collect(),
    })
}

fn parse_pools(r: &mut Reader<'_>, ids: usize) -> Result<Pools, CacheError> {
    let n_words = r.u32()? as usize;
    let lengths = r.take(n_words)?;
    let mut words = Vec::with_capacity(n_words);
    for &n in lengths {
        let word = std::str::from_utf8(r.take(n as usize)?)
            .map_err(|_| CacheError::Malformed("a word is not UTF-8"))?;
        words.push(word.into());
    }
    let n = r.u32()? as usize;
    let heads = r.u32s(n)?;
    if heads.iter().any(|&h| h as usize >= n_words) {
        return Err(CacheError::Malformed("a head is not a word"));
    }
    let n = r.u32()? as usize;
    let clean = r.u32s(n)?;
    if clean.iter().any(|&id| id as usize >= ids) {
        return Err(CacheError::Malformed("a clean id is outside the table"));
    }
    Ok(Pools {
        words,
        heads,
        clean,
    })
}

/// Reads the payload front to back; every read is checked against what is left, so a
/// count in the file never allocates more than the file holds.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CacheError> {
        if n > self.0.len() {
            return Err(CacheError::Malformed("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, CacheError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, CacheError> {
        let bytes = n.checked_mul(4).ok_or(CacheError::Malformed("truncated"))?;
        Ok(self
            .take(bytes)?
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cl100k, o200k};
    use super::super::{Backend, Builtin, Tokenizer};
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn entry_in(dir: &Path, encoding: Builtin) -> PathBuf {
        dir.join("tokenizers")
            .join(format!("{}-v{FORMAT_VERSION}.bin", encoding.name()))
    }

    fn table(tok: &Tokenizer) -> &TokenTable {
        let Backend::Tiktoken { table, .. } = &tok.backend else {
            unreachable!()
        };
        table
    }

    /// Whether tiktoken-rs's encoder was built (a cached load must not need it).
    fn core_built(tok: &Tokenizer) -> bool {
        let Backend::Tiktoken { bpe, .. } = &tok.backend else {
            unreachable!()
        };
        bpe.cell.get().is_some()
    }

    fn assert_same(cached: &Tokenizer, fresh: &Tokenizer) {
        let name = fresh.name();
        assert_eq!(cached.name(), name);
        assert_eq!(cached.vocab_size(), fresh.vocab_size(), "{name}");
        let (a, b) = (table(cached), table(fresh));
        assert!(a.bytes == b.bytes && a.starts == b.starts, "{name}");
        assert!(a.known == b.known && a.special == b.special, "{name}");
        let (a, b) = (&cached.pools, &fresh.pools);
        assert!(a.words == b.words && a.heads == b.heads && a.clean == b.clean);
        let texts = [
            "hello world",
            "Benchmarks ask precise questions. Ünïcödé 你好 🚀",
            "<|endoftext|> fn main() { println!(\"x\"); }\r\n\t  42 1234567",
        ];
        for text in texts {
            let ids = fresh.encode(text);
            assert_eq!(cached.encode(text), ids, "{name}: {text:?}");
            assert_eq!(cached.count(text), fresh.count(text), "{name}");
            assert_eq!(cached.decode(&ids).unwrap(), fresh.decode(&ids).unwrap());
        }
        let (known, unknown): (Vec<u32>, Vec<u32>) =
            (0..fresh.vocab_size() as u32).partition(|&id| table(fresh).get(id).is_some());
        assert_eq!(
            cached.decode(&known).unwrap(),
            fresh.decode(&known).unwrap()
        );
        for id in unknown {
            assert!(cached.decode(&[id]).is_err(), "{name}: {id}");
        }
        for seed in 0..4 {
            let (mut x, mut y) = (
                ChaCha8Rng::seed_from_u64(seed),
                ChaCha8Rng::seed_from_u64(seed),
            );
            for n in [1, 8, 300, 4000] {
                let text = cached.synthetic_text(n, &mut x);
                assert_eq!(text, fresh.synthetic_text(n, &mut y), "{name}: {n}");
                assert_eq!(cached.count(&text), n);
                let text = cached.random_token_text(n, &mut x);
                assert_eq!(text, fresh.random_token_text(n, &mut y), "{name}: {n}");
            }
        }
    }

    #[test]
    fn a_cached_load_is_the_fresh_build() {
        let dir = tempfile::tempdir().unwrap();
        for (encoding, fresh) in [(Builtin::O200k, o200k()), (Builtin::Cl100k, cl100k())] {
            let path = entry_in(dir.path(), encoding);
            let first = Tokenizer::load_builtin(encoding, Some(&path)).unwrap();
            assert!(path.is_file(), "a miss writes the entry");
            assert_same(&first, fresh);
            let cached = Tokenizer::load_builtin(encoding, Some(&path)).unwrap();
            assert!(
                !core_built(&cached),
                "{}: a hit needs no CoreBPE",
                fresh.name()
            );
            assert_same(&cached, fresh);
            // The lazy fallback builds the same encoder on demand.
            let Backend::Tiktoken { bpe, .. } = &cached.backend else {
                unreachable!()
            };
            let text = "Ünïcödé 你好 and plain words";
            assert_eq!(bpe.get().unwrap().encode_ordinary(text), fresh.encode(text));
        }
    }

    #[test]
    fn a_bad_entry_is_a_miss_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = entry_in(dir.path(), Builtin::Cl100k);
        Tokenizer::load_builtin(Builtin::Cl100k, Some(&path)).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 1;
        let oversized = |p: &Path| {
            let f = std::fs::File::create(p).unwrap();
            f.set_len(MAX_ENTRY_BYTES + 1).unwrap();
        };
        type Spoil<'a> = &'a dyn Fn(&Path);
        let cases: [(&str, Spoil); 5] = [
            ("flipped", &|p| std::fs::write(p, &flipped).unwrap()),
            ("truncated", &|p| {
                std::fs::write(p, &good[..good.len() - 1]).unwrap()
            }),
            ("header only", &|p| std::fs::write(p, &good[..40]).unwrap()),
            ("empty", &|p| std::fs::write(p, b"").unwrap()),
            ("oversized", &oversized),
        ];
        for (what, spoil) in cases {
            spoil(&path);
            assert!(read(&path, "cl100k_base").is_err(), "{what}");
            let tok = Tokenizer::load_builtin(Builtin::Cl100k, Some(&path)).unwrap();
            assert_eq!(tok.encode("hello world"), vec![15339, 1917], "{what}");
            assert_eq!(std::fs::read(&path).unwrap(), good, "{what}: rewritten");
        }
        // Another encoding's entry under this name is not used either.
        assert!(matches!(
            read(&path, "o200k_base"),
            Err(CacheError::Foreign)
        ));
    }

    #[test]
    fn an_unwritable_cache_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be: no entry can be made under it.
        let blocker = dir.path().join("not-a-dir");
        std::fs::write(&blocker, b"x").unwrap();
        let path = entry_in(&blocker, Builtin::Cl100k);
        let tok = Tokenizer::load_builtin(Builtin::Cl100k, Some(&path)).unwrap();
        assert_eq!(tok.encode("hello world"), vec![15339, 1917]);
        assert!(!path.exists());
        assert!(write(&path, "cl100k_base", table(&tok), &tok.pools).is_err());
    }

    /// A small table and pools, and their entry.
    fn small() -> Vec<u8> {
        let mut table = TokenTable {
            bytes: Vec::new(),
            starts: vec![0],
            known: Vec::new(),
            special: Vec::new(),
        };
        for t in [&b"a"[..], b" the", b"\xe2\x82", b"<|x|>"] {
            table.push(Some(t));
        }
        table.push(None);
        table.special[3] = true;
        let pools = Pools {
            words: vec!["the".into(), "ab".into()],
            heads: vec![1],
            clean: vec![0, 1],
        };
        serialize("small", &table, &pools).unwrap()
    }

    /// `bytes` with its digest made right again, as a hostile writer would.
    fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
        let body = bytes.len() - DIGEST_BYTES;
        let digest = Sha256::digest(&bytes[..body]);
        bytes[body..].copy_from_slice(&digest);
        bytes
    }

    #[test]
    fn hostile_entries_are_refused_without_panicking() {
        let good = small();
        let (table, pools) = parse(&good, "small").unwrap();
        assert_eq!(table.get(1), Some(&b" the"[..]));
        assert_eq!(table.get(4), None);
        assert_eq!(pools.words.len(), 2);
        for cut in 0..good.len() {
            assert!(parse(&good[..cut], "small").is_err(), "cut at {cut}");
        }
        let at = header("small").len();
        // Each u32 of the payload set to a huge count or index, sealed with a valid digest.
        for offset in (at..good.len() - DIGEST_BYTES - 3).step_by(1) {
            for value in [u32::MAX, u32::MAX / 4 + 1, 1 << 24] {
                let mut bad = good.clone();
                bad[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
                let _ = parse(&resealed(bad), "small");
            }
        }
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&resealed(bad), "small").is_err(), "a huge id count");
    }

    #[test]
    fn the_tiktoken_version_is_the_locked_one() {
        let lock =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap();
        let locked = lock
            .split("[[package]]")
            .find(|p| p.contains("name = \"tiktoken-rs\""))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
            .unwrap();
        assert_eq!(locked.trim_matches('"'), TIKTOKEN_RS_VERSION);
    }
}
