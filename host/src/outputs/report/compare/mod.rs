//! `runner compare A.json B.json [C.json …]`: each result against the first, metric by
//! metric, and the one-line summary of the GPUStack reference ("B is faster by N tok/s
//! (P %); Mean TPOT reduced by M ms (Q %)"). Reads result.json as `--output` and
//! `--save-result` write it, and vLLM's own `--save-result` files.

pub mod headline;
mod pairs;
mod row;
mod server;
mod significance;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use crate::measuring::metrics::catalogue::Better;
use crate::measuring::metrics::catalogue::{self, InResult, Latency, LATENCIES, SCALARS};

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a result file (JSON with the keys of `vllm bench serve --save-result`): {message}")]
    Format { path: PathBuf, message: String },
    #[error("{0} (pass --force to compare anyway)")]
    Workload(String),
    #[error("the results have no phase in common: {0}")]
    NoCommonPhase(String),
    #[error(transparent)]
    Bounded(#[from] crate::safeguards::bounded_file::BoundedReadError),
}

/// The largest result file `compare` reads. A result.json holds a few hundred numbers per
/// phase and the server's metrics (a handful of series per phase, never a point per
/// request): a few MiB for a long many-phase run; vLLM's `--save-detailed` adds a few
/// numbers and the generated text per request. 64 MiB is far beyond either.
pub const RESULT_FILE_LIMIT: u64 = 64 << 20;

/// The name of the one phase of a `vllm bench serve --save-result` file.
pub const VLLM_PHASE: &str = "vllm bench serve";

/// The versions that wrote a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    pub runner: String,
    pub wit: String,
}

/// The warning line when `a` and `b` were written by different runner or WIT versions,
/// naming both of each that differ.
pub fn versions_differ(a: &str, va: &Versions, b: &str, vb: &Versions) -> Option<String> {
    let mut differ = Vec::new();
    if va.runner != vb.runner {
        differ.push(format!("runner {} and {}", va.runner, vb.runner));
    }
    if va.wit != vb.wit {
        differ.push(format!("WIT {} and {}", va.wit, vb.wit));
    }
    (!differ.is_empty()).then(|| {
        format!(
            "{a} and {b} were written by different versions ({}): their figures may not be measured alike",
            differ.join(", ")
        )
    })
}

/// One loaded result file.
pub struct LoadedResult {
    pub label: String,
    pub path: PathBuf,
    /// (phase name, vLLM-keyed object) in run order.
    pub phases: Vec<(String, Map<String, Value>)>,
    /// `runner` section of the first phase, if the file has one.
    pub runner: Option<Map<String, Value>>,
    /// A `vllm bench serve --save-result` file: one flat phase, no `runner` section.
    pub vllm: bool,
    /// A series of repeated runs (`--repeat`): each phase's figures' values by run, in
    /// the order of `phases` (whose values are the means over the runs).
    pub runs: Option<Vec<significance::RunValues>>,
}

pub fn load(path: &Path) -> Result<LoadedResult, CompareError> {
    let text =
        crate::safeguards::bounded_file::read_to_string(path, RESULT_FILE_LIMIT, "a result file")?;
    let format = |message: String| CompareError::Format {
        path: path.to_path_buf(),
        message,
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| format(e.to_string()))?;
    let Value::Object(top) = value else {
        return Err(format("not a JSON object".into()));
    };
    if top.contains_key(crate::outputs::report::json::result_file::SERIES_KEY) {
        let (phases, runs) = significance::load_series(&top)
            .map_err(&format)?
            .filter(|(phases, _)| !phases.is_empty())
            .ok_or_else(|| format("a `series` without its phases and figures".into()))?;
        return Ok(LoadedResult {
            label: String::new(),
            path: path.to_path_buf(),
            phases,
            runner: top.get("runner").and_then(Value::as_object).cloned(),
            vllm: false,
            runs: Some(runs),
        });
    }
    let vllm = !top.contains_key("phases") && !top.contains_key("runner");
    let objects: Vec<Map<String, Value>> = match top.get("phases") {
        Some(Value::Array(list)) => list.iter().filter_map(|v| v.as_object().cloned()).collect(),
        _ => vec![top.clone()],
    };
    let mut phases = Vec::new();
    for (i, o) in objects.into_iter().enumerate() {
        if !o.contains_key("total_token_throughput") && !o.contains_key("output_throughput") {
            return Err(format(
                "no `output_throughput` or `total_token_throughput`".into(),
            ));
        }
        let name = match o.get("phase").and_then(Value::as_str) {
            Some(name) => name.to_string(),
            None if vllm => VLLM_PHASE.to_string(),
            None => format!("phase {}", i + 1),
        };
        check_figures(&name, &o).map_err(&format)?;
        phases.push((name, o));
    }
    if phases.is_empty() {
        return Err(format("an empty `phases` array".into()));
    }
    let runner = phases[0]
        .1
        .get("runner")
        .and_then(Value::as_object)
        .cloned();
    Ok(LoadedResult {
        label: String::new(),
        path: path.to_path_buf(),
        phases,
        runner,
        vllm,
        runs: None,
    })
}

/// Every figure compared is a number or null: one of another type would otherwise drop
/// out of the table without a word.
fn check_figures(phase: &str, o: &Map<String, Value>) -> Result<(), String> {
    for (key, _, _) in metrics(o) {
        match o.get(&key) {
            None | Some(Value::Null) | Some(Value::Number(_)) => {}
            Some(other) => {
                return Err(format!(
                    "phase `{phase}`: `{key}` is {}, not a number",
                    json_type(other)
                ))
            }
        }
    }
    Ok(())
}

/// A JSON value's type in words.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The runner and WIT versions a result's `runner` section names.
fn versions(l: &LoadedResult) -> Option<Versions> {
    let r = l.runner.as_ref()?;
    let get = |k: &str| r.get(k).map(text);
    Some(Versions {
        runner: get("runner_version")?,
        wit: get("wit_version")?,
    })
}

/// Short distinct labels: file stems, else parent directory names, else the paths.
pub fn label(loaded: &mut [LoadedResult]) {
    let pick = |f: &dyn Fn(&Path) -> Option<String>| -> Option<Vec<String>> {
        let names: Option<Vec<String>> = loaded.iter().map(|l| f(&l.path)).collect();
        let names = names?;
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        (unique.len() == names.len()).then_some(names)
    };
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
    let parent = |p: &Path| {
        p.parent()
            .and_then(|d| d.file_name())
            .map(|s| s.to_string_lossy().into_owned())
    };
    let full = |p: &Path| Some(p.display().to_string());
    let names = pick(&stem)
        .or_else(|| pick(&parent))
        .or_else(|| pick(&full))
        .unwrap_or_else(|| (1..=loaded.len()).map(|i| format!("#{i}")).collect());
    for (l, n) in loaded.iter_mut().zip(names) {
        l.label = n;
    }
}

/// Differences that make two results different workloads (`Err`), and those worth a
/// warning only (the returned lines).
pub fn check_workload(a: &LoadedResult, b: &LoadedResult) -> Result<Vec<String>, CompareError> {
    let (Some(ra), Some(rb)) = (&a.runner, &b.runner) else {
        let which = if a.runner.is_none() { a } else { b };
        return Ok(vec![format!(
            "cannot tell whether {} and {} ran the same workload: {} has no `runner` section (a vLLM result?)",
            a.label, b.label, which.label
        )]);
    };
    let get = |r: &Map<String, Value>, k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    let (sa, sb) = (text(&get(ra, "scenario")), text(&get(rb, "scenario")));
    if sa != sb {
        return Err(CompareError::Workload(format!(
            "{} and {} ran different scenarios ({sa} and {sb})",
            a.label, b.label
        )));
    }
    // The seed is a parameter too, but another seed is the same workload: a warning.
    let without_seed = |v: Value| match v {
        Value::Object(mut m) => {
            m.remove("seed");
            Value::Object(m)
        }
        other => other,
    };
    let (pa, pb) = (
        without_seed(get(ra, "params")),
        without_seed(get(rb, "params")),
    );
    if pa != pb {
        return Err(CompareError::Workload(format!(
            "{} and {} ran {sa} with different parameters ({})",
            a.label,
            b.label,
            params_diff(&pa, &pb)
        )));
    }
    let mut warnings = Vec::new();
    if let (Some(va), Some(vb)) = (versions(a), versions(b)) {
        warnings.extend(versions_differ(&a.label, &va, &b.label, &vb));
    }
    if get(ra, "seed") != get(rb, "seed") {
        warnings.push(format!(
            "{} and {} used different seeds ({} and {}): the requests differ",
            a.label,
            b.label,
            get(ra, "seed"),
            get(rb, "seed")
        ));
    } else if get(ra, "request_digest") != get(rb, "request_digest") {
        warnings.push(format!(
            "{} and {} sent different request streams (request digests differ): another tokenizer or runner version?",
            a.label, b.label
        ));
    }
    Ok(warnings)
}

/// A JSON value as a person reads it: strings unquoted.
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// The parameters whose values differ: `rate=4 vs 8`.
fn params_diff(a: &Value, b: &Value) -> String {
    let empty = Map::new();
    let (ma, mb) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| {
            let side = |m: &Map<String, Value>| m.get(k).map_or_else(|| "(none)".into(), text);
            format!("{k}={} vs {}", side(ma), side(mb))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The metrics compared, in catalogue order: JSON key, label, better direction. Latencies
/// come with the percentiles result `a` has.
fn metrics(a: &Map<String, Value>) -> Vec<(String, String, Better)> {
    let mut out: Vec<(String, String, Better)> = SCALARS
        .iter()
        .filter(|m| m.compared && m.in_result == InResult::Vllm)
        .map(|m| (m.key.to_string(), m.label.to_string(), m.better))
        .collect();
    for m in LATENCIES
        .iter()
        .filter(|m| m.compared && m.in_result == InResult::Vllm)
    {
        out.extend(latency_metrics(a, m));
    }
    out
}

/// A vLLM latency's mean, median and every percentile `a` has, in increasing order.
fn latency_metrics(a: &Map<String, Value>, m: &Latency) -> Vec<(String, String, Better)> {
    let short = m.short;
    let mut out = vec![
        (
            catalogue::latency_key("mean", m),
            format!("Mean {short} (ms)"),
            Latency::BETTER,
        ),
        (
            catalogue::latency_key("median", m),
            format!("Median {short} (ms)"),
            Latency::BETTER,
        ),
    ];
    let suffix = format!("_{}_ms", m.key);
    let mut ps: Vec<(f64, String)> = a
        .keys()
        .filter_map(|k| {
            let p = k.strip_prefix('p')?.strip_suffix(&suffix)?;
            Some((p.parse::<f64>().ok()?, p.to_string()))
        })
        .collect();
    ps.sort_by(|x, y| x.0.total_cmp(&y.0));
    for (_, p) in ps {
        out.push((
            format!("p{p}{suffix}"),
            format!("P{p} {short} (ms)"),
            Latency::BETTER,
        ));
    }
    out
}

pub use row::Row;

/// The metrics both phases have, as rows.
pub fn rows(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<Row> {
    metrics(a)
        .into_iter()
        .filter_map(|(key, label, better)| {
            let (x, y) = (a.get(&key)?.as_f64()?, b.get(&key)?.as_f64()?);
            Some(Row {
                key,
                label,
                a: x,
                b: y,
                better,
                coarse: false,
            })
        })
        .chain(server::rows(a, b))
        .collect()
}

fn value(rows: &[Row], key: &str) -> Option<(f64, f64)> {
    rows.iter().find(|r| r.key == key).map(|r| (r.a, r.b))
}

/// The GPUStack-style line: total token throughput, then mean TPOT, B against A.
pub fn summary_line(a: &str, b: &str, rows: &[Row]) -> String {
    let mut out = String::new();
    if let Some((x, y)) = value(rows, "total_token_throughput") {
        let pct = if x != 0.0 {
            100.0 * (y - x).abs() / x
        } else {
            0.0
        };
        let verb = if y >= x { "faster" } else { "slower" };
        let _ = write!(
            out,
            "`{b}` Total TPS = {y:.2}, `{a}` Total TPS = {x:.2}. `{b}` is {verb} by {:.2} tok/s ({pct:.2}%)",
            (y - x).abs()
        );
    }
    if let Some((x, y)) = value(rows, "mean_tpot_ms") {
        let pct = if x != 0.0 {
            100.0 * (y - x).abs() / x
        } else {
            0.0
        };
        out += if out.is_empty() { "" } else { "; " };
        let _ = write!(out, "Mean TPOT = {y:.2} ms vs {x:.2} ms, ");
        if y <= x {
            let _ = write!(out, "reduced by {:.2} ms ({pct:.2}%)", x - y);
        } else {
            let _ = write!(out, "increased by {:.2} ms ({pct:.2}% slower)", y - x);
        }
    }
    out.push('.');
    out
}

/// `↑ B`: higher is better, and B is; `↓ A`: lower is better, and A is; `=` a tie;
/// `coarse`: values from histogram buckets, which name no winner.
fn verdict(r: &Row, a: &str, b: &str) -> String {
    let arrow = match r.better {
        Better::Higher => "↑",
        Better::Lower => "↓",
        Better::Neither => return String::new(),
    };
    if r.coarse {
        return "coarse: no winner".into();
    }
    match r.b_wins() {
        Some(true) => format!("{arrow} {b}"),
        Some(false) => format!("{arrow} {a}"),
        None => format!("{arrow} ="),
    }
}

/// Table cells of one row: metric, A, B, change, change %, better.
fn cells(r: &Row, a: &str, b: &str) -> [String; 6] {
    let d = r.decimals();
    [
        r.label.clone(),
        format!("{:.d$}", r.a),
        format!("{:.d$}", r.b),
        format!("{:+.d$}", r.change()),
        r.percent()
            .map_or_else(|| "n/a".to_string(), |p| format!("{p:+.2}%")),
        verdict(r, a, b),
    ]
}

/// An aligned text table; `extra`, when given, is a last column `significant?`.
fn text_table(a: &str, b: &str, rows: &[Row], extra: Option<&[String]>) -> String {
    let mut head = vec![
        "metric".to_string(),
        a.to_string(),
        b.to_string(),
        "change".into(),
        "change %".into(),
        "better".into(),
    ];
    let body = with_extra(rows.iter().map(|r| cells(r, a, b).to_vec()), extra);
    if extra.is_some() {
        head.push("significant?".into());
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            body.iter()
                .map(|r| r[c].chars().count())
                .chain([head[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in std::iter::once(&head).chain(body.iter()) {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c == 0 || c >= 5 {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Each row's cells, with its `extra` cell appended when given.
fn with_extra(
    rows: impl Iterator<Item = Vec<String>>,
    extra: Option<&[String]>,
) -> Vec<Vec<String>> {
    rows.enumerate()
        .map(|(i, mut r)| {
            if let Some(extra) = extra {
                r.push(extra.get(i).cloned().unwrap_or_default());
            }
            r
        })
        .collect()
}

/// A markdown table for pasting into a document; `extra` as in [`text_table`].
fn markdown_table(a: &str, b: &str, rows: &[Row], extra: Option<&[String]>) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let (title, ruler) = match extra {
        Some(_) => (" significant? |", "---|"),
        None => ("", ""),
    };
    let mut out = format!(
        "| metric | {} | {} | change | change % | better |{title}\n|---|---:|---:|---:|---:|---|{ruler}\n",
        esc(a),
        esc(b)
    );
    for c in with_extra(rows.iter().map(|r| cells(r, a, b).to_vec()), extra) {
        let _ = writeln!(
            out,
            "| {} |",
            c.iter().map(|s| esc(s)).collect::<Vec<_>>().join(" | ")
        );
    }
    out
}

/// Every comparison of a run of `compare`: each file against the first, phase by phase.
pub struct Report {
    pub warnings: Vec<String>,
    pub text: String,
}

/// The phases of `other` set against those of `base`, paired as [`compare_pairs`] says
/// (and saying so when not by name): a table and a summary line for each pair.
///
/// [`compare_pairs`]: super::compare_pairs
fn compare_pair(
    base: &LoadedResult,
    other: &LoadedResult,
    markdown: bool,
    force: bool,
    warnings: &mut Vec<String>,
) -> Result<String, CompareError> {
    let (a, b) = (base.label.as_str(), other.label.as_str());
    fn names(l: &LoadedResult) -> Vec<&str> {
        l.phases.iter().map(|(n, _)| n.as_str()).collect()
    }
    let (na, nb) = (names(base), names(other));
    let (pairs, how) = match pair_with_vllm(base, other, force)? {
        Some(paired) => paired,
        None => {
            let Some(pairing) = pairs::pair(&na, &nb, force) else {
                let hint = if na.len() == nb.len() && !force {
                    " (pass --force to pair them by position)"
                } else {
                    ""
                };
                return Err(CompareError::NoCommonPhase(format!("{a} and {b}{hint}")));
            };
            let how = pairing.how.describe().map(|how| {
                let list: Vec<String> = pairing
                    .pairs
                    .iter()
                    .map(|&(i, j)| format!("`{}` of {b} with `{}` of {a}", nb[j], na[i]))
                    .collect();
                format!("{how}: {}", list.join(", "))
            });
            (pairing.pairs, how)
        }
    };
    for (i, name) in na.iter().enumerate() {
        if !pairs.iter().any(|(pa, _)| *pa == i) {
            warnings.push(format!("phase `{name}` of {a} is not in {b}"));
        }
    }
    let mut text = String::new();
    if let Some(how) = how {
        let _ = writeln!(text, "{b} vs {a}: {how}\n");
    }
    let many = base.phases.len() > 1;
    for &(i, j) in &pairs {
        let ((name_a, pa), (name_b, pb)) = (&base.phases[i], &other.phases[j]);
        let phase = if name_a != name_b {
            format!(", phase {name_b} vs {name_a}")
        } else if many {
            format!(", phase {name_a}")
        } else {
            String::new()
        };
        let rows = rows(pa, pb);
        let sig = significance::of(base, i, other, j, &rows);
        let extra = sig.cells.as_deref();
        let sig_line = sig.line.map(|l| l + "\n").unwrap_or_default();
        if markdown {
            let _ = writeln!(text, "### `{b}` vs `{a}`{phase}\n");
            text += &markdown_table(a, b, &rows, extra);
            let _ = writeln!(text, "\n{sig_line}{}\n", summary_line(a, b, &rows));
        } else {
            let _ = writeln!(text, "== {b} vs {a}{phase} ==");
            text += &text_table(a, b, &rows, extra);
            let _ = writeln!(text, "{sig_line}Summary: {}\n", summary_line(a, b, &rows));
        }
    }
    Ok(text)
}

/// Phases paired (index in the base, in the other) and the line saying how, if not by name.
type Paired = (Vec<(usize, usize)>, Option<String>);

/// A `vllm bench serve` file against one of ours: its one phase pairs with our only
/// measured phase, or with `--force` with our first of several. `None` unless exactly one
/// of the two is a vLLM file; otherwise the pairs (base index, other index) and the line
/// that says how they were paired.
fn pair_with_vllm(
    base: &LoadedResult,
    other: &LoadedResult,
    force: bool,
) -> Result<Option<Paired>, CompareError> {
    let (vllm, ours) = match (base.vllm, other.vllm) {
        (true, false) => (base, other),
        (false, true) => (other, base),
        _ => return Ok(None),
    };
    let measured: Vec<&str> = ours.phases.iter().map(|(n, _)| n.as_str()).collect();
    let which = match measured.len() {
        1 => format!("the only measured phase `{}` of {}", measured[0], ours.label),
        _ if force => format!(
            "the first of the {} measured phases of {}, `{}` (--force)",
            measured.len(),
            ours.label,
            measured[0]
        ),
        n => {
            return Err(CompareError::NoCommonPhase(format!(
                "{} is a `vllm bench serve` result (one phase) and {} has {n} measured phases ({}) (pass --force to pair it with the first)",
                vllm.label,
                ours.label,
                measured.join(", ")
            )))
        }
    };
    let how = format!(
        "{} is a `vllm bench serve` result, one phase: paired with {which}, on the metrics both have",
        vllm.label
    );
    Ok(Some((vec![(0, 0)], Some(how))))
}

/// Compares `loaded[1..]` with `loaded[0]`; `force` turns workload refusals into warnings.
pub fn compare(
    loaded: &[LoadedResult],
    markdown: bool,
    force: bool,
) -> Result<Report, CompareError> {
    let mut warnings = Vec::new();
    let base = &loaded[0];
    for other in &loaded[1..] {
        match check_workload(base, other) {
            Ok(w) => warnings.extend(w),
            Err(e) if force => warnings.push(
                e.to_string()
                    .replace(" (pass --force to compare anyway)", ""),
            ),
            Err(e) => return Err(e),
        }
    }
    let mut text = String::new();
    if markdown {
        text.push_str("Results compared:\n\n");
        for l in loaded {
            let _ = writeln!(text, "- `{}`: {}", l.label, l.path.display());
        }
        text.push('\n');
    } else {
        for l in loaded {
            let _ = writeln!(text, "{}: {}", l.label, l.path.display());
        }
        text.push('\n');
    }
    for other in &loaded[1..] {
        text += &compare_pair(base, other, markdown, force, &mut warnings)?;
    }
    Ok(Report { warnings, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_summary_reads_like_the_gpustack_report() {
        // Numbers of the reference's "Choosing the Inference Engine" summary.
        let a = obj(json!({"total_token_throughput": 6499.41, "mean_tpot_ms": 138.86}));
        let b = obj(json!({"total_token_throughput": 11527.14, "mean_tpot_ms": 15.12}));
        let r = rows(&a, &b);
        assert_eq!(
            summary_line("SGLang", "vLLM", &r),
            "`vLLM` Total TPS = 11527.14, `SGLang` Total TPS = 6499.41. `vLLM` is faster by 5027.73 tok/s (77.36%); Mean TPOT = 15.12 ms vs 138.86 ms, reduced by 123.74 ms (89.11%)."
        );
        let r = rows(&b, &a);
        let line = summary_line("vLLM", "SGLang", &r);
        assert!(
            line.contains("`SGLang` is slower by 5027.73 tok/s (43.62%)"),
            "{line}"
        );
        assert!(
            line.contains("increased by 123.74 ms (818.39% slower)"),
            "{line}"
        );
    }

    #[test]
    fn rows_mark_the_better_side() {
        let a = obj(
            json!({"output_throughput": 100.0, "mean_ttft_ms": 50.0, "p99_ttft_ms": 80.0,
            "p99.9_ttft_ms": 90.0, "max_concurrent_requests": 4.0, "failed": 0}),
        );
        let b = obj(
            json!({"output_throughput": 150.0, "mean_ttft_ms": 60.0, "p99_ttft_ms": 80.0,
            "p99.9_ttft_ms": 95.0, "max_concurrent_requests": 8.0, "failed": 0}),
        );
        let r = rows(&a, &b);
        let keys: Vec<&str> = r.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "failed",
                "output_throughput",
                "max_concurrent_requests",
                "mean_ttft_ms",
                "p99_ttft_ms",
                "p99.9_ttft_ms"
            ]
        );
        let text = text_table("A", "B", &r, None);
        // The last four cells of a row: change, change %, direction, winner.
        let tail = |k: &str| -> String {
            let line = text.lines().find(|l| l.starts_with(k)).unwrap();
            let cells: Vec<&str> = line.split_whitespace().collect();
            cells[cells.len() - 4..].join(" ")
        };
        assert_eq!(tail("Output token"), "+50 +50.00% ↑ B", "{text}");
        assert_eq!(tail("Mean TTFT"), "+10 +20.00% ↓ A", "{text}");
        assert_eq!(tail("P99 TTFT"), "+0 +0.00% ↓ =", "{text}");
        assert_eq!(tail("Failed"), "+0 n/a ↓ =", "{text}");
        let md = markdown_table("A", "B", &r, None);
        assert!(
            md.contains("| Output token throughput (tok/s) | 100 | 150 | +50 | +50.00% | ↑ B |"),
            "{md}"
        );
    }

    fn loaded(label: &str, runner: Value) -> LoadedResult {
        LoadedResult {
            label: label.into(),
            path: PathBuf::from(format!("{label}.json")),
            phases: vec![("main".into(), Map::new())],
            runner: runner.as_object().cloned(),
            vllm: false,
            runs: None,
        }
    }

    #[test]
    fn different_workloads_are_refused_or_warned_about() {
        let r = |scenario: &str, rate: &str, seed: u64, digest: &str| json!({"scenario": scenario, "params": {"rate": rate}, "seed": seed, "request_digest": digest});
        let a = loaded("a", r("throughput", "4", 1, "x"));
        assert!(
            check_workload(&a, &loaded("b", r("throughput", "4", 1, "x")))
                .unwrap()
                .is_empty()
        );
        let e = check_workload(&a, &loaded("b", r("sweep", "4", 1, "x"))).unwrap_err();
        assert!(e.to_string().contains("different scenarios"), "{e}");
        let e = check_workload(&a, &loaded("b", r("throughput", "8", 1, "x"))).unwrap_err();
        assert!(e.to_string().contains("(rate=4 vs 8)"), "{e}");
        let w = check_workload(&a, &loaded("b", r("throughput", "4", 2, "y"))).unwrap();
        assert!(w[0].contains("different seeds"), "{w:?}");
        let w = check_workload(&a, &loaded("b", r("throughput", "4", 1, "y"))).unwrap();
        assert!(w[0].contains("request digests differ"), "{w:?}");
        let w = check_workload(&a, &loaded("b", Value::Null)).unwrap();
        assert!(w[0].contains("no `runner` section"), "{w:?}");
    }

    #[test]
    fn phases_named_by_a_parameter_pair_by_position_and_say_so() {
        let with = |label: &str, names: &[&str]| {
            let mut l = loaded(label, Value::Null);
            l.phases = names
                .iter()
                .map(|n| (n.to_string(), obj(json!({"total_token_throughput": 100.0}))))
                .collect();
            l
        };
        let r = compare(
            &[with("a", &["prefix 0.75"]), with("b", &["prefix 0.5"])],
            false,
            false,
        )
        .unwrap();
        assert!(
            r.text.contains("b vs a: phases paired by position: their names differ only in numbers (parameters): `prefix 0.5` of b with `prefix 0.75` of a\n"),
            "{}", r.text
        );
        assert!(
            r.text
                .contains("== b vs a, phase prefix 0.5 vs prefix 0.75 =="),
            "{}",
            r.text
        );
        // Names with nothing in common: refused, with the way out; --force pairs them.
        let (x, y) = (with("a", &["short"]), with("b", &["long"]));
        let e = compare(&[x, y], false, false).err().unwrap();
        assert_eq!(
            e.to_string(),
            "the results have no phase in common: a and b (pass --force to pair them by position)"
        );
        let (x, y) = (with("a", &["short"]), with("b", &["long"]));
        let r = compare(&[x, y], true, true).unwrap();
        assert!(
            r.text.contains("phases paired by position (--force)"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains("### `b` vs `a`, phase long vs short"),
            "{}",
            r.text
        );
        // Same names: no pairing line.
        let r = compare(&[with("a", &["main"]), with("b", &["main"])], false, false).unwrap();
        assert!(!r.text.contains("paired"), "{}", r.text);
    }

    #[test]
    fn a_vllm_result_pairs_with_the_only_measured_phase() {
        let phase = |n: &str| (n.to_string(), obj(json!({"output_throughput": 10.0})));
        let mut ours = loaded("ours", json!({"scenario": "s"}));
        ours.phases = vec![phase("main")];
        let mut vllm = loaded("vllm", Value::Null);
        (vllm.vllm, vllm.phases) = (true, vec![phase(VLLM_PHASE)]);
        let r = compare(&[ours, vllm], false, false).unwrap();
        assert!(
            r.text.contains("vllm vs ours: vllm is a `vllm bench serve` result, one phase: paired with the only measured phase `main` of ours, on the metrics both have\n"),
            "{}",
            r.text
        );
        assert_eq!(r.text.matches("Summary: ").count(), 1, "{}", r.text);
        // Several measured phases: refused, unless --force pairs the first.
        let several = || {
            let mut ours = loaded("ours", json!({"scenario": "s"}));
            ours.phases = vec![phase("warm"), phase("main")];
            let mut vllm = loaded("vllm", Value::Null);
            (vllm.vllm, vllm.phases) = (true, vec![phase(VLLM_PHASE)]);
            [vllm, ours]
        };
        let e = compare(&several(), false, false).err().unwrap();
        assert_eq!(
            e.to_string(),
            "the results have no phase in common: vllm is a `vllm bench serve` result (one phase) and ours has 2 measured phases (warm, main) (pass --force to pair it with the first)"
        );
        let r = compare(&several(), false, true).unwrap();
        assert!(
            r.text.contains(
                "paired with the first of the 2 measured phases of ours, `warm` (--force)"
            ),
            "{}",
            r.text
        );
    }

    #[test]
    fn different_versions_are_one_warning_naming_both() {
        let r = |version: &str, wit: &str| {
            json!({"scenario": "s", "params": {}, "seed": 1,
            "request_digest": "x", "runner_version": version, "wit_version": wit})
        };
        let a = loaded("a", r("0.1.0", "0.3.0"));
        assert!(check_workload(&a, &loaded("b", r("0.1.0", "0.3.0")))
            .unwrap()
            .is_empty());
        let w = check_workload(&a, &loaded("b", r("0.2.0", "0.2.1"))).unwrap();
        assert_eq!(
            w,
            ["a and b were written by different versions (runner 0.1.0 and 0.2.0, WIT 0.3.0 and 0.2.1): their figures may not be measured alike"]
        );
        let w = check_workload(&a, &loaded("b", r("0.1.0", "0.2.1"))).unwrap();
        assert!(w[0].contains("(WIT 0.3.0 and 0.2.1)"), "{w:?}");
    }

    #[test]
    fn small_values_show_their_change_and_coarse_rows_no_winner() {
        let row = |key: &str, a: f64, b: f64, coarse: bool| Row {
            key: key.into(),
            label: key.into(),
            a,
            b,
            better: Better::Lower,
            coarse,
        };
        let text = text_table(
            "A",
            "B",
            &[row("kv", 0.005, 0.01, false), row("p50", 40.0, 60.0, true)],
            None,
        );
        let cells = |k: &str| -> Vec<String> {
            let line = text.lines().find(|l| l.starts_with(k)).unwrap();
            line.split_whitespace()
                .skip(1)
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            cells("kv"),
            ["0.00500", "0.01000", "+0.00500", "+100.00%", "↓", "A"]
        );
        assert_eq!(
            cells("p50"),
            ["40", "60", "+20", "+50.00%", "coarse:", "no", "winner"]
        );
    }

    #[test]
    fn labels_are_short_and_distinct() {
        let mut l = vec![loaded("x", Value::Null), loaded("y", Value::Null)];
        l[0].path = PathBuf::from("runs/default/result.json");
        l[1].path = PathBuf::from("runs/fixed/result.json");
        label(&mut l);
        assert_eq!(
            (l[0].label.as_str(), l[1].label.as_str()),
            ("default", "fixed")
        );
        l[1].path = PathBuf::from("other.json");
        label(&mut l);
        assert_eq!(
            (l[0].label.as_str(), l[1].label.as_str()),
            ("result", "other")
        );
    }
}
