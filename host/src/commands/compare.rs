//! `runner compare A.json B.json …`: each saved result against the first.

use anyhow::Result;

use crate::commands::cli::CompareArgs;
use crate::outputs::report;

pub fn compare(a: CompareArgs) -> Result<i32> {
    let mut loaded = a
        .results
        .iter()
        .map(|p| report::compare::load(p))
        .collect::<Result<Vec<_>, _>>()?;
    report::compare::label(&mut loaded);
    let r = report::compare::compare(&loaded, a.markdown, a.force)?;
    for w in &r.warnings {
        crate::errln!("warning: {w}");
    }
    if a.headline {
        // The same checks of the workloads ran above; only the output is shorter.
        crate::out!("{}", report::compare::headline::table(&loaded, a.markdown));
    } else {
        crate::out!("{}", r.text);
    }
    Ok(0)
}
