//! What a package looks like in a registry, after the CNCF Wasm OCI artifact layout
//! (tag-and-digest addressable image manifest, an `artifactType` equal to the config's
//! media type, a small JSON config describing the content, the payload as layers), with
//! media types of our own:
//!
//! - manifest: `application/vnd.oci.image.manifest.v1+json`, `artifactType`
//!   [`ARTIFACT_TYPE`];
//! - config ([`CONFIG_MEDIA_TYPE`], the same string): `{"packageDigest": "sha256:…",
//!   "name": …, "version": …, "interface": …}`;
//! - one layer ([`LAYER_MEDIA_TYPE`]): the `.scenario.tar.gz` archive, byte for byte, with
//!   its file name as `org.opencontainers.image.title`.
//!
//! Nothing time-dependent goes in, so pushing the same archive twice gives the same
//! manifest digest.

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciImageManifest, OCI_IMAGE_MEDIA_TYPE};
use serde::{Deserialize, Serialize};

use super::{digest_hex, OciError};

/// The manifest's `artifactType`, and the config's media type.
pub const ARTIFACT_TYPE: &str = "application/vnd.runner.scenario.config.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = ARTIFACT_TYPE;
/// The layer: a package archive as `runner pack` writes it.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.runner.scenario.layer.v1.tar+gzip";
/// A config larger than this is not ours.
pub const MAX_CONFIG_BYTES: i64 = 64 << 10;
/// A layer larger than this is refused before it is fetched: an archive that unpacks to at
/// most 1 GiB (archive.rs) is smaller still.
pub const MAX_LAYER_BYTES: i64 = crate::workloads::package::archive::MAX_UNPACKED_BYTES as i64;

/// The config blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageConfig {
    /// `sha256:` and the package digest (what `runner pack` prints).
    pub package_digest: String,
    pub name: String,
    pub version: String,
    pub interface: String,
}

/// The config, layer and manifest of one package archive.
pub fn build(
    config: &PackageConfig,
    archive_name: &str,
    archive: Vec<u8>,
) -> Result<(Config, ImageLayer, OciImageManifest), OciError> {
    let config_bytes = serde_json::to_vec(config)
        .map_err(|e| OciError::Registry(format!("cannot write the artifact's config: {e}")))?;
    let config = Config::new(config_bytes, CONFIG_MEDIA_TYPE.to_string(), None);
    let title = BTreeMap::from([(
        "org.opencontainers.image.title".to_string(),
        archive_name.to_string(),
    )]);
    let layer = ImageLayer::new(archive, LAYER_MEDIA_TYPE.to_string(), Some(title));
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
    manifest.artifact_type = Some(ARTIFACT_TYPE.to_string());
    Ok((config, layer, manifest))
}

/// The manifest is one of ours, with a config and one layer of sizes we accept.
pub fn check_manifest(manifest: &OciImageManifest) -> Result<(), String> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "is not a runner scenario package (its config is {})",
            crate::safeguards::display::escape_control(&manifest.config.media_type)
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!(
            "has {} layers; a scenario package has one",
            manifest.layers.len()
        ));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(format!(
            "has a layer of type {}, not {LAYER_MEDIA_TYPE}",
            crate::safeguards::display::escape_control(&layer.media_type)
        ));
    }
    if !(0..=MAX_CONFIG_BYTES).contains(&manifest.config.size) {
        return Err(format!("has a config larger than {MAX_CONFIG_BYTES} bytes"));
    }
    if !(0..=MAX_LAYER_BYTES).contains(&layer.size) {
        return Err(format!("has a layer larger than {MAX_LAYER_BYTES} bytes"));
    }
    Ok(())
}

/// The config blob, parsed; its package digest as 64 hex digits.
pub fn parse_config(bytes: &[u8]) -> Result<(PackageConfig, String), String> {
    let config: PackageConfig = serde_json::from_slice(bytes)
        .map_err(|e| format!("has a config that is not a scenario package's: {e}"))?;
    let hex = digest_hex(&config.package_digest)
        .ok_or("has a config whose packageDigest is not sha256:HEX")?
        .to_string();
    Ok((config, hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PackageConfig {
        PackageConfig {
            package_digest: format!("sha256:{}", "1a".repeat(32)),
            name: "team-a/x".into(),
            version: "1.0.0".into(),
            interface: "bench:scenario@0.3.0".into(),
        }
    }

    #[test]
    fn a_built_manifest_is_ours_and_reads_back() {
        let (cfg, layer, manifest) = build(&config(), "x.scenario.tar.gz", vec![1, 2, 3]).unwrap();
        check_manifest(&manifest).unwrap();
        assert_eq!(manifest.artifact_type.as_deref(), Some(ARTIFACT_TYPE));
        assert_eq!(manifest.layers[0].digest, layer.sha256_digest());
        assert_eq!(manifest.config.digest, cfg.sha256_digest());
        let (back, hex) = parse_config(&cfg.data).unwrap();
        assert_eq!(back, config());
        assert_eq!(hex, "1a".repeat(32));
        // The same archive gives the same manifest, field for field.
        let (_, _, again) = build(&config(), "x.scenario.tar.gz", vec![1, 2, 3]).unwrap();
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&manifest).unwrap()
        );
    }

    #[test]
    fn a_foreign_manifest_is_refused() {
        let (_, _, mut manifest) = build(&config(), "x", vec![0]).unwrap();
        manifest.layers.push(manifest.layers[0].clone());
        assert!(check_manifest(&manifest).unwrap_err().contains("2 layers"));
        manifest.layers.pop();
        manifest.layers[0].size = MAX_LAYER_BYTES + 1;
        assert!(check_manifest(&manifest).unwrap_err().contains("larger"));
        manifest.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(check_manifest(&manifest)
            .unwrap_err()
            .contains("not a runner"));
        assert!(parse_config(
            b"{\"packageDigest\":\"md5:x\",\"name\":\"a\",\"version\":\"1\",\"interface\":\"i\"}"
        )
        .is_err());
    }
}
