//! `runner pull oci://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST) [-o DIR|FILE]`: a package out of
//! a registry into a `.scenario.tar.gz` the user can keep, install in a scenario path or
//! pass on. It goes through the same pull as a run (the cache, every digest checked, the
//! package opened), then copies the checked archive out of the cache.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use crate::commands::cli::PullArgs;
use crate::workloads::package;
use crate::workloads::package::oci::{Access, OciRef};

pub fn pull(a: PullArgs) -> Result<()> {
    let reference = OciRef::parse(&a.reference).map_err(|e| anyhow!(e))?;
    let access = Access {
        insecure: a.insecure_registry,
    };
    let pkg = package::open_pulled(&reference.to_string(), &access).map_err(|e| anyhow!(e))?;
    let name = pkg.manifest.archive_name();
    let dest = match a.output {
        Some(p) if p.is_dir() => p.join(&name),
        Some(p) => p,
        None => PathBuf::from(&name),
    };
    copy_whole(&pkg.source, &dest).with_context(|| format!("cannot write {}", dest.display()))?;
    crate::outln!(
        "pulled {} {} from {reference} into {}",
        pkg.manifest.name,
        pkg.manifest.version,
        dest.display()
    );
    crate::outln!(
        "package digest  sha256:{}  (runner verify --expect checks it; result.json records it as scenario_digest)",
        pkg.digest
    );
    Ok(())
}

/// Copies `from` to `to` through a file beside `to`, renamed into place: a reader (or a
/// pull that fails half-way) never leaves a partial archive under the final name.
fn copy_whole(from: &Path, to: &Path) -> Result<()> {
    let dir = match to.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let bytes = std::fs::read(from)?;
    let mut file = tempfile::Builder::new()
        .prefix(".pulling-")
        .tempfile_in(dir)?;
    file.write_all(&bytes)?;
    file.as_file().sync_all()?;
    file.persist(to).map_err(|e| e.error)?;
    Ok(())
}
