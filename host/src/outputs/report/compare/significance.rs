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
/// and each phase's values by run. `Ok(None)` when `top` is not a series; `Err` (what is
/// wrong, naming the phase and key) when a figure's values are not numbers.
///
/// The mean shown is the mean of the values Welch's test reads, not the file's `mean`:
/// a file whose `mean` was edited would otherwise show equal means beside a test that
/// finds them different.
#[allow(clippy::type_complexity)]
pub fn load_series(
    top: &Map<String, Value>,
) -> Result<Option<(Vec<(String, Map<String, Value>)>, Vec<RunValues>)>, String> {
    let Some(Value::Object(_)) = top.get(crate::outputs::report::json::result_file::SERIES_KEY)
    else {
        return Ok(None);
    };
    let Some(list) = top.get("phases").and_then(Value::as_array) else {
        return Ok(None);
    };
    let mut phases = Vec::new();
    let mut runs = Vec::new();
    for p in list {
        let Some(name) = p.get("phase").and_then(Value::as_str) else {
            return Ok(None);
        };
        let Some(figures) = p.get("figures").and_then(Value::as_array) else {
            return Ok(None);
        };
        let (mut means, mut values) = (Map::new(), RunValues::new());
        for f in figures {
            let Some(key) = f.get("key").and_then(Value::as_str) else {
                return Ok(None);
            };
            let v = run_values(f.get("values"))
                .map_err(|what| format!("phase `{name}`, figure `{key}`: {what}"))?;
            // As the series wrote it: a mean over two runs or more.
            if v.len() >= 2 {
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                means.insert(key.to_string(), Value::from(mean));
            }
            values.insert(key.to_string(), v);
        }
        phases.push((name.to_string(), means));
        runs.push(values);
    }
    Ok(Some((phases, runs)))
}

/// A figure's `values`: numbers, or null for a run without one; anything else is refused.
fn run_values(values: Option<&Value>) -> Result<Vec<f64>, String> {
    let Some(Value::Array(list)) = values else {
        return Err("`values` is not an array of numbers".into());
    };
    let mut out = Vec::new();
    for (i, v) in list.iter().enumerate() {
        match v {
            Value::Null => {}
            Value::Number(n) => out.push(n.as_f64().unwrap_or(f64::NAN)),
            other => {
                return Err(format!(
                    "`values[{i}]` is {}, not a number or null",
                    super::json_type(other)
                ))
            }
        }
    }
    Ok(out)
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

    fn written(dir: &std::path::Path, name: &str, v: Value) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        path
    }

    fn series(values: Value, mean: f64) -> Value {
        serde_json::json!({
            "series": {"runs": []},
            "phases": [{"phase": "main", "runs": 3, "figures": [
                {"key": "mean_ttft_ms", "label": "Mean TTFT (ms)", "better": "lower",
                 "values": values, "n": 3, "mean": mean}
            ]}]
        })
    }

    /// A series whose `mean` was edited to equal the other's: the table's mean is the
    /// values' mean, the one Welch's test reads.
    #[test]
    fn the_mean_shown_is_the_mean_of_the_values_tested() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(
            dir.path(),
            "b.json",
            series(serde_json::json!([200.0, 201.0, null, 199.0]), 100.0),
        );
        let b = super::super::load(&path).unwrap();
        assert_eq!(b.phases[0].1["mean_ttft_ms"], Value::from(200.0));
        assert_eq!(
            b.runs.unwrap()[0]["mean_ttft_ms"],
            vec![200.0, 201.0, 199.0]
        );
    }

    /// A value of another type is refused in one line naming the file, phase and key,
    /// where it was left out of the test without a word.
    #[test]
    fn values_of_the_wrong_type_are_refused_with_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(
            dir.path(),
            "s.json",
            series(serde_json::json!([200.0, "201", 199.0]), 200.0),
        );
        let e = super::super::load(&path).err().unwrap().to_string();
        assert!(
            e.starts_with(&format!("{} is not a result file", path.display()))
                && e.ends_with("phase `main`, figure `mean_ttft_ms`: `values[1]` is a string, not a number or null"),
            "{e}"
        );
        let plain = written(
            dir.path(),
            "p.json",
            serde_json::json!({"output_throughput": 5.0, "mean_ttft_ms": "12"}),
        );
        let e = super::super::load(&plain).err().unwrap().to_string();
        assert!(
            e.ends_with("phase `vllm bench serve`: `mean_ttft_ms` is a string, not a number"),
            "{e}"
        );
    }
}
