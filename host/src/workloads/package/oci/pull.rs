//! Pulling a package: from the cache when the reference is pinned and the package is
//! there (no network at all), else manifest, config and archive from the registry, each
//! checked against the digest that names it, and the archive against the pin.

use std::path::PathBuf;

use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::artifact::{self, MAX_CONFIG_BYTES, MAX_LAYER_BYTES};
use super::store::Store;
use super::{
    answered, blocking, chain, digest_hex, digest_tag, Access, OciError, OciRef, Pin, Registry,
};

/// A pulled package: its archive in the cache and its package digest (64 hex digits).
#[derive(Debug)]
pub struct Pulled {
    pub archive: PathBuf,
    pub package_hex: String,
}

/// The archive a reference names, pulled when the cache cannot answer. A kept archive
/// that fails its check is pulled again, and the user is told in one line on stderr.
pub fn pull(r: &OciRef, access: &Access) -> Result<Pulled, OciError> {
    let store = Store::open()?;
    let mut damaged = None;
    if let Pin::Digest(hex) = &r.pin {
        let package = store
            .package_of_manifest(hex)
            .unwrap_or_else(|| hex.clone());
        match kept(&store, &package) {
            Kept::Good(pulled) => return Ok(pulled),
            Kept::Damaged(why) => damaged = Some((package, why)),
            Kept::Absent => {}
        }
    }
    let (r, access) = (r.clone(), access.clone());
    let (pulled, repaired) =
        blocking(async move { fetch(&r, &access, &store).await }).map_err(|e| match &damaged {
            Some((hex, why)) => OciError::Registry(format!(
                "{e} (and the cached package sha256:{hex} is damaged: {why})"
            )),
            None => e,
        })?;
    if let Some((hex, why)) = repaired.or(damaged) {
        crate::errln!("warning: cached package sha256:{hex} was damaged ({why}); pulled it again");
    }
    Ok(pulled)
}

/// What the cache holds for a package digest.
enum Kept {
    Good(Pulled),
    /// A file is there but does not hold the package it is named for: why.
    Damaged(String),
    Absent,
}

fn kept(store: &Store, package_hex: &str) -> Kept {
    let Some(archive) = store.cached(package_hex) else {
        return Kept::Absent;
    };
    match crate::workloads::package::archive::read(&archive) {
        Ok((_, actual)) if actual == package_hex => Kept::Good(Pulled {
            archive,
            package_hex: actual,
        }),
        Ok((_, actual)) => Kept::Damaged(format!("it holds package sha256:{actual}")),
        Err(e) => Kept::Damaged(
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        ),
    }
}

/// The package the registry holds under `r`, and, when a kept copy of it had to be
/// replaced, its digest and what was wrong with it.
async fn fetch(
    r: &OciRef,
    access: &Access,
    store: &Store,
) -> Result<(Pulled, Option<(String, String)>), OciError> {
    let reg = Registry::open(r, access);
    let (manifest, manifest_hex, pinned_package) = manifest(&reg, r).await?;
    let refused = |why: String| OciError::Refused(format!("{r} {why}"));
    artifact::check_manifest(&manifest).map_err(refused)?;
    let config = blob(&reg, r, &manifest.config, MAX_CONFIG_BYTES).await?;
    let (_, package_hex) = artifact::parse_config(&config).map_err(refused)?;
    if let Some(pinned) = pinned_package.filter(|p| *p != package_hex) {
        return Err(OciError::Refused(format!(
            "{r}: the registry's tag {} holds package sha256:{package_hex}, not the pinned sha256:{pinned}; refusing it",
            digest_tag(&pinned)
        )));
    }
    let (pulled, repaired) = match kept(store, &package_hex) {
        Kept::Good(pulled) => (pulled, None),
        other => {
            let bytes = blob(&reg, r, &manifest.layers[0], MAX_LAYER_BYTES).await?;
            let archive = store
                .keep(&package_hex, &bytes)
                .map_err(|e| OciError::Refused(format!("{r}: {e}")))?;
            let repaired = match other {
                Kept::Damaged(why) => Some((package_hex.clone(), why)),
                _ => None,
            };
            let pulled = Pulled {
                archive,
                package_hex,
            };
            (pulled, repaired)
        }
    };
    // The manifest digest names its config, which names the package: sound to remember.
    store.remember_manifest(&manifest_hex, &pulled.package_hex)?;
    Ok((pulled, repaired))
}

/// The manifest a reference names, its digest, and the package digest it must carry when
/// the pin is one. A pin is tried as a package digest (its digest tag) first, then as a
/// manifest digest.
async fn manifest(
    reg: &Registry,
    r: &OciRef,
) -> Result<(OciImageManifest, String, Option<String>), OciError> {
    let get = |reference| async move {
        let (manifest, digest) = reg
            .client
            .pull_image_manifest(&reference, &reg.auth)
            .await
            .map_err(|e| (answered(&e), chain(&e)))?;
        let hex = digest_hex(&digest)
            .ok_or_else(|| (true, format!("the registry named the manifest {digest}")))?
            .to_string();
        Ok::<_, (bool, String)>((manifest, hex))
    };
    match &r.pin {
        Pin::Tag(tag) => {
            let (m, hex) = get(r.tagged(tag))
                .await
                .map_err(|(_, e)| reg.error("cannot pull", r, e))?;
            Ok((m, hex, None))
        }
        Pin::Digest(pin) => match get(r.tagged(&digest_tag(pin))).await {
            Ok((m, hex)) => Ok((m, hex, Some(pin.clone()))),
            // Not reached at all: asking again for the manifest would only say so twice.
            Err((false, e)) => Err(reg.error("cannot pull", r, e)),
            Err((true, _)) => {
                let (m, hex) = get(r.by_digest(pin)).await.map_err(|(_, as_manifest)| {
                    reg.error(
                        "cannot pull",
                        r,
                        format!("no package of that digest (no tag {}) and no manifest of it: {as_manifest}", digest_tag(pin)),
                    )
                })?;
                if hex != *pin {
                    return Err(OciError::Refused(format!(
                        "{r}: the registry answered with manifest sha256:{hex}; refusing it"
                    )));
                }
                Ok((m, hex, None))
            }
        },
    }
}

/// A blob, at most `limit` bytes and at most its declared size; oci-client checks its
/// sha256 against the descriptor's digest.
pub(super) async fn blob(
    reg: &Registry,
    r: &OciRef,
    descriptor: &OciDescriptor,
    limit: i64,
) -> Result<Vec<u8>, OciError> {
    let limit = descriptor.size.clamp(0, limit) as usize;
    let mut out = Bounded {
        bytes: Vec::new(),
        limit,
    };
    let reference = r.by_digest(digest_hex(&descriptor.digest).unwrap_or_default());
    reg.client
        .pull_blob(&reference, descriptor, &mut out)
        .await
        .map_err(|e| {
            reg.error(
                &format!("refusing blob {} of", descriptor.digest),
                r,
                chain(&e),
            )
        })?;
    Ok(out.bytes)
}

/// Collects a blob, refusing more bytes than the limit.
struct Bounded {
    bytes: Vec<u8>,
    limit: usize,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.bytes.len() + buf.len() > self.limit {
            let limit = self.limit;
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {limit} bytes the manifest declares"
            ))));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
