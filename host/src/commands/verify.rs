//! `runner verify SCENARIO`: a package's digest, manifest, interface, parameters and phases.

use anyhow::{anyhow, bail, Result};

use super::load_tokenizer;
use super::source::load_scenario;
use crate::cli::VerifyArgs;
use crate::scenario::Params;

pub fn verify(a: VerifyArgs) -> Result<()> {
    let expected = match &a.expect {
        Some(e) => Some(crate::package::oci::digest_hex(e).ok_or_else(|| {
            anyhow!("--expect {e}: a digest is sha256: and 64 lowercase hex digits")
        })?),
        None => None,
    };
    let tokenizer = load_tokenizer("o200k_base")?;
    let mut loaded = load_scenario(&a.scenario, tokenizer, &[], true)?;
    // Before the scenario is configured or asked for its phases: a package that is not
    // the expected one goes no further.
    if let Some(expected) = expected.filter(|e| *e != loaded.digest) {
        bail!(
            "{} is not the expected package: expected sha256:{expected}, actual sha256:{}",
            a.scenario.scenario.display(),
            loaded.digest
        );
    }
    let params = Params::resolve(
        &a.scenario.scenario.display().to_string(),
        &loaded.description.params,
        &[],
    )?;
    loaded.scenario.configure(&params)?;
    let phases = loaded.scenario.phases()?;
    let phases = if loaded.scenario.has_next_phase() {
        format!("{} (then adaptive)", phases.len())
    } else {
        phases.len().to_string()
    };
    match &loaded.package {
        Some(p) => crate::outln!(
            "ok: {} {} — digest {} matches its content; interface {}; entry {} loads; {} parameters, {} phases",
            p.manifest.name,
            p.manifest.version,
            p.digest,
            p.manifest.interface,
            p.manifest.entry,
            loaded.description.params.len(),
            phases.len()
        ),
        None => crate::outln!(
            "ok: {} (a single file, no manifest) — sha256 {}; {} parameters, {} phases",
            a.scenario.scenario.display(),
            loaded.digest,
            loaded.description.params.len(),
            phases.len()
        ),
    }
    Ok(())
}
