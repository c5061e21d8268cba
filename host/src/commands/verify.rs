//! `runner verify SCENARIO`: a package's digest, manifest, interface, parameters and phases.

use anyhow::{anyhow, bail, Result};

use super::load_tokenizer;
use super::source::Source;
use crate::commands::cli::VerifyArgs;
use crate::workloads::scenario::Params;

pub fn verify(a: VerifyArgs) -> Result<()> {
    let expected = match &a.expect {
        Some(e) => Some(
            crate::workloads::package::oci::digest_hex(e).ok_or_else(|| {
                anyhow!("--expect {e}: a digest is sha256: and 64 lowercase hex digits")
            })?,
        ),
        None => None,
    };
    // Before any of its code is loaded: a package that is not the expected one goes no
    // further.
    let source = Source::resolve(&a.scenario)?;
    let actual = source.digest()?;
    if let Some(expected) = expected.filter(|e| *e != actual) {
        bail!(
            "{} is not the expected package: expected sha256:{expected}, actual sha256:{actual}",
            a.scenario.scenario.display(),
        );
    }
    let tokenizer = load_tokenizer("o200k_base")?;
    let mut loaded = source.load(tokenizer, &[], true)?;
    let params = Params::resolve(
        &a.scenario.scenario.display().to_string(),
        &loaded.description.params,
        &[],
    )?;
    loaded.scenario.configure(&params)?;
    let phases = loaded.scenario.phases()?;
    // A fixed count, or the fixed start of an adaptive scenario.
    let mut phase_count = counted(phases.len(), "phase");
    if loaded.scenario.has_next_phase() {
        phase_count.push_str(", then adaptive");
    }
    let param_count = counted(loaded.description.params.len(), "parameter");
    match &loaded.package {
        Some(p) => crate::outln!(
            "ok: {} {} — digest {} matches its content; interface {}; entry {} loads; {}, {}",
            p.manifest.name,
            p.manifest.version,
            p.digest,
            p.manifest.interface,
            p.manifest.entry,
            param_count,
            phase_count
        ),
        None => crate::outln!(
            "ok: {} (a single file, no manifest) — sha256 {}; {}, {}",
            a.scenario.scenario.display(),
            loaded.digest,
            param_count,
            phase_count
        ),
    }
    Ok(())
}

/// `1 phase`, `12 phases`.
fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}
