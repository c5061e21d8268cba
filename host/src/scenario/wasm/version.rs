//! Which version of the `bench:scenario` WIT package a component was built against, read
//! from its import and export names (`bench:scenario/workload@0.2.0`), and whether this
//! runner can run it. Checked before linking, so a mismatch gets a message naming both
//! versions instead of a linker error about a missing import.

/// The WIT package this runner implements (wit/scenario.wit).
pub const PACKAGE: &str = "bench:scenario";
pub const VERSION: &str = "0.2.0";

/// `major.minor.patch` of a WIT package version (pre-release tags are ignored).
fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Semver compatibility: the same major version, and for 0.x the same minor.
fn compatible(ours: (u64, u64, u64), theirs: (u64, u64, u64)) -> bool {
    if ours.0 == 0 {
        theirs.0 == 0 && theirs.1 == ours.1
    } else {
        theirs.0 == ours.0
    }
}

/// Checks the component's interface names. `imports` and `exports` are the component's
/// top-level names.
pub fn check<'a>(
    imports: impl Iterator<Item = &'a str>,
    exports: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    let ours = parse(VERSION).expect("VERSION is a valid version");
    let exports: Vec<&str> = exports.collect();
    let prefix = format!("{PACKAGE}/");
    let mut seen: Vec<(String, &str)> = vec![];
    for name in imports.chain(exports.iter().copied()) {
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let version = rest.split_once('@').map(|(_, v)| v).unwrap_or("");
        seen.push((version.to_string(), name));
    }
    for (version, name) in &seen {
        let ok = parse(version).is_some_and(|theirs| compatible(ours, theirs));
        if !ok {
            let theirs = if version.is_empty() {
                "an unversioned package".to_string()
            } else {
                format!("{PACKAGE}@{version}")
            };
            return Err(format!(
                "the component was built against {theirs} (it uses `{name}`), but this runner supports {PACKAGE}@{VERSION}; rebuild the scenario with an SDK for {PACKAGE}@{VERSION}"
            ));
        }
    }
    let workload = format!("{PACKAGE}/workload@");
    if !exports.iter().any(|e| e.starts_with(&workload)) {
        let listed = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "the component is not a scenario: it must export {PACKAGE}/workload@{VERSION}, but it exports {listed}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_package_version_passes() {
        let imports = ["wasi:cli/environment@0.2.6", "bench:scenario/host@0.2.0"];
        let exports = ["bench:scenario/workload@0.2.0"];
        assert!(check(imports.into_iter(), exports.into_iter()).is_ok());
        // A later patch release of the same minor is compatible.
        assert!(check(
            ["bench:scenario/host@0.2.3"].into_iter(),
            ["bench:scenario/workload@0.2.3"].into_iter()
        )
        .is_ok());
    }

    #[test]
    fn other_major_version_is_refused_naming_both() {
        let e = check(
            ["bench:scenario/host@1.0.0"].into_iter(),
            ["bench:scenario/workload@1.0.0"].into_iter(),
        )
        .unwrap_err();
        assert!(
            e.contains("bench:scenario@1.0.0") && e.contains("bench:scenario@0.2.0"),
            "{e}"
        );
        // For 0.x, a different minor is a different major: components built against
        // 0.1 (before `next-phase`) are refused.
        let e = check(
            [].into_iter(),
            ["bench:scenario/workload@0.1.0"].into_iter(),
        )
        .unwrap_err();
        assert!(e.contains("bench:scenario@0.1.0"), "{e}");
    }

    #[test]
    fn a_component_without_the_workload_is_not_a_scenario() {
        let e = check(
            ["wasi:cli/stdout@0.2.6"].into_iter(),
            ["wasi:cli/run@0.2.6"].into_iter(),
        )
        .unwrap_err();
        assert!(
            e.contains("not a scenario") && e.contains("wasi:cli/run@0.2.6"),
            "{e}"
        );
    }

    /// The version written in a source file after `marker`, up to the first character
    /// that is not part of a version.
    fn version_after(file: &str, marker: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).expect("the file is in the repository");
        let at = text
            .find(marker)
            .unwrap_or_else(|| panic!("{file} has no `{marker}`"));
        text[at + marker.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
            .collect()
    }

    /// The WIT package, the host and the SDK name one version: a component built with the
    /// SDK then always passes `check`.
    #[test]
    fn the_wit_package_the_host_and_the_sdk_agree() {
        let wit = version_after("../wit/scenario.wit", "package bench:scenario@");
        let sdk = version_after("../sdk/src/lib.rs", "pub const WIT_VERSION: &str = \"");
        assert_eq!(wit, VERSION, "wit/scenario.wit against the host's VERSION");
        assert_eq!(
            sdk, VERSION,
            "sdk/src/lib.rs WIT_VERSION against the host's VERSION"
        );
        let exports = [format!("{PACKAGE}/workload@{sdk}")];
        assert!(check([].into_iter(), exports.iter().map(String::as_str)).is_ok());
    }
}
