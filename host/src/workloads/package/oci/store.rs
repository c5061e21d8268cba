//! Pulled packages on disk, under the cache root (cache_dir.rs) in `packages/`:
//! `sha256-PACKAGE.scenario.tar.gz` holds an archive by its package digest, and
//! `manifests/sha256-MANIFEST` the package digest a manifest digest was seen to carry,
//! so a reference pinned either way runs without the registry once pulled.
//!
//! Nothing here is trusted: an archive is opened through archive.rs, which recomputes its
//! digest, and the caller compares that with the pin; a file that fails is pulled again.
//! Files are written beside their final name and renamed into place, so a reader sees a
//! whole file or none, and deleting the directory costs only a pull.

use std::fs::DirBuilder;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::{digest_hex, digest_tag, OciError};

pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store under the cache root, made (private to this user) when missing.
    pub fn open() -> Result<Store, OciError> {
        let (root, _) = crate::workloads::cache_dir::root().ok_or_else(|| {
            OciError::Cache(format!(
                "no cache directory for pulled packages: set {} (or HOME)",
                crate::workloads::cache_dir::CACHE_DIR_ENV
            ))
        })?;
        let dir = root.join("packages");
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("manifests"))
            .map_err(|e| OciError::Cache(format!("cannot make {}: {e}", dir.display())))?;
        Ok(Store { dir })
    }

    /// Where the archive of this package digest is (or would be) kept.
    pub fn archive(&self, package_hex: &str) -> PathBuf {
        self.dir.join(format!(
            "{}{}",
            digest_tag(package_hex),
            super::super::ARCHIVE_SUFFIX
        ))
    }

    /// The archive of this package digest, if one is kept.
    pub fn cached(&self, package_hex: &str) -> Option<PathBuf> {
        Some(self.archive(package_hex)).filter(|p| p.is_file())
    }

    /// The package digest recorded for a manifest digest, if any.
    pub fn package_of_manifest(&self, manifest_hex: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.manifest_link(manifest_hex)).ok()?;
        digest_hex(text.trim()).map(str::to_string)
    }

    /// Records that a manifest digest carries a package digest.
    pub fn remember_manifest(&self, manifest_hex: &str, package_hex: &str) -> Result<(), OciError> {
        let link = self.manifest_link(manifest_hex);
        write_atomically(&link, format!("sha256:{package_hex}\n").as_bytes())
    }

    /// Keeps a pulled archive after checking it: its content must hash to its own stored
    /// digest (archive.rs) and that must be `package_hex`.
    pub fn keep(&self, package_hex: &str, bytes: &[u8]) -> Result<PathBuf, OciError> {
        let mut file = tempfile::Builder::new()
            .prefix(".pulling-")
            .tempfile_in(&self.dir)
            .map_err(|e| self.error(e))?;
        file.write_all(bytes).map_err(|e| self.error(e))?;
        let (_, actual) = crate::workloads::package::archive::read(file.path())
            .map_err(|e| OciError::Refused(format!("the pulled archive is refused: {e}")))?;
        if actual != package_hex {
            return Err(OciError::Refused(format!(
                "the pulled archive is package sha256:{actual}, not the expected sha256:{package_hex}"
            )));
        }
        file.as_file().sync_all().map_err(|e| self.error(e))?;
        let path = self.archive(package_hex);
        file.persist(&path).map_err(|e| self.error(e.error))?;
        Ok(path)
    }

    fn manifest_link(&self, manifest_hex: &str) -> PathBuf {
        self.dir.join("manifests").join(digest_tag(manifest_hex))
    }

    fn error(&self, e: impl std::fmt::Display) -> OciError {
        OciError::Cache(format!("cannot write to {}: {e}", self.dir.display()))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let error = |e: &dyn std::fmt::Display| {
        OciError::Cache(format!("cannot write {}: {e}", path.display()))
    };
    let mut file = tempfile::Builder::new()
        .prefix(".writing-")
        .tempfile_in(dir)
        .map_err(|e| error(&e))?;
    file.write_all(bytes).map_err(|e| error(&e))?;
    file.persist(path).map_err(|e| error(&e.error))?;
    Ok(())
}
