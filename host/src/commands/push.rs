//! `runner push PACKAGE oci://HOST[:PORT]/REPO:TAG`: a package archive (or a package
//! directory, packed on the way) into an OCI registry, and the two digests a team may
//! quote, each said for what it is.

use anyhow::{anyhow, Result};

use crate::commands::cli::PushArgs;
use crate::workloads::package;
use crate::workloads::package::oci::{self, Access, OciRef};

pub fn push(a: PushArgs) -> Result<()> {
    let reference = OciRef::parse(&a.reference).map_err(|e| anyhow!(e))?;
    let access = Access {
        insecure: a.insecure_registry,
    };
    // A directory is packed as `runner pack` would: the archive is reproducible, so the
    // registry gets the same bytes, and the same manifest digest, either way.
    let packed = tempfile::tempdir()?;
    let archive = if a.package.is_dir() {
        package::pack(&a.package, packed.path())
            .map_err(|e| anyhow!(e))?
            .0
    } else {
        a.package.clone()
    };
    let p = oci::push(&archive, &reference, &access, a.force).map_err(|e| anyhow!(e))?;
    let pinned = format!(
        "{}{}/{}@sha256:{}",
        oci::SCHEME,
        reference.registry,
        reference.repository,
        p.package_hex
    );
    crate::outln!(
        "pushed {} {} to {reference} (also tagged {})",
        p.name,
        p.version,
        oci::digest_tag(&p.package_hex)
    );
    crate::outln!(
        "package digest  sha256:{}  (the one to quote: runner pack prints it, runner verify --expect checks it)",
        p.package_hex
    );
    crate::outln!(
        "manifest digest sha256:{}  (the registry's name for this upload; also accepted after @)",
        p.manifest_hex
    );
    crate::outln!("run it pinned: runner run {pinned}");
    Ok(())
}
