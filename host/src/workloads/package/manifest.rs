//! `scenario.toml`: what a shared scenario package declares about itself.
//!
//! ```toml
//! name = "team-a/chat-mix"            # a name, optionally namespaced by team
//! version = "1.2.0"                   # semver
//! description = "Chat traffic of our product, replayed."
//! authors = ["Ada <ada@example.com>"]
//! entry = "chat_mix.rhai"             # or a .wasm component
//! interface = "bench:scenario@0.3.0"  # the WIT package version it needs
//! data = ["data/conversations.json"]  # files (or directories) shipped with it
//!
//! [params.requests]                   # defaults and help; the type is the default's
//! default = 500
//! help = "number of conversations"
//!
//! [target]                            # what the workload was designed for (shown, not applied)
//! server-flags = "--max-num-seqs 256 --enable-prefix-caching"
//! notes = "One H100, Qwen3.5-9B."
//! ```

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde::Deserialize;

use crate::safeguards::display::{escape_control, excerpt};
use crate::workloads::scenario::params::ParamValue;
use crate::workloads::scenario::wasm::version;

pub const MANIFEST: &str = "scenario.toml";
/// A manifest is a few lines; anything larger is not one (and is not read into memory).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Longest `name`: an OCI repository component or an npm name fits well within it, and it
/// rides in every report of a run.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest `version`: semver with a pre-release and build part.
pub const MAX_VERSION_BYTES: usize = 64;
/// Longest `description`: a few lines, shown by `runner info`.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub authors: Vec<String>,
    pub entry: String,
    pub interface: String,
    #[serde(default)]
    pub data: Vec<String>,
    #[serde(default)]
    pub params: BTreeMap<String, ManifestParam>,
    #[serde(default)]
    pub target: Option<TargetHints>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestParam {
    pub default: toml::Value,
    #[serde(default)]
    pub help: Option<String>,
}

/// Settings the workload was designed for; shown by `runner info`, never applied.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TargetHints {
    #[serde(default)]
    pub server_flags: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
}

impl Manifest {
    /// Parses and checks a manifest; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, String> {
        let m: Manifest = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!(":{line}")
                })
                .unwrap_or_default();
            format!("{file}{at}: {}", excerpt(e.message()))
        })?;
        // The messages quote the manifest's own text.
        m.check()
            .map_err(|e| format!("{file}: {}", escape_control(&e)))?;
        Ok(m)
    }

    fn check(&self) -> Result<(), String> {
        self.check_lengths()?;
        let valid_part = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
                && !p.starts_with('.')
        };
        let parts: Vec<&str> = self.name.split('/').collect();
        if parts.len() > 2 || !parts.iter().all(|p| valid_part(p)) {
            return Err(format!(
                "`name` must be `name` or `team/name` of letters, digits, `-`, `_` and `.`, got `{}`",
                excerpt(&self.name)
            ));
        }
        semver::Version::parse(&self.version).map_err(|e| {
            format!(
                "`version` must be a semantic version like 1.2.0, got `{}` ({e})",
                excerpt(&self.version)
            )
        })?;
        for (field, path) in
            std::iter::once(("entry", &self.entry)).chain(self.data.iter().map(|d| ("data", d)))
        {
            if !is_inside(path) {
                return Err(format!(
                    "`{field}` must be a relative path inside the package, got `{}`",
                    excerpt(path)
                ));
            }
            if path.chars().any(|c| c.is_control() || c == '\\') {
                return Err(format!(
                    "`{field}` must not hold control characters or backslashes, got `{}`",
                    excerpt(path)
                ));
            }
        }
        if !(self.entry.ends_with(".rhai") || self.entry.ends_with(".wasm")) {
            return Err(format!(
                "`entry` must be a .rhai script or a .wasm component, got `{}`",
                excerpt(&self.entry)
            ));
        }
        check_interface(&self.interface)?;
        for (name, p) in &self.params {
            p.value()
                .map_err(|e| format!("`params.{}.default`: {}", excerpt(name), excerpt(&e)))?;
        }
        Ok(())
    }

    /// Fields shown in reports and listings are a line at most: a longer one is refused
    /// by its length, never quoted whole.
    fn check_lengths(&self) -> Result<(), String> {
        for (field, text, max) in [
            ("name", &self.name, MAX_NAME_BYTES),
            ("version", &self.version, MAX_VERSION_BYTES),
            ("description", &self.description, MAX_DESCRIPTION_BYTES),
        ] {
            if text.len() > max {
                return Err(format!(
                    "`{field}` is {} bytes long, at most {max} are accepted",
                    text.len()
                ));
            }
        }
        Ok(())
    }

    /// The archive's file name: `team-a/chat-mix` 1.2.0 → `team-a-chat-mix-1.2.0.scenario.tar.gz`.
    pub fn archive_name(&self) -> String {
        format!(
            "{}-{}.scenario.tar.gz",
            self.name.replace('/', "-"),
            self.version
        )
    }
}

impl ManifestParam {
    pub fn value(&self) -> Result<ParamValue, String> {
        match &self.default {
            toml::Value::Integer(v) => Ok(ParamValue::Int(*v)),
            toml::Value::Float(v) if v.is_finite() => Ok(ParamValue::Float(*v)),
            toml::Value::Boolean(v) => Ok(ParamValue::Bool(*v)),
            toml::Value::String(v) => Ok(ParamValue::Str(v.clone())),
            other => Err(format!(
                "must be an integer, a number, a boolean or a string, got {}",
                other.type_str()
            )),
        }
    }
}

/// A listed path as the package's files are named: `/`-separated, without `.` parts or a
/// trailing `/` (`./data/` → `data`).
pub fn canonical(listed: &str) -> String {
    Path::new(listed)
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A relative path that stays inside the package (no `..`, no root).
fn is_inside(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// The package's `interface` against the WIT version this runner implements: the same
/// rule as for components themselves (same major; for 0.x the same minor).
pub fn check_interface(interface: &str) -> Result<(), String> {
    let wanted = format!("{}@", version::PACKAGE);
    let Some(v) = interface.strip_prefix(&wanted) else {
        return Err(format!(
            "`interface` must name the WIT package, like `{}@{}`, got `{}`",
            version::PACKAGE,
            version::VERSION,
            excerpt(interface)
        ));
    };
    let as_export = format!("{}/workload@{v}", version::PACKAGE);
    version::check(std::iter::empty(), std::iter::once(as_export.as_str()))
        .map(|_| ())
        .map_err(|_| {
            let interface = excerpt(interface);
            format!(
                "the package needs {interface}, but this runner supports {}; use a runner that supports {interface}, or a version of the package built for {}@{}",
                version::supported(),
                version::PACKAGE,
                version::VERSION
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "team-a/chat-mix"
version = "1.2.0"
description = "Chat mix."
authors = ["Ada"]
entry = "chat_mix.rhai"
interface = "bench:scenario@0.3.0"
data = ["data/convs.json"]

[params.requests]
default = 500
help = "number of conversations"

[target]
server-flags = "--max-num-seqs 256"
"#;

    #[test]
    fn a_complete_manifest_parses() {
        let m = Manifest::parse(GOOD, "scenario.toml").unwrap();
        assert_eq!(m.name, "team-a/chat-mix");
        assert_eq!(m.archive_name(), "team-a-chat-mix-1.2.0.scenario.tar.gz");
        assert_eq!(m.params["requests"].value(), Ok(ParamValue::Int(500)));
        assert_eq!(
            m.target.unwrap().server_flags.as_deref(),
            Some("--max-num-seqs 256")
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (
                "version = \"1.2.0\"",
                "version = \"one\"",
                "`version` must be a semantic version",
            ),
            (
                "entry = \"chat_mix.rhai\"",
                "entry = \"../x.rhai\"",
                "`entry` must be a relative path",
            ),
            (
                "entry = \"chat_mix.rhai\"",
                "entry = \"x.py\"",
                "`entry` must be a .rhai",
            ),
            (
                "name = \"team-a/chat-mix\"",
                "name = \"a/b/c\"",
                "`name` must be",
            ),
            (
                "data = [\"data/convs.json\"]",
                "data = [\"/etc\"]",
                "`data` must be a relative path",
            ),
            (
                "default = 500",
                "default = [1]",
                "`params.requests.default`",
            ),
            (
                "entry = \"chat_mix.rhai\"",
                "entry = \"chat\\u001b[2Jmix.rhai\"",
                "`entry` must not hold control characters or backslashes, got `chat\\u{1b}[2Jmix.rhai`",
            ),
            (
                "help = \"number of conversations\"",
                "\"h\\u001b[31m\" = \"x\"",
                "unknown field `h\\u{1b}[31m`",
            ),
            (
                "help = \"number of conversations\"",
                "hlep = \"x\"",
                "unknown field `hlep`",
            ),
        ];
        for (from, to, expect) in cases {
            let text = GOOD.replace(from, to);
            let e = Manifest::parse(&text, "scenario.toml").unwrap_err();
            assert!(e.contains(expect), "{to}: {e}");
        }
    }

    /// A megabyte of name (valid characters) or of any quoted field gives one short line.
    #[test]
    fn overlong_fields_are_refused_in_a_short_line() {
        let long = "a".repeat(1 << 20);
        for (from, field) in [
            ("name = \"team-a/chat-mix\"", "name"),
            ("version = \"1.2.0\"", "version"),
            ("description = \"Chat mix.\"", "description"),
        ] {
            let text = GOOD.replace(from, &format!("{field} = \"{long}\""));
            let e = Manifest::parse(&text, "scenario.toml").unwrap_err();
            assert!(
                e.contains(&format!("`{field}` is 1048576 bytes long")),
                "{e}"
            );
            assert!(e.len() < 300, "{e}");
        }
        let at_limit = GOOD.replace("team-a/chat-mix", &"a".repeat(MAX_NAME_BYTES));
        assert!(Manifest::parse(&at_limit, "scenario.toml").is_ok());
        for (from, to) in [
            (
                "entry = \"chat_mix.rhai\"",
                format!("entry = \"{long}.py\""),
            ),
            ("help = \"number of conversations\"", format!("{long} = 1")),
            (
                "data = [\"data/convs.json\"]",
                format!("data = [\"/{long}\"]"),
            ),
        ] {
            let e = Manifest::parse(&GOOD.replace(from, &to), "scenario.toml").unwrap_err();
            assert!(
                e.len() < 400 && e.contains("bytes)"),
                "{}",
                &e[..e.len().min(400)]
            );
        }
    }

    #[test]
    fn another_interface_version_is_refused_naming_both() {
        let text = GOOD.replace("bench:scenario@0.3.0", "bench:scenario@2.0.0");
        let e = Manifest::parse(&text, "scenario.toml").unwrap_err();
        assert!(
            e.contains("bench:scenario@2.0.0") && e.contains("bench:scenario@0.3.0"),
            "{e}"
        );
        assert!(check_interface("bench:scenario@0.3.1").is_ok());
        // Packages of the previous version run too (wasm/version.rs).
        assert!(check_interface("bench:scenario@0.2.4").is_ok());
    }
}
