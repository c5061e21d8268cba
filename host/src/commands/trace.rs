//! `runner trace analyze FILE`: what a trace will do before it is replayed.

use anyhow::Result;

use crate::commands::cli::TraceAnalyzeArgs;

pub fn analyze(a: TraceAnalyzeArgs) -> Result<()> {
    anyhow::bail!("cannot analyze {}: not built yet", a.file.display())
}
