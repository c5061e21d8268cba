//! The package archive: one reproducible `.scenario.tar.gz` holding the manifest, the
//! entry and the data files, and the digest that names its content.
//!
//! The digest is the sha256 of a canonical listing of the files — for each file, sorted
//! by path: `path`, its length and its own sha256 — so it depends on content only, not on
//! timestamps, compression or the order of the archive. It is stored in the archive as
//! `package.sha256` (left out of the listing) and checked whenever the archive is opened.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::manifest::{Manifest, MANIFEST};

/// The member holding the digest.
pub const DIGEST_MEMBER: &str = "package.sha256";
/// Refuse archives whose content would unpack to more than this (a zip bomb).
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// A package's files by relative path (with `/` separators).
pub type Files = BTreeMap<String, Vec<u8>>;

pub fn digest(files: &Files) -> String {
    let mut listing = Sha256::new();
    for (path, bytes) in files {
        listing.update(path.as_bytes());
        listing.update(b"\n");
        listing.update(bytes.len().to_string().as_bytes());
        listing.update(b"\n");
        listing.update(hex(&Sha256::digest(bytes)).as_bytes());
        listing.update(b"\n");
    }
    hex(&listing.finalize())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads the files a manifest lists from a package directory: the manifest, the entry
/// and every data file (directories are taken whole).
pub fn collect(dir: &Path, manifest: &Manifest) -> Result<Files, String> {
    let mut files = Files::new();
    let mut add = |rel: &str| -> Result<(), String> {
        let path = dir.join(rel);
        let meta = std::fs::metadata(&path)
            .map_err(|e| format!("{}: cannot read `{rel}`: {e}", dir.display()))?;
        if meta.is_dir() {
            add_dir(dir, &path, &mut files)
        } else {
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("{}: cannot read `{rel}`: {e}", dir.display()))?;
            files.insert(rel.replace('\\', "/"), bytes);
            Ok(())
        }
    };
    add(MANIFEST)?;
    add(&manifest.entry)?;
    for d in &manifest.data {
        add(d)?;
    }
    Ok(files)
}

fn add_dir(root: &Path, dir: &Path, files: &mut Files) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            add_dir(root, &path, files)?;
        } else {
            let rel = path
                .strip_prefix(root)
                .map_err(|_| format!("{} is outside the package", path.display()))?;
            let bytes =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            files.insert(rel.to_string_lossy().replace('\\', "/"), bytes);
        }
    }
    Ok(())
}

/// Writes the archive: members in path order with fixed metadata, so packing the same
/// files twice gives the same bytes.
pub fn write(out: &Path, files: &Files, digest: &str) -> Result<(), String> {
    let file =
        std::fs::File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let digest_line = format!("{digest}\n");
    let members = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .chain(std::iter::once((DIGEST_MEMBER, digest_line.as_bytes())));
    for (path, bytes) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    tar.into_inner()
        .and_then(|gz| gz.finish())
        .and_then(|mut f| f.flush())
        .map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Reads an archive into memory, refusing paths that leave the package, and checks the
/// stored digest against the content.
pub fn read(archive: &Path) -> Result<(Files, String), String> {
    let name = archive.display();
    let file = std::fs::File::open(archive).map_err(|e| format!("cannot open {name}: {e}"))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files = Files::new();
    let mut stored = None;
    let mut total = 0u64;
    let entries = tar
        .entries()
        .map_err(|e| format!("{name} is not a scenario archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("{name} is not a scenario archive: {e}"))?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).replace('\\', "/");
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(format!(
                "{name}: member `{path}` is a {}; a package holds regular files only",
                if kind.is_symlink() || kind.is_hard_link() {
                    "link"
                } else {
                    "special file"
                }
            ));
        }
        let safe = Path::new(&path)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !safe {
            return Err(format!(
                "{name}: member `{path}` would unpack outside the package"
            ));
        }
        total = total.saturating_add(entry.header().size().unwrap_or(u64::MAX));
        if total > MAX_UNPACKED_BYTES {
            return Err(format!(
                "{name}: member `{path}` takes the content past {} MiB; refusing to unpack it",
                MAX_UNPACKED_BYTES >> 20
            ));
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{name}: cannot read `{path}`: {e}"))?;
        if path == DIGEST_MEMBER {
            stored = Some(String::from_utf8_lossy(&bytes).trim().to_string());
        } else {
            files.insert(path, bytes);
        }
    }
    let Some(stored) = stored else {
        return Err(format!(
            "{name} has no {DIGEST_MEMBER}: not made by `runner pack`"
        ));
    };
    let actual = digest(&files);
    if actual != stored {
        return Err(format!(
            "{name}: the content does not match its digest (stored {stored}, content {actual}); the archive was modified or corrupted"
        ));
    }
    Ok((files, actual))
}

/// Writes files under `dir` (which exists and is empty).
pub fn unpack(files: &Files, dir: &Path) -> Result<(), String> {
    for (path, bytes) in files {
        let target: PathBuf = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot unpack into {}: {e}", dir.display()))?;
        }
        std::fs::write(&target, bytes)
            .map_err(|e| format!("cannot unpack into {}: {e}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        let mut f = Files::new();
        f.insert("scenario.toml".into(), b"name = \"x\"\n".to_vec());
        f.insert("x.rhai".into(), b"fn describe() {}\n".to_vec());
        f.insert("data/a.json".into(), b"[]".to_vec());
        f
    }

    #[test]
    fn packing_is_reproducible_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.tar.gz"), dir.path().join("b.tar.gz"));
        let d = digest(&files());
        write(&a, &files(), &d).unwrap();
        write(&b, &files(), &d).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let (back, digest_back) = read(&a).unwrap();
        assert_eq!(back, files());
        assert_eq!(digest_back, d);
    }

    #[test]
    fn the_digest_follows_content_only() {
        let mut other = files();
        other.insert("data/a.json".into(), b"[1]".to_vec());
        assert_ne!(digest(&files()), digest(&other));
        let mut renamed = files();
        let v = renamed.remove("data/a.json").unwrap();
        renamed.insert("data/b.json".into(), v);
        assert_ne!(digest(&files()), digest(&renamed));
    }

    #[test]
    fn a_modified_archive_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        let mut tampered = files();
        tampered.insert("x.rhai".into(), b"fn describe() { evil }\n".to_vec());
        // The digest of the original files, stored with other content.
        write(&a, &tampered, &digest(&files())).unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("does not match its digest"), "{e}");
    }
}
