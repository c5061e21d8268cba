//! A scenario named on the command line, loaded: a file, a package directory or archive,
//! or a package found in the scenario path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use sha2::Digest;

use crate::commands::cli::ScenarioArg;
use crate::workloads::package::{self, Package, Resolved};
use crate::workloads::scenario::files::FileAccess;
use crate::workloads::scenario::{self, Description, HostContext, Scenario};
use crate::workloads::tokenizer::Tokenizer;

fn scenario_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A scenario ready to configure, with its description (package defaults applied) and
/// where it came from.
pub struct LoadedScenario {
    pub scenario: Box<dyn Scenario>,
    pub description: Description,
    pub package: Option<Package>,
    /// What identifies the workload's code: the package digest, or the sha256 of the file.
    pub digest: String,
}

pub fn load_scenario(
    arg: &ScenarioArg,
    tokenizer: Arc<Tokenizer>,
    data_dirs: &[PathBuf],
    quiet: bool,
) -> Result<LoadedScenario> {
    Source::resolve(arg)?.load(tokenizer, data_dirs, quiet)
}

/// A scenario argument resolved to its entry file (and package), nothing of it run yet:
/// `verify --expect` checks the digest here, before any code of the package is loaded.
pub struct Source {
    entry: PathBuf,
    package: Option<Package>,
}

impl Source {
    pub fn resolve(arg: &ScenarioArg) -> Result<Source> {
        let search = package::search_path(&arg.scenario_path);
        let access = package::oci::Access {
            insecure: arg.insecure_registry.clone(),
        };
        let (entry, package) =
            match package::resolve(&arg.scenario, &search, &access).map_err(|e| anyhow!(e))? {
                Resolved::File(path) => (path, None),
                Resolved::Package(p) => (p.entry(), Some(*p)),
            };
        Ok(Source { entry, package })
    }

    /// What identifies the workload's code: the package digest, or the sha256 of the file.
    pub fn digest(&self) -> Result<String> {
        Ok(match &self.package {
            Some(p) => p.digest.clone(),
            None => hex::encode(sha2::Sha256::digest(
                std::fs::read(&self.entry)
                    .with_context(|| format!("cannot read {}", self.entry.display()))?,
            )),
        })
    }

    pub fn load(
        self,
        tokenizer: Arc<Tokenizer>,
        data_dirs: &[PathBuf],
        quiet: bool,
    ) -> Result<LoadedScenario> {
        for d in data_dirs {
            if !d.is_dir() {
                bail!("--data-dir {} is not a directory", d.display());
            }
        }
        let files = match &self.package {
            Some(p) => FileAccess::package(&p.root, data_dirs),
            None => FileAccess::lone_file(&scenario_dir(&self.entry), data_dirs)
                .map_err(|e| anyhow!("{}: {e}", self.entry.display()))?,
        };
        let digest = self.digest()?;
        let scenario = scenario::load(&self.entry, HostContext::new(tokenizer, files, quiet))?;
        let mut description = scenario.describe().clone();
        if let Some(p) = &self.package {
            p.apply_defaults(&mut description).map_err(|e| anyhow!(e))?;
        }
        Ok(LoadedScenario {
            scenario,
            description,
            package: self.package,
            digest,
        })
    }
}
