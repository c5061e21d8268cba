//! Publishing a package archive: config and layer blobs, then the manifest under the
//! reference's tag and under the package's digest tag.

use std::path::Path;

use super::artifact::{self, PackageConfig};
use super::{blocking, digest_hex, digest_tag, Access, OciError, OciRef, Pin, Registry};
use crate::package::Package;

/// What a push published.
#[derive(Debug)]
pub struct Pushed {
    pub name: String,
    pub version: String,
    /// The package digest (64 hex digits): what `pack` prints and `verify --expect` checks.
    pub package_hex: String,
    /// The registry's name for the upload: the sha256 of the manifest (64 hex digits).
    pub manifest_hex: String,
}

/// Pushes the archive at `archive` to `r` (which must name a tag).
pub fn push(archive: &Path, r: &OciRef, access: &Access) -> Result<Pushed, OciError> {
    let Pin::Tag(tag) = &r.pin else {
        return Err(OciError::BadReference {
            reference: r.to_string(),
            why: "push to a tag (REPO:TAG); the digests are printed after the push".into(),
        });
    };
    if !archive.is_file() {
        return Err(OciError::Refused(format!(
            "{} is not a package archive; pack the directory first (`runner pack`)",
            archive.display()
        )));
    }
    // Opening checks the archive's content against its digest.
    let package = Package::open(archive).map_err(OciError::Refused)?;
    let bytes = std::fs::read(archive)
        .map_err(|e| OciError::Refused(format!("cannot read {}: {e}", archive.display())))?;
    let m = &package.manifest;
    let config = PackageConfig {
        package_digest: format!("sha256:{}", package.digest),
        name: m.name.clone(),
        version: m.version.clone(),
        interface: m.interface.clone(),
    };
    let (config, layer, manifest) = artifact::build(&config, &m.archive_name(), bytes)?;
    let pushed = Pushed {
        name: m.name.clone(),
        version: m.version.clone(),
        package_hex: package.digest.clone(),
        manifest_hex: String::new(),
    };
    let (r, access, tag) = (r.clone(), access.clone(), tag.clone());
    let package_tag = digest_tag(&package.digest);
    let manifest_hex = blocking(async move {
        let reg = Registry::open(&r, &access);
        let tagged = r.tagged(&tag);
        let by_package = r.tagged(&package_tag);
        reg.client
            .push(&tagged, &[layer], config, &reg.auth, Some(manifest.clone()))
            .await
            .map_err(|e| reg.error("cannot push to", &r, e))?;
        reg.client
            .push_manifest(&by_package, &manifest.into())
            .await
            .map_err(|e| reg.error("cannot add the digest tag to", &r, e))?;
        let digest = reg
            .client
            .fetch_manifest_digest(&tagged, &reg.auth)
            .await
            .map_err(|e| reg.error("cannot read back the manifest of", &r, e))?;
        digest_hex(&digest).map(str::to_string).ok_or_else(|| {
            OciError::Registry(format!("{r}: the registry named the manifest {digest}"))
        })
    })?;
    Ok(Pushed {
        manifest_hex,
        ..pushed
    })
}
