//! Registry credentials, never printed: `RUNNER_REGISTRY_USERNAME` and
//! `RUNNER_REGISTRY_PASSWORD` when both are set, else the registry's `auths` entry in the
//! Docker configuration (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`),
//! written by `docker login` as base64 `user:password` in `auth` (or as `username` and
//! `password`); else anonymous. Credential helpers (`credsStore`, `credHelpers`) are not
//! run: they are programs, and a package pull should not start one.

use std::path::PathBuf;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::safeguards::redact::Redactor;

pub const USERNAME_ENV: &str = "RUNNER_REGISTRY_USERNAME";
pub const PASSWORD_ENV: &str = "RUNNER_REGISTRY_PASSWORD";

#[derive(Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The credentials for `registry` (HOST[:PORT]) and a redactor that hides them.
pub fn credentials(registry: &str) -> (RegistryAuth, Redactor) {
    let found = from_env().or_else(|| from_docker_config(registry));
    let mut redactor = Redactor::default();
    match found {
        Some((user, password)) => {
            redactor.add(&password);
            (RegistryAuth::Basic(user, password), redactor)
        }
        None => (RegistryAuth::Anonymous, redactor),
    }
}

fn from_env() -> Option<(String, String)> {
    let user = std::env::var(USERNAME_ENV).ok().filter(|u| !u.is_empty())?;
    let password = std::env::var(PASSWORD_ENV).ok()?;
    Some((user, password))
}

fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".docker").join("config.json"))
}

fn from_docker_config(registry: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string(docker_config_path()?).ok()?;
    let config: DockerConfig = serde_json::from_str(&text).ok()?;
    lookup(&config, registry)
}

/// The entry whose key names `registry`: keys are written as `host:port`,
/// `https://host:port` or `https://host/v1/` by different tools.
fn lookup(config: &DockerConfig, registry: &str) -> Option<(String, String)> {
    let entry = config.auths.iter().find_map(|(key, entry)| {
        let host = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(key);
        let host = host.split('/').next().unwrap_or(host);
        (host == registry).then_some(entry)
    })?;
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Some((user.clone(), password.clone()));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(entry.auth.as_deref()?.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_entries_are_found_by_host_in_any_key_form() {
        let config: DockerConfig = serde_json::from_str(
            r#"{"auths": {
                "https://registry.example/v1/": {"auth": "YWRhOnMzY3JldA=="},
                "127.0.0.1:5000": {"username": "bob", "password": "pw"}
            }}"#,
        )
        .unwrap();
        assert_eq!(
            lookup(&config, "registry.example"),
            Some(("ada".into(), "s3cret".into()))
        );
        assert_eq!(
            lookup(&config, "127.0.0.1:5000"),
            Some(("bob".into(), "pw".into()))
        );
        assert_eq!(lookup(&config, "127.0.0.1:5001"), None);
    }
}
