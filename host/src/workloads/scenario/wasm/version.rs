//! Which version of the `bench:scenario` WIT package a component was built against, read
//! from its import and export names (`bench:scenario/workload@0.4.0`), and whether this
//! runner can run it. Checked before linking, so that the host links the bindings of that
//! version (the way Spin keeps components of older WIT versions running), and so that a
//! version it cannot run gets a message naming the versions instead of a linker error
//! about a missing import.

/// The WIT package this runner implements (wit/scenario.wit).
pub const PACKAGE: &str = "bench:scenario";
pub const VERSION: &str = "0.4.0";
/// The earlier versions still run, newest first, each through a frozen copy of its WIT
/// (wit/compat/VERSION/scenario.wit) and converted to and from the current types.
pub const EARLIER: [&str; 2] = ["0.3.0", "0.2.0"];

/// The interface versions this runner links, each with bindings of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// `VERSION`: wit/scenario.wit.
    Current,
    /// `EARLIER[0]`: wit/compat/0.3.0/scenario.wit (no sessions, no tools).
    V0_3,
    /// `EARLIER[1]`: wit/compat/0.2.0/scenario.wit.
    V0_2,
}

impl Interface {
    /// Each interface with the version it implements, in the order they are tried.
    const ALL: [(Interface, &'static str); 3] = [
        (Interface::Current, VERSION),
        (Interface::V0_3, EARLIER[0]),
        (Interface::V0_2, EARLIER[1]),
    ];
}

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

/// The bindings that run a component built against `version`, if any.
fn interface_for(version: &str) -> Option<Interface> {
    let theirs = parse(version)?;
    Interface::ALL
        .into_iter()
        .find(|(_, ours)| parse(ours).is_some_and(|ours| compatible(ours, theirs)))
        .map(|(interface, _)| interface)
}

/// The versions this runner runs, for messages: each earlier one by its frozen version
/// (a later patch of it runs too).
pub fn supported() -> String {
    let earlier: Vec<String> = EARLIER.iter().map(|v| format!("{PACKAGE}@{v}")).collect();
    format!(
        "{PACKAGE}@{VERSION} (and components built against the earlier {})",
        earlier.join(" and ")
    )
}

/// Checks the component's interface names and says which bindings run it. `imports` and
/// `exports` are the component's top-level names; all of this package's must name one
/// interface version.
pub fn check<'a>(
    imports: impl Iterator<Item = &'a str>,
    exports: impl Iterator<Item = &'a str>,
) -> Result<Interface, String> {
    let exports: Vec<&str> = exports.collect();
    let prefix = format!("{PACKAGE}/");
    let mut found: Option<(Interface, &str)> = None;
    for name in imports.chain(exports.iter().copied()) {
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let version = rest.split_once('@').map(|(_, v)| v).unwrap_or("");
        let Some(interface) = interface_for(version) else {
            let theirs = if version.is_empty() {
                "an unversioned package".to_string()
            } else {
                format!("{PACKAGE}@{version}")
            };
            return Err(format!(
                "the component was built against {theirs} (it uses `{name}`), but this runner supports {}; rebuild the scenario with an SDK for {PACKAGE}@{VERSION}",
                supported()
            ));
        };
        match found {
            Some((first, other)) if first != interface => {
                return Err(format!(
                    "the component mixes versions of {PACKAGE}: it uses `{other}` and `{name}`"
                ))
            }
            _ => found = Some((interface, name)),
        }
    }
    let workload = format!("{PACKAGE}/workload@");
    match found {
        Some((interface, _)) if exports.iter().any(|e| e.starts_with(&workload)) => Ok(interface),
        _ => {
            let listed = if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            };
            Err(format!(
                "the component is not a scenario: it must export {PACKAGE}/workload@{VERSION}, but it exports {listed}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface_of(version: &str) -> Result<Interface, String> {
        let imports = [
            "wasi:cli/environment@0.2.6".to_string(),
            format!("bench:scenario/host@{version}"),
        ];
        let exports = [format!("bench:scenario/workload@{version}")];
        check(
            imports.iter().map(String::as_str),
            exports.iter().map(String::as_str),
        )
    }

    #[test]
    fn the_current_and_the_two_earlier_minors_are_run_each_by_its_bindings() {
        assert_eq!(interface_of("0.4.0"), Ok(Interface::Current));
        // A later patch release of the same minor is compatible.
        assert_eq!(interface_of("0.4.7"), Ok(Interface::Current));
        assert_eq!(interface_of("0.3.0"), Ok(Interface::V0_3));
        assert_eq!(interface_of("0.3.7"), Ok(Interface::V0_3));
        assert_eq!(interface_of("0.2.0"), Ok(Interface::V0_2));
        assert_eq!(interface_of("0.2.3"), Ok(Interface::V0_2));
    }

    #[test]
    fn other_versions_are_refused_naming_the_supported_ones() {
        // For 0.x, a different minor is a different major: components built against
        // 0.1 (before `next-phase`) are refused, as are 1.0 and the next minor.
        for theirs in ["1.0.0", "0.1.0", "0.5.0"] {
            let e = interface_of(theirs).unwrap_err();
            assert!(
                e.contains(&format!("built against bench:scenario@{theirs}")),
                "{e}"
            );
            assert!(
                e.contains("supports bench:scenario@0.4.0 (and components built against the earlier bench:scenario@0.3.0 and bench:scenario@0.2.0)"),
                "{e}"
            );
        }
        let e = interface_of("").unwrap_err();
        assert!(e.contains("an unversioned package"), "{e}");
    }

    #[test]
    fn a_component_naming_two_versions_is_refused() {
        let e = check(
            ["bench:scenario/host@0.3.0"].into_iter(),
            ["bench:scenario/workload@0.4.0"].into_iter(),
        )
        .unwrap_err();
        assert!(e.contains("mixes versions"), "{e}");
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
        let sdk = version_after("../sdk/rust/src/lib.rs", "pub const WIT_VERSION: &str = \"");
        assert_eq!(wit, VERSION, "wit/scenario.wit against the host's VERSION");
        assert_eq!(
            sdk, VERSION,
            "sdk/rust/src/lib.rs WIT_VERSION against the host's VERSION"
        );
        // The Python and JavaScript helpers name it too, and the JavaScript one imports
        // the host interface by it: a helper left behind builds components of the old
        // version (or none).
        for (file, marker) in [
            (
                "../sdk/python/bench_scenario/__init__.py",
                "WIT_VERSION = \"",
            ),
            (
                "../sdk/js/bench_scenario/index.js",
                "export const WIT_VERSION = \"",
            ),
            (
                "../sdk/js/bench_scenario/host.js",
                "from \"bench:scenario/host@",
            ),
        ] {
            assert_eq!(
                version_after(file, marker),
                VERSION,
                "{file} against VERSION"
            );
        }
        let exports = [format!("{PACKAGE}/workload@{sdk}")];
        assert_eq!(
            check([].into_iter(), exports.iter().map(String::as_str)),
            Ok(Interface::Current)
        );
        for earlier in EARLIER {
            let file = format!("../wit/compat/{earlier}/scenario.wit");
            let frozen = version_after(&file, "package bench:scenario@");
            assert_eq!(frozen, earlier, "{file} against EARLIER");
        }
    }
}
