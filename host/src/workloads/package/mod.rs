//! Scenario packages that teams share: a directory with a `scenario.toml` manifest, packed
//! by `runner pack` into one reproducible archive named by its content digest. A bare
//! `.rhai` or `.wasm` file keeps working without a manifest.

pub mod archive;
pub mod collect;
pub mod manifest;
pub mod oci;
pub mod unpacked;

use std::path::{Path, PathBuf};

use archive::Files;
pub use manifest::{Manifest, TargetHints, MANIFEST};
pub use unpacked::{remove_all as remove_unpacked, signals_handled_elsewhere};

use crate::safeguards::display::escape_control;
use crate::workloads::scenario::Description;

/// The environment variable holding the scenario search path (`:`-separated).
pub const SEARCH_PATH_ENV: &str = "RUNNER_SCENARIO_PATH";
/// The suffix `runner pack` gives archives.
pub const ARCHIVE_SUFFIX: &str = ".scenario.tar.gz";

/// An opened package: its manifest, where its files are, and its digest.
pub struct Package {
    pub manifest: Manifest,
    /// The directory holding the package's files (unpacked, for an archive).
    pub root: PathBuf,
    pub digest: String,
    /// What the user named: the archive or the directory.
    pub source: PathBuf,
    /// Keeps an unpacked archive alive for the run.
    _unpacked: Option<unpacked::UnpackDir>,
}

/// What a scenario argument names.
pub enum Resolved {
    /// A single .rhai or .wasm file.
    File(PathBuf),
    Package(Box<Package>),
}

impl Package {
    /// Opens a package directory (with a scenario.toml) or a `.scenario.tar.gz` archive.
    pub fn open(path: &Path) -> Result<Package, String> {
        if path.is_dir() {
            Package::open_dir(path).map(|(package, _)| package)
        } else {
            let (files, digest) = archive::read(path)?;
            let manifest = manifest_of(&files, path)?;
            if let Some(listed) = missing(&files, &manifest) {
                return Err(format!(
                    "{}: {MANIFEST} lists `{listed}`, which the archive does not hold",
                    path.display()
                ));
            }
            let dir = unpacked::UnpackDir::new()
                .map_err(|e| format!("cannot make a directory to unpack into: {e}"))?;
            dir.fill(&files)?;
            Ok(Package {
                manifest,
                root: dir.path().to_path_buf(),
                digest,
                source: path.to_path_buf(),
                _unpacked: Some(dir),
            })
        }
    }

    /// A package directory, with the files its manifest lists (read once, for the digest
    /// and, when packing, for the archive).
    fn open_dir(path: &Path) -> Result<(Package, Files), String> {
        let manifest = read_manifest(path)?;
        let files = collect::collect(path, &manifest)?;
        let package = Package {
            manifest,
            root: path.to_path_buf(),
            digest: archive::digest(&files),
            source: path.to_path_buf(),
            _unpacked: None,
        };
        Ok((package, files))
    }

    /// The scenario file to load.
    pub fn entry(&self) -> PathBuf {
        self.root.join(&self.manifest.entry)
    }

    /// The manifest's parameter defaults and help replace the scenario's own; a parameter
    /// the scenario does not declare, or of another type, is an error.
    pub fn apply_defaults(&self, d: &mut Description) -> Result<(), String> {
        for (name, p) in &self.manifest.params {
            let Some(spec) = d.params.iter_mut().find(|s| &s.name == name) else {
                return Err(format!(
                    "{MANIFEST} of {} sets parameter `{}`, which the scenario does not declare",
                    self.manifest.name,
                    escape_control(name)
                ));
            };
            let value = p.value()?;
            if std::mem::discriminant(&value) != std::mem::discriminant(&spec.default) {
                return Err(format!(
                    "{MANIFEST} of {} gives parameter `{name}` {} ({value}), but the scenario declares it as {}",
                    self.manifest.name,
                    value.type_name(),
                    spec.default.type_name()
                ));
            }
            spec.default = value;
            if let Some(help) = &p.help {
                spec.help = help.clone();
            }
        }
        Ok(())
    }
}

/// The first path the manifest lists (entry or data) that the files do not hold, escaped
/// for display.
fn missing(files: &Files, manifest: &Manifest) -> Option<String> {
    std::iter::once(&manifest.entry)
        .chain(&manifest.data)
        .map(|listed| manifest::canonical(listed))
        .find(|listed| !holds(files, listed))
        .map(|listed| escape_control(&listed).into_owned())
}

/// Whether the files hold `listed`, or files under it as a directory (one look-up in the
/// sorted map, not a scan per listed name).
fn holds(files: &Files, listed: &str) -> bool {
    let under = format!("{listed}/");
    files.contains_key(listed)
        || files
            .range(under.clone()..)
            .next()
            .is_some_and(|(f, _)| f.starts_with(&under))
}

fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let file = dir.join(MANIFEST);
    let meta = collect::regular_or_dir(dir, &file)?;
    if !meta.is_file() || meta.len() > manifest::MAX_MANIFEST_BYTES {
        return Err(format!(
            "{}: {MANIFEST} is not a file of at most {} KiB",
            dir.display(),
            manifest::MAX_MANIFEST_BYTES >> 10
        ));
    }
    let bytes = collect::read_regular(&file, meta.len())
        .map_err(|e| format!("{}: cannot read {MANIFEST}: {e}", dir.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{}: {MANIFEST} is not UTF-8", dir.display()))?;
    Manifest::parse(&text, &file.display().to_string())
}

fn manifest_of(files: &Files, archive: &Path) -> Result<Manifest, String> {
    let text = files
        .get(MANIFEST)
        .ok_or_else(|| format!("{} has no {MANIFEST}", archive.display()))?;
    if text.len() as u64 > manifest::MAX_MANIFEST_BYTES {
        return Err(format!(
            "{}: {MANIFEST} is larger than {} KiB",
            archive.display(),
            manifest::MAX_MANIFEST_BYTES >> 10
        ));
    }
    let text = std::str::from_utf8(text)
        .map_err(|_| format!("{}: {MANIFEST} is not UTF-8", archive.display()))?;
    Manifest::parse(text, &format!("{}:{MANIFEST}", archive.display()))
}

/// Packs a package directory into `out_dir`; returns the archive's path and digest.
pub fn pack(dir: &Path, out_dir: &Path) -> Result<(PathBuf, Package), String> {
    let (package, files) = Package::open_dir(dir)?;
    // The archive must open: a listed directory without files would not be in it.
    if let Some(listed) = missing(&files, &package.manifest) {
        return Err(format!(
            "{}: {MANIFEST} lists `{listed}`, which holds no files (an archive carries files, not empty directories)",
            dir.display()
        ));
    }
    let out = out_dir.join(package.manifest.archive_name());
    archive::write(&out, &files, &package.digest)?;
    Ok((out, package))
}

/// The search path: `--scenario-path` entries, then those of the environment variable.
pub fn search_path(flags: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = flags.to_vec();
    if let Some(v) = std::env::var_os(SEARCH_PATH_ENV) {
        dirs.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
    }
    dirs
}

/// What a scenario argument names: a file, a package directory or archive, a package in
/// an OCI registry (`oci://HOST/REPO:TAG` or `@sha256:DIGEST`, see oci/), or an installed
/// package found by name (`team-a/chat-mix`, optionally `@1.2.0`) in the search path, the
/// highest version winning.
pub fn resolve(arg: &Path, search: &[PathBuf], registry: &oci::Access) -> Result<Resolved, String> {
    if let Some(reference) = arg.to_str().filter(|t| t.starts_with(oci::SCHEME)) {
        return open_pulled(reference, registry).map(|p| Resolved::Package(Box::new(p)));
    }
    if arg.is_dir() {
        return Package::open(arg).map(|p| Resolved::Package(Box::new(p)));
    }
    if arg.is_file() {
        let name = arg.to_string_lossy();
        return if name.ends_with(ARCHIVE_SUFFIX) {
            Package::open(arg).map(|p| Resolved::Package(Box::new(p)))
        } else {
            Ok(Resolved::File(arg.to_path_buf()))
        };
    }
    if arg.exists() {
        return Err(format!(
            "{} is not a regular file (a FIFO or a device would block the run)",
            crate::safeguards::display::escape_control(&arg.display().to_string())
        ));
    }
    let text = arg.to_string_lossy();
    let looks_like_name = arg.extension().is_none() || text.contains('@');
    if !looks_like_name || search.is_empty() {
        return Err(format!("scenario file {} not found", arg.display()));
    }
    let (name, wanted) = match text.split_once('@') {
        Some((n, v)) => (n.to_string(), Some(v.to_string())),
        None => (text.to_string(), None),
    };
    let mut best: Option<(semver::Version, PathBuf)> = None;
    for dir in search {
        for (version, path) in candidates(dir, &name) {
            if wanted.as_ref().is_some_and(|w| *w != version.to_string()) {
                continue;
            }
            if best.as_ref().is_none_or(|(v, _)| version > *v) {
                best = Some((version, path));
            }
        }
    }
    match best {
        Some((_, path)) => Package::open(&path).map(|p| Resolved::Package(Box::new(p))),
        None => Err(format!(
            "no scenario package `{text}` in the scenario path ({}); pass --scenario-path DIR or set {SEARCH_PATH_ENV}",
            search
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(":")
        )),
    }
}

/// The package an `oci://` reference names, pulled (or found in the cache) and checked;
/// its `source` is the archive in the cache.
pub fn open_pulled(reference: &str, registry: &oci::Access) -> Result<Package, String> {
    let r = oci::OciRef::parse(reference).map_err(|e| e.to_string())?;
    let pulled = oci::pull(&r, registry).map_err(|e| e.to_string())?;
    let package = Package::open(&pulled.archive)?;
    if package.digest != pulled.package_hex {
        return Err(format!(
            "{r}: the archive is package sha256:{}, not sha256:{}; refusing it",
            package.digest, pulled.package_hex
        ));
    }
    Ok(package)
}

/// Packages named `name` in one search directory: a directory `name/` with a manifest,
/// or archives `name-VERSION.scenario.tar.gz` (a team's packages may sit in `team/`).
fn candidates(dir: &Path, name: &str) -> Vec<(semver::Version, PathBuf)> {
    let mut out = vec![];
    let as_dir = dir.join(name);
    if as_dir.join(MANIFEST).is_file() {
        // Only the manifest: its version decides, the files are read if it is chosen.
        if let Ok(m) = read_manifest(&as_dir) {
            if let Ok(v) = semver::Version::parse(&m.version) {
                out.push((v, as_dir));
            }
        }
    }
    let flat = name.replace('/', "-");
    let (sub, stem) = match name.rsplit_once('/') {
        Some((team, short)) => (dir.join(team), vec![flat.clone(), short.to_string()]),
        None => (dir.to_path_buf(), vec![flat.clone()]),
    };
    for d in [dir.to_path_buf(), sub] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().to_string();
            let Some(base) = file.strip_suffix(ARCHIVE_SUFFIX) else {
                continue;
            };
            for s in &stem {
                if let Some(v) = base
                    .strip_prefix(s.as_str())
                    .and_then(|r| r.strip_prefix('-'))
                    .and_then(|v| semver::Version::parse(v).ok())
                {
                    out.push((v, e.path()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_path_is_a_file_or_a_directory_of_files_never_a_name_prefix() {
        let mut files = Files::new();
        for name in ["data-x", "data/a.json", "data0", "entry.rhai"] {
            files.insert(name.into(), vec![]);
        }
        assert!(holds(&files, "entry.rhai"));
        assert!(holds(&files, "data"));
        assert!(holds(&files, &manifest::canonical("./data/")));
        assert!(!holds(&files, "dat"));
        assert!(!holds(&files, "data/a"));
        let mut no_dir = files.clone();
        no_dir.remove("data/a.json");
        assert!(!holds(&no_dir, "data"));
    }
}
