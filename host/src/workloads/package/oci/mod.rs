//! Packages shared through an OCI registry: `runner push ARCHIVE oci://HOST[:PORT]/REPO:TAG`
//! publishes a package archive as an OCI artifact, and a scenario argument
//! `oci://HOST[:PORT]/REPO:TAG` or `oci://HOST[:PORT]/REPO@sha256:DIGEST` pulls it,
//! checks it and hands back the archive, kept in the cache by package digest.
//!
//! The artifact (see artifact.rs) is one image manifest with our own `artifactType`, a
//! small JSON config naming the package digest, and one layer: the archive's bytes. The
//! same manifest is also tagged `sha256-<package digest>` (the digest tag cosign uses for
//! signatures), so a reference pinned by the package digest resolves with one tag lookup;
//! a pin may also be the manifest digest. Either way the archive's own package digest is
//! checked here before anything runs.

mod artifact;
mod auth;
mod pull;
mod push;
mod store;

use std::net::IpAddr;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub use pull::pull;
pub use push::{push, Pushed};

/// Seconds a registry may stay silent on an open connection before the request fails
/// (reqwest's read timeout); 60 unless this variable says otherwise.
pub const TIMEOUT_ENV: &str = "RUNNER_REGISTRY_TIMEOUT";

use crate::safeguards::redact::Redactor;

/// What marks a scenario argument or a push target as a registry reference.
pub const SCHEME: &str = "oci://";

/// Why a push or a pull failed. Messages never hold credentials: they pass through the
/// redactor that knows them (see [`Registry::error`]).
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{reference}: {why}")]
    BadReference { reference: String, why: String },
    #[error("{0}")]
    Registry(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Cache(String),
}

/// How the registries of this command may be reached.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Registries (HOST or HOST:PORT) that may be reached over plain HTTP besides loopback.
    pub insecure: Vec<String>,
}

/// What a reference pins: a tag, or a digest (package or manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    Tag(String),
    /// 64 lowercase hex digits, without the `sha256:` prefix.
    Digest(String),
}

/// A parsed `oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    pub registry: String,
    pub repository: String,
    pub pin: Pin,
}

impl OciRef {
    /// Parses a reference; the host is always explicit (no Docker Hub default).
    pub fn parse(text: &str) -> Result<OciRef, OciError> {
        let bad = |why: &str| OciError::BadReference {
            reference: crate::safeguards::display::escape_control(text).into_owned(),
            why: why.to_string(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("does not start with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected oci://HOST[:PORT]/REPO:TAG or …/REPO@sha256:DIGEST"))?;
        if registry.is_empty() || !registry.chars().all(registry_char) {
            return Err(bad(
                "the registry host is empty or holds characters a host cannot",
            ));
        }
        let (repository, pin) = match path.split_once('@') {
            Some((repo, digest)) => {
                let hex = digest_hex(digest)
                    .ok_or_else(|| bad("a digest pin is sha256: and 64 lowercase hex digits"))?;
                (repo, Pin::Digest(hex.to_string()))
            }
            None => {
                let (repo, tag) = path.rsplit_once(':').ok_or_else(|| {
                    bad("name a tag (REPO:TAG) or pin a digest (REPO@sha256:DIGEST)")
                })?;
                if !valid_tag(tag) {
                    return Err(bad(
                        "a tag is 1 to 128 of A-Z a-z 0-9 _ . - and starts with neither . nor -",
                    ));
                }
                (repo, Pin::Tag(tag.to_string()))
            }
        };
        if !valid_repository(repository) {
            return Err(bad(
                "a repository is lowercase a-z 0-9 with . _ - / between parts",
            ));
        }
        Ok(OciRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            pin,
        })
    }

    /// The reference oci-client takes, with another tag.
    fn tagged(&self, tag: &str) -> Reference {
        Reference::with_tag(
            self.registry.clone(),
            self.repository.clone(),
            tag.to_string(),
        )
    }

    /// The reference oci-client takes, by manifest digest.
    fn by_digest(&self, hex: &str) -> Reference {
        Reference::with_digest(
            self.registry.clone(),
            self.repository.clone(),
            format!("sha256:{hex}"),
        )
    }

    /// The host without its port (and without the brackets of an IPv6 address).
    fn host(&self) -> &str {
        let r = self.registry.as_str();
        if let Some(inner) = r.strip_prefix('[') {
            return inner.split(']').next().unwrap_or(inner);
        }
        r.rsplit_once(':').map_or(r, |(h, _)| h)
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        match &self.pin {
            Pin::Tag(t) => write!(f, ":{t}"),
            Pin::Digest(d) => write!(f, "@sha256:{d}"),
        }
    }
}

/// The 64 hex digits of `sha256:HEX` (or of bare `HEX`), if that is what `text` is.
pub fn digest_hex(text: &str) -> Option<&str> {
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(hex)
}

/// The digest tag a package is also pushed under (cosign's `sha256-HEX` form: a tag cannot
/// hold a colon).
pub fn digest_tag(package_digest: &str) -> String {
    format!("sha256-{package_digest}")
}

fn registry_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']')
}

/// The OCI distribution specification's tag grammar: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && tag.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The distribution specification's repository grammar, simplified: lowercase
/// alphanumeric parts joined by `.`, `_`, `-` or `/`, none empty at either end.
fn valid_repository(repo: &str) -> bool {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
            && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && p.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    !repo.is_empty() && repo.len() <= 255 && repo.split('/').all(part_ok)
}

/// A client for one registry, with its credentials and a redactor that hides them.
struct Registry {
    client: Client,
    auth: RegistryAuth,
    redactor: Redactor,
}

impl Registry {
    fn open(r: &OciRef, access: &Access) -> Registry {
        let plain_http = is_loopback(r.host())
            || access
                .insecure
                .iter()
                .any(|h| h == &r.registry || h == r.host());
        let config = ClientConfig {
            protocol: if plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(read_timeout()),
            // An image index is not one of ours: refuse it rather than pick a platform.
            platform_resolver: None,
            ..ClientConfig::default()
        };
        let (auth, redactor) = auth::credentials(&r.registry);
        Registry {
            client: Client::new(config),
            auth,
            redactor,
        }
    }

    /// A registry error as one line, credentials hidden.
    fn error(&self, what: &str, r: &OciRef, e: impl std::fmt::Display) -> OciError {
        OciError::Registry(self.redactor.string(format!("{what} {r}: {e}")))
    }
}

/// The read timeout: [`TIMEOUT_ENV`] seconds when it holds a positive number, else 60.
fn read_timeout() -> std::time::Duration {
    let secs = std::env::var(TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .unwrap_or(60.0);
    std::time::Duration::from_secs_f64(secs)
}

/// An error and its causes on one line (`error sending request` alone says nothing; the
/// cause says connection refused, timed out, DNS or TLS). A cause its parent already
/// quotes is not repeated.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the registry answered (with an error of its own) rather than not being reached
/// (refused, timed out, name or TLS failure).
fn answered(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RequestError(r) => {
            !(r.is_connect() || r.is_timeout() || r.is_request())
        }
        OciDistributionError::IoError(_) => false,
        _ => true,
    }
}

/// Whether the registry said it holds nothing under the name asked for.
fn not_found(e: &OciDistributionError) -> bool {
    use oci_client::errors::OciErrorCode;
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().all(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
            )
        }),
        _ => false,
    }
}

/// 127.0.0.1 (any of 127/8), ::1 and localhost: a registry on this machine, where plain
/// HTTP crosses no network.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Runs `work` on a thread of its own with its own runtime: a scenario argument is
/// resolved both inside and outside the command's runtime, and a runtime cannot be
/// blocked on from within another.
fn blocking<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, OciError>> + Send + 'static,
) -> Result<T, OciError> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| OciError::Registry(format!("cannot start the async runtime: {e}")))?;
        rt.block_on(work)
    })
    .join()
    .unwrap_or_else(|_| Err(OciError::Registry("the registry client panicked".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_into_registry_repository_and_pin() {
        let r = OciRef::parse("oci://127.0.0.1:5000/team-a/long-ctx:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team-a/long-ctx");
        assert_eq!(r.pin, Pin::Tag("1.0".into()));
        assert_eq!(r.host(), "127.0.0.1");
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team-a/long-ctx:1.0");
        let hex = "ab".repeat(32);
        let d = OciRef::parse(&format!("oci://registry.example/x@sha256:{hex}")).unwrap();
        assert_eq!(d.pin, Pin::Digest(hex.clone()));
        assert_eq!(d.host(), "registry.example");
        assert_eq!(OciRef::parse("oci://[::1]:5000/x:t").unwrap().host(), "::1");
    }

    #[test]
    fn malformed_references_are_refused_with_the_reason() {
        for bad in [
            "oci://host",
            "oci:///repo:tag",
            "oci://host/repo",
            "oci://host/Repo:tag",
            "oci://host/repo:-tag",
            "oci://host/repo@sha256:abc",
            "oci://host/repo@sha256:".to_string().as_str(),
            "oci://ho st/repo:tag",
            "oci://host/a//b:tag",
        ] {
            let e = OciRef::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn only_loopback_hosts_or_named_ones_get_plain_http() {
        assert!(is_loopback("127.0.0.1") && is_loopback("::1") && is_loopback("LOCALHOST"));
        assert!(!is_loopback("10.0.0.1") && !is_loopback("registry.example"));
    }

    #[test]
    fn an_error_line_carries_its_causes_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        #[derive(Debug, thiserror::Error)]
        #[error("error sending request")]
        struct Outer(#[source] std::io::Error);
        assert_eq!(
            chain(&Outer(io)),
            "error sending request: connection refused"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("tcp connect error: {0}")]
        struct Quoting(#[source] std::io::Error);
        let quoted = Quoting(std::io::Error::other("refused"));
        assert_eq!(chain(&quoted), "tcp connect error: refused");
    }

    #[test]
    fn a_digest_is_sha256_and_64_lowercase_hex_digits() {
        let hex = "0f".repeat(32);
        assert_eq!(digest_hex(&format!("sha256:{hex}")), Some(hex.as_str()));
        assert_eq!(digest_hex(&hex), Some(hex.as_str()));
        assert_eq!(digest_hex(&hex.to_uppercase()), None);
        assert_eq!(digest_hex("sha512:00"), None);
    }
}
