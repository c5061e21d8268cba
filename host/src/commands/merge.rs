//! `runner merge DIR...`: one report from the shards of a run, written and printed as a
//! single run's is.

use anyhow::Result;

use crate::commands::cli::MergeArgs;
use crate::measuring::thresholds::EXIT_THRESHOLDS_FAILED;
use crate::outputs::report::{output, text};
use crate::sharding::merge;

pub fn merge(a: MergeArgs) -> Result<i32> {
    let merge::Merged { report, warnings } = merge::merge(&a.dirs, &a.thresholds)?;
    for w in &warnings {
        crate::errln!("warning: {w}");
    }
    let body = text::render_body(&report);
    if !a.quiet {
        crate::out!("{}", text::render_header(&report.header));
        crate::outln!();
    }
    // The files first, as `run` does: stdout may be a pipe closed early.
    if let Some(out) = &a.output {
        let same = |dir: &std::path::PathBuf| {
            let real = |p: &std::path::Path| std::fs::canonicalize(p).ok();
            real(dir).is_some() && real(dir) == real(out)
        };
        if a.dirs.iter().any(same) {
            anyhow::bail!(
                "--output {} is one of the shards' directories: give the merge a directory of its own",
                out.display()
            );
        }
        let _claim = crate::outputs::output_dir::claim(out)?;
        merge::gather_records(&a.dirs, out)?;
        merge::copy_server_samples(&a.dirs, out)?;
        output::write_outputs(&report, out)?;
    }
    crate::out!("{body}");
    Ok(match report.failed_thresholds() {
        Some(line) => {
            crate::errln!("error: {line}");
            EXIT_THRESHOLDS_FAILED
        }
        None => 0,
    })
}
