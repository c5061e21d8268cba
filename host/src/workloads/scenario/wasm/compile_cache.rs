//! Compiled components kept on disk, so a large component starts fast the second time: a
//! componentize-py component carries a Python interpreter (18 MB of Wasm) and Cranelift
//! takes seconds to compile it, in `runner info` as in a run.
//!
//! An entry is wasmtime's own serialized form (`Component::serialize`), read back with
//! `Component::deserialize`. We keep the files ourselves rather than turning on wasmtime's
//! `cache` feature: that feature brings a C build of zstd and a TOML configuration file
//! of its own, and trusts whatever its directory holds; here every entry carries a digest
//! that is checked before wasmtime sees a byte, and the code is all in this file.
//!
//! Where: `$RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/runner`, else `~/.cache/runner`;
//! entries live under `compiled/ENGINE/SHA256.cwasm`. `ENGINE` is a digest of the
//! runner's version and wasmtime's `Engine::precompile_compatibility_hash` (wasmtime's
//! version and every compiler setting), and `SHA256` that of the component's bytes, so
//! an entry is only ever found by the engine that can run it.
//!
//! Sharing and deleting: an entry is written to a temporary file in its directory and
//! renamed into place, so a reader sees a whole entry or none; processes racing on one
//! component each write a whole entry and the last rename wins. A reader reads the entry
//! into memory before using it, so deleting the directory at any time costs only a
//! recompile. Entries unused for 30 days are removed when a new one is written.
//!
//! Why deserializing is sound: `Component::deserialize` trusts its input to be code that
//! wasmtime produced for this engine (it would run it). We only read entries (1) from a
//! directory owned by the current user and writable by no one else, so only this user's
//! processes can have put them there, (2) that start with our own header naming the
//! component's digest, and (3) whose payload hashes to the digest the header records, so
//! a truncated, corrupted or renamed file is refused; wasmtime then checks its own
//! header (version and engine settings) again. Anything refused is recompiled and
//! overwritten, never an error.

use std::fs::{DirBuilder, File};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::workloads::cache_dir::root;

/// What every entry starts with, before the component's digest and the payload's.
const MAGIC: &[u8; 16] = b"runner-cwasm-v1\n";
const HEADER_BYTES: usize = MAGIC.len() + 32 + 32;

/// Entries unused this long are removed when a new one is written.
const UNUSED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
/// Temporary files of a writer that died are removed after this long.
const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Why an entry was not used or could not be kept. The run goes on either way.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{path} is owned by another user or writable by others")]
    Unsafe { path: String },
    #[error("the entry is not one this runner wrote")]
    Foreign,
    #[error("the entry is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the entry's contents do not match its recorded digest")]
    Corrupt,
    #[error("wasmtime refused the entry: {0}")]
    Refused(String),
}

/// The component for these bytes: from the cache when it holds a sound entry for them,
/// else compiled (and then stored). Cache trouble never fails the run; only compiling can.
pub fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Component> {
    let Some((cache, explicit)) = Cache::locate(engine) else {
        return Component::new(engine, wasm);
    };
    let component_digest: [u8; 32] = Sha256::digest(wasm).into();
    let path = cache.entry(&component_digest);
    if let Ok(component) = cache.load(engine, &path, &component_digest, wasm.len()) {
        return Ok(component);
    }
    let component = Component::new(engine, wasm)?;
    let stored = component
        .serialize()
        .map_err(|e| CacheError::Refused(e.to_string()))
        .and_then(|bytes| cache.store(&path, &component_digest, &bytes));
    match stored {
        Ok(()) => cache.prune(),
        // The default location stays quiet (a read-only home is no reason for a line on
        // every run); a directory the user named gets told why it is not used.
        Err(e) if explicit => crate::errln!(
            "warning: cannot keep the compiled component in {}: {e}",
            cache.root.display()
        ),
        Err(_) => {}
    }
    Ok(component)
}

struct Cache {
    root: PathBuf,
    /// `compiled/ENGINE` under the root: the entries this engine can use.
    dir: PathBuf,
}

impl Cache {
    /// The cache for this engine, its directories made (private) when missing; `None`
    /// when there is no usable one (warned about if the user named it).
    fn locate(engine: &Engine) -> Option<(Cache, bool)> {
        let (root, explicit) = root()?;
        let cache = Cache {
            dir: root.join("compiled").join(engine_key(engine)),
            root,
        };
        match cache.prepare() {
            Ok(()) => Some((cache, explicit)),
            Err(e) => {
                if explicit {
                    crate::errln!(
                        "warning: not using the compile cache {}: {e}",
                        cache.root.display()
                    );
                }
                None
            }
        }
    }

    fn prepare(&self) -> Result<(), CacheError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        for dir in [&self.root, &self.root.join("compiled"), &self.dir] {
            check_private(dir)?;
        }
        Ok(())
    }

    fn entry(&self, component_digest: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}.cwasm", hex::encode(component_digest)))
    }

    /// Reads an entry and checks it before wasmtime does (see the module's notes).
    fn load(
        &self,
        engine: &Engine,
        path: &Path,
        component_digest: &[u8; 32],
        wasm_len: usize,
    ) -> Result<Component, CacheError> {
        let file = File::open(path)?;
        // Compiled code is a few times the size of the Wasm; far more is not ours.
        let limit = (wasm_len as u64).saturating_mul(32).max(256 << 20);
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(CacheError::TooLarge { limit });
        }
        let payload = checked_payload(&bytes, component_digest)?;
        // SAFETY: `payload` is `Component::serialize` output written by this runner: the
        // directory is private to this user (checked in `prepare`), the header names this
        // component, and the payload matches the digest recorded beside it. wasmtime checks
        // its own version and engine settings in it as well.
        let component = unsafe { Component::deserialize(engine, payload) }
            .map_err(|e| CacheError::Refused(e.to_string()))?;
        // The modification time says when an entry was last used, for `prune`.
        let _ = File::open(path).and_then(|f| f.set_modified(SystemTime::now()));
        Ok(component)
    }

    /// Writes an entry beside its final name and renames it into place.
    fn store(
        &self,
        path: &Path,
        component_digest: &[u8; 32],
        payload: &[u8],
    ) -> Result<(), CacheError> {
        let mut file = tempfile::Builder::new()
            .prefix(".writing-")
            .tempfile_in(&self.dir)?;
        file.write_all(MAGIC)?;
        file.write_all(component_digest)?;
        file.write_all(&Sha256::digest(payload))?;
        file.write_all(payload)?;
        // No fsync: an entry torn by a crash fails its digest check and is compiled again.
        file.persist(path).map_err(|e| CacheError::Io(e.error))?;
        Ok(())
    }

    /// Removes entries unused for 30 days (of any engine: older runners leave theirs) and
    /// temporary files a writer left behind, then engine directories left empty.
    fn prune(&self) {
        let now = SystemTime::now();
        let Ok(engines) = std::fs::read_dir(self.root.join("compiled")) else {
            return;
        };
        for engine_dir in engines.flatten().map(|e| e.path()) {
            let Ok(entries) = std::fs::read_dir(&engine_dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let limit = if name.to_string_lossy().starts_with(".writing-") {
                    ABANDONED_AFTER
                } else {
                    UNUSED_FOR
                };
                let age = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .map(|t| now.duration_since(t).unwrap_or_default());
                if age.is_ok_and(|a| a > limit) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
            // Fails unless empty, which is the point.
            let _ = std::fs::remove_dir(&engine_dir);
        }
    }
}

/// The directory's owner is this user and no one else may write to it: otherwise
/// another user could plant code that `Component::deserialize` would run.
fn check_private(dir: &Path) -> Result<(), CacheError> {
    let meta = std::fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(CacheError::Unsafe {
            path: dir.display().to_string(),
        });
    }
    Ok(())
}

/// The payload of an entry whose header names this component and whose payload matches
/// the digest the header records.
fn checked_payload<'a>(
    bytes: &'a [u8],
    component_digest: &[u8; 32],
) -> Result<&'a [u8], CacheError> {
    if bytes.len() < HEADER_BYTES
        || &bytes[..MAGIC.len()] != MAGIC
        || &bytes[MAGIC.len()..MAGIC.len() + 32] != component_digest
    {
        return Err(CacheError::Foreign);
    }
    let (recorded, payload) = bytes[MAGIC.len() + 32..].split_at(32);
    if Sha256::digest(payload).as_slice() != recorded {
        return Err(CacheError::Corrupt);
    }
    Ok(payload)
}

/// Names the engine an entry was compiled for: the runner's version and wasmtime's
/// compatibility hash (its version and every setting that changes the code it makes).
fn engine_key(engine: &Engine) -> String {
    use std::hash::Hash;
    let mut hasher = Sha256Hasher(Sha256::new());
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..8])
}

/// Feeds `Hash` input into sha256, so the key is the same in every build of this version
/// (std's `DefaultHasher` promises no stable output).
struct Sha256Hasher(Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(component_digest: &[u8; 32], payload: &[u8]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(component_digest);
        bytes.extend_from_slice(&Sha256::digest(payload));
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn an_entry_is_used_only_for_its_component_and_only_whole() {
        let digest = [7u8; 32];
        let bytes = entry(&digest, b"compiled code");
        assert_eq!(checked_payload(&bytes, &digest).unwrap(), b"compiled code");
        assert!(matches!(
            checked_payload(&bytes, &[8u8; 32]),
            Err(CacheError::Foreign)
        ));
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(
            checked_payload(&flipped, &digest),
            Err(CacheError::Corrupt)
        ));
        assert!(matches!(
            checked_payload(&bytes[..bytes.len() - 1], &digest),
            Err(CacheError::Corrupt)
        ));
        assert!(matches!(
            checked_payload(&bytes[..HEADER_BYTES - 1], &digest),
            Err(CacheError::Foreign)
        ));
    }

    #[test]
    fn a_directory_others_may_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert!(check_private(dir.path()).is_ok());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            check_private(dir.path()),
            Err(CacheError::Unsafe { .. })
        ));
    }

    #[test]
    fn the_engine_key_follows_the_engine_settings() {
        let plain = Engine::default();
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let epochs = Engine::new(&config).unwrap();
        assert_eq!(engine_key(&plain), engine_key(&Engine::default()));
        assert_ne!(engine_key(&plain), engine_key(&epochs));
    }
}
