//! Whether a difference is significant, when both results are series of repeated runs
//! (`--repeat`, result.json with `series`): Welch's t-test (unequal variances,
//! Welch–Satterthwaite degrees of freedom) on the runs' values of each figure, two-sided,
//! at 95 % (`metrics::spread`). A single run has no spread to test against, so a
//! comparison with one says that no significance can be given.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::row::Row;
use super::LoadedResult;
use crate::measuring::metrics::spread::Welch;

/// Each figure's values by run, of one phase of a series.
pub type RunValues = BTreeMap<String, Vec<f64>>;

/// The phases of a series result.json: (name, each figure's mean as the tables read it),
/// and each phase's values by run. `None` when `top` is not a series.
#[allow(clippy::type_complexity)]
pub fn load_series(
    top: &Map<String, Value>,
) -> Option<(Vec<(String, Map<String, Value>)>, Vec<RunValues>)> {
    let list = top.get(crate::outputs::report::json::result_file::SERIES_KEY)?;
    list.as_object()?;
    let mut phases = Vec::new();
    let mut runs = Vec::new();
    for p in top.get("phases")?.as_array()? {
        let name = p.get("phase")?.as_str()?.to_string();
        let (mut means, mut values) = (Map::new(), RunValues::new());
        for f in p.get("figures")?.as_array()? {
            let key = f.get("key")?.as_str()?.to_string();
            if let Some(mean) = f.get("mean").and_then(Value::as_f64) {
                means.insert(key.clone(), Value::from(mean));
            }
            let v: Vec<f64> = f
                .get("values")?
                .as_array()?
                .iter()
                .filter_map(Value::as_f64)
                .collect();
            values.insert(key, v);
        }
        phases.push((name, means));
        runs.push(values);
    }
    Some((phases, runs))
}

/// The `significant?` column and the line under the table.
pub struct Significance {
    /// One cell per row; `None` when not both are series.
    pub cells: Option<Vec<String>>,
    pub line: Option<String>,
}

/// `yes (p=0.0012)` where Welch's test rejects equal means at 95 %, `no (p=0.43)` where
/// it does not, `-` where a side lacks the figure's runs.
fn cell(a: &[f64], b: &[f64]) -> String {
    match Welch::test(a, b) {
        Some(w) => {
            let p = if w.p_value < 1e-4 {
                "p<0.0001".to_string()
            } else {
                format!("p={:.4}", w.p_value)
            };
            format!("{} ({p})", if w.significant() { "yes" } else { "no" })
        }
        None => "-".into(),
    }
}

/// Phase `i` of `base` against phase `j` of `other`, over `rows`.
pub fn of(
    base: &LoadedResult,
    i: usize,
    other: &LoadedResult,
    j: usize,
    rows: &[Row],
) -> Significance {
    let (ra, rb) = (
        base.runs.as_ref().and_then(|r| r.get(i)),
        other.runs.as_ref().and_then(|r| r.get(j)),
    );
    match (ra, rb) {
        (None, None) => Significance {
            cells: None,
            line: None,
        },
        (Some(a), Some(b)) => {
            let cells = rows
                .iter()
                .map(|r| match (a.get(&r.key), b.get(&r.key)) {
                    (Some(x), Some(y)) => cell(x, y),
                    _ => "-".into(),
                })
                .collect();
            let n = |v: &RunValues| v.values().map(Vec::len).max().unwrap_or(0);
            Significance {
                cells: Some(cells),
                line: Some(format!(
                    "Significant?: Welch's t-test on the runs' values ({} runs of {}, {} of {}), two-sided, at 95%: yes where p < 0.05; values are the means over the runs",
                    n(a), base.label, n(b), other.label
                )),
            }
        }
        _ => {
            let single = if ra.is_none() { base } else { other };
            Significance {
                cells: None,
                line: Some(format!(
                    "No significance can be given: {} is a single run (it needs a series of repeated runs on both sides, --repeat N); the series' values are its means over the runs",
                    single.label
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_say_yes_or_no_with_the_p_value() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let shifted: Vec<f64> = a.iter().map(|v| v + 10.0).collect();
        assert_eq!(cell(&a, &shifted), "yes (p<0.0001)");
        let close: Vec<f64> = a.iter().map(|v| v + 0.1).collect();
        assert!(
            cell(&a, &close).starts_with("no (p=0.8"),
            "{}",
            cell(&a, &close)
        );
        assert_eq!(cell(&a, &[1.0]), "-");
    }
}
