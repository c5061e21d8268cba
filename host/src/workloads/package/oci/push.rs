//! Publishing a package archive: config and layer blobs, then the manifest under the
//! reference's tag and under the package's digest tag. A tag that already holds another
//! package is left alone unless the push is forced: a version tag that silently changes
//! content would run a different workload under the same name.

use std::path::Path;

use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;
use oci_client::Reference;

use super::artifact::{self, PackageConfig, MAX_CONFIG_BYTES};
use super::pull::blob;
use super::{
    blocking, chain, digest_hex, digest_tag, not_found, Access, OciError, OciRef, Pin, Registry,
};
use crate::workloads::package::Package;

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

/// Pushes the archive at `archive` to `r` (which must name a tag); a tag holding other
/// content is refused unless `force`.
pub fn push(archive: &Path, r: &OciRef, access: &Access, force: bool) -> Result<Pushed, OciError> {
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
    let package_hex = package.digest.clone();
    let manifest_hex = blocking(async move {
        let reg = Registry::open(&r, &access);
        let tagged = r.tagged(&tag);
        if !force {
            tag_is_free(&reg, &r, &tagged, &package_hex).await?;
        }
        let by_package = r.tagged(&package_tag);
        reg.client
            .push(&tagged, &[layer], config, &reg.auth, Some(manifest.clone()))
            .await
            .map_err(|e| reg.error("cannot push to", &r, chain(&e)))?;
        reg.client
            .push_manifest(&by_package, &manifest.into())
            .await
            .map_err(|e| reg.error("cannot add the digest tag to", &r, chain(&e)))?;
        let digest = reg
            .client
            .fetch_manifest_digest(&tagged, &reg.auth)
            .await
            .map_err(|e| reg.error("cannot read back the manifest of", &r, chain(&e)))?;
        digest_hex(&digest).map(str::to_string).ok_or_else(|| {
            OciError::Registry(format!("{r}: the registry named the manifest {digest}"))
        })
    })?;
    Ok(Pushed {
        manifest_hex,
        ..pushed
    })
}

/// Refuses to move a tag that already holds another package, or something that is not a
/// package; the same package again (even in other archive bytes) is fine.
async fn tag_is_free(
    reg: &Registry,
    r: &OciRef,
    tagged: &Reference,
    package_hex: &str,
) -> Result<(), OciError> {
    let held = match reg.client.pull_image_manifest(tagged, &reg.auth).await {
        Ok((manifest, _)) => held_package(reg, r, &manifest).await,
        Err(e) if not_found(&e) => return Ok(()),
        Err(OciDistributionError::ImageIndexParsingNoPlatformResolverError) => None,
        Err(e) => return Err(reg.error("cannot read the tag before pushing to", r, chain(&e))),
    };
    let what = match held {
        Some(old) if old == package_hex => return Ok(()),
        Some(old) => format!("package sha256:{old}"),
        None => "something that is not a runner package".to_string(),
    };
    Err(OciError::Refused(format!(
        "{r} already holds {what}; refusing to move the tag to package sha256:{package_hex} (push under a new tag, or pass --force)"
    )))
}

/// The package digest a manifest carries, if it is one of ours.
async fn held_package(reg: &Registry, r: &OciRef, manifest: &OciImageManifest) -> Option<String> {
    artifact::check_manifest(manifest).ok()?;
    let config = blob(reg, r, &manifest.config, MAX_CONFIG_BYTES)
        .await
        .ok()?;
    artifact::parse_config(&config).ok().map(|(_, hex)| hex)
}
