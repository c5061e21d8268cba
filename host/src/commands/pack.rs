//! `runner pack DIR`: a package directory into one archive.

use anyhow::{anyhow, bail, Result};

use crate::commands::cli::PackArgs;
use crate::workloads::package;

pub fn pack(a: PackArgs) -> Result<()> {
    if !a.out.is_dir() {
        bail!("--out {} is not a directory", a.out.display());
    }
    let (archive, p) = package::pack(&a.dir, &a.out).map_err(|e| anyhow!(e))?;
    let m = &p.manifest;
    crate::outln!(
        "packed {} {} ({}) into {}",
        m.name,
        m.version,
        m.entry,
        archive.display()
    );
    crate::outln!("sha256 {}", p.digest);
    Ok(())
}
