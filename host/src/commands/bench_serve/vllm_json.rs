//! `vllm bench serve --save-result`'s file, from the run's own result and its
//! requests.jsonl: vLLM's keys in vLLM's order and with its types (ints where it writes
//! ints, `"inf"` for an unlimited rate, `null` goodput without --goodput), the per-request
//! arrays with --save-detailed, and its file name rule (`--result-dir`,
//! `--result-filename`, `--append-result`). With them the keys vLLM's Rust client
//! (vllm-project/vllm-bench, `src/output/json.rs`) writes besides: `max_model_len`,
//! `input_throughput`, and `p90_` of each metric (its `src/config.rs` always adds 90 to
//! the percentiles), so a parser of either file reads ours.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

use super::options::BenchOptions;
use crate::measuring::metrics::RequestRecord;

/// A JSON object that keeps its keys in insertion order (vLLM's dict order).
#[derive(Debug, Default)]
pub struct Ordered(pub Vec<(String, Value)>);

impl Ordered {
    fn put(&mut self, key: &str, value: Value) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value));
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VllmJsonError {
    #[error("cannot read the run's result {path}: {why}")]
    Read { path: PathBuf, why: String },
    #[error("cannot write the result file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The tokenizer a run counts with when bench serve is given no `--tokenizer`.
pub const DEFAULT_TOKENIZER: &str = "o200k_base";

/// The keys vLLM writes before the benchmark's own.
fn setup_keys(o: &BenchOptions, run: &Value, out: &mut Ordered) {
    let model_id = run.get("model_id").cloned().unwrap_or(Value::Null);
    out.put("date", run.get("date").cloned().unwrap_or(Value::Null));
    out.put("endpoint_type", json!(o.run.backend));
    out.put("backend", json!(o.run.backend));
    out.put("label", json!(o.run.label));
    out.put("model_id", json!(o.run.model_id).or(model_id.clone()));
    // The tokenizer that counted: without --tokenizer, the run counts with o200k_base
    // (vLLM would name the model, whose tokenizer it loads).
    let tokenizer_id = o.run.tokenizer_id.as_deref().unwrap_or(DEFAULT_TOKENIZER);
    out.put("tokenizer_id", json!(tokenizer_id));
    out.put("num_prompts", json!(o.workload.num_prompts));
    // vllm-bench's `--max-model-len`, which vLLM 0.33's client lacks: null, as there.
    out.put("max_model_len", Value::Null);
    for (k, v) in &o.save.metadata {
        out.put(k, json!(v));
    }
    let rate = o.workload.request_rate;
    out.put(
        "request_rate",
        if rate.is_finite() {
            json!(rate)
        } else {
            json!("inf")
        },
    );
    out.put("burstiness", json!(o.workload.burstiness));
    out.put("max_concurrency", json!(o.workload.max_concurrency));
    if let Some(r) = &o.workload.ramp {
        let strategy = if r.exponential {
            "exponential"
        } else {
            "linear"
        };
        out.put("ramp_up_strategy", json!(strategy));
        out.put("ramp_up_start_rps", json!(r.start_rps));
        out.put("ramp_up_end_rps", json!(r.end_rps));
    }
}

trait OrNull {
    fn or(self, other: Value) -> Value;
}

impl OrNull for Value {
    fn or(self, other: Value) -> Value {
        if self.is_null() {
            other
        } else {
            self
        }
    }
}

/// vLLM's result file for the run whose result (`runner run --save-result`) is `run` and
/// whose measured requests are `records`.
pub fn vllm_result(o: &BenchOptions, run: &Value, records: &[RequestRecord]) -> Ordered {
    let mut out = Ordered::default();
    setup_keys(o, run, &mut out);
    let num = |k: &str| run.get(k).cloned().unwrap_or(Value::Null);
    for k in [
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
    ] {
        out.put(k, num(k));
        if k == "request_goodput" {
            out.put("input_throughput", input_throughput(run));
        }
    }
    let arrays = PerRequest::of(records);
    let detailed = o.save.save_detailed;
    if detailed {
        out.put("input_lens", json!(arrays.input_lens));
        out.put("output_lens", json!(arrays.output_lens));
        out.put("ttfts", json!(arrays.ttfts));
        out.put("itls", json!(arrays.itls));
    }
    // vLLM keeps these two without --save-detailed: its list of fields to drop omits them.
    out.put("latencies", json!(arrays.latencies));
    if detailed {
        out.put("start_times", json!(arrays.start_times));
    }
    out.put("queue_times", json!(arrays.queue_times));
    if detailed {
        out.put("generated_texts", json!(arrays.generated_texts));
        out.put("errors", json!(arrays.errors));
    }
    out.put("max_output_tokens_per_s", num("max_output_tokens_per_s"));
    // An int in vLLM (the most requests in flight at the peak second).
    let peak = num("max_concurrent_requests")
        .as_f64()
        .map(|v| json!(v.round() as u64));
    out.put("max_concurrent_requests", peak.unwrap_or(Value::Null));
    out.put("rtfx", num("rtfx"));
    metric_keys(o, run, &arrays, &mut out);
    out
}

/// vllm-bench's `input_throughput`: prompt tokens of the completed requests per second.
fn input_throughput(run: &Value) -> Value {
    let tokens = run.get("total_input_tokens").and_then(Value::as_f64);
    let duration = run.get("duration").and_then(Value::as_f64);
    match (tokens, duration) {
        (Some(t), Some(d)) if d > 0.0 => json!(t / d),
        _ => json!(0.0),
    }
}

/// `mean_`, `median_`, `std_` and `p<N>_` of each selected metric, in vLLM's order, then
/// vllm-bench's `p90_` where 90 was not asked for (from the requests, as it computes it).
fn metric_keys(o: &BenchOptions, run: &Value, arrays: &PerRequest, out: &mut Ordered) {
    for metric in ["ttft", "tpot", "itl", "e2el"] {
        if !o.run.percentile_metrics.iter().any(|m| m == metric) {
            continue;
        }
        for stat in ["mean", "median", "std"] {
            let key = format!("{stat}_{metric}_ms");
            out.put(&key, run.get(&key).cloned().unwrap_or(json!(0.0)));
        }
        for p in &o.run.metric_percentiles {
            let key = format!("p{}_{metric}_ms", percentile_word(*p));
            out.put(&key, run.get(&key).cloned().unwrap_or(json!(0.0)));
        }
        if !o.run.metric_percentiles.contains(&90.0) {
            let p90 = numpy_percentile(arrays.metric_secs(metric), 90.0) * 1000.0;
            out.put(&format!("p90_{metric}_ms"), json!(p90));
        }
    }
}

/// numpy's default (linear) percentile of `values`, 0 for none: vLLM's and vllm-bench's.
fn numpy_percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let Some(last) = values.len().checked_sub(1) else {
        return 0.0;
    };
    let at = p / 100.0 * last as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    values[lo] + (values[hi] - values[lo]) * (at - lo as f64)
}

/// Python's `str(int(p)) if int(p) == p else str(p)`.
pub fn percentile_word(p: f64) -> String {
    match p.fract() == 0.0 {
        true => format!("{}", p as i64),
        false => format!("{p}"),
    }
}

/// vLLM's per-request lists, in request order; times in seconds.
#[derive(Debug, Default)]
struct PerRequest {
    input_lens: Vec<u64>,
    output_lens: Vec<u64>,
    ttfts: Vec<f64>,
    itls: Vec<Vec<f64>>,
    latencies: Vec<f64>,
    start_times: Vec<f64>,
    queue_times: Vec<f64>,
    /// Each answer's text as the run kept it (`requests.jsonl`'s `answer_text`, kept
    /// when bench serve runs with --save-detailed, bounded there); "" where none was kept.
    generated_texts: Vec<String>,
    errors: Vec<String>,
    /// Whether each request succeeded (vLLM's metrics count only those).
    ok: Vec<bool>,
}

impl PerRequest {
    fn of(records: &[RequestRecord]) -> PerRequest {
        let secs = |ns: u64| ns as f64 / 1e9;
        let mut sorted: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
        sorted.sort_by_key(|r| (r.phase, r.index));
        let mut p = PerRequest::default();
        for r in sorted {
            let ok = r.succeeded();
            p.input_lens.push(r.input_tokens);
            p.output_lens.push(if ok { r.output_tokens } else { 0 });
            p.ttfts.push(r.ttft_ns().filter(|_| ok).map_or(0.0, secs));
            let gaps = r
                .chunks
                .windows(2)
                .map(|w| secs(w[1].t_ns.saturating_sub(w[0].t_ns)));
            p.itls.push(if ok { gaps.collect() } else { vec![] });
            p.latencies
                .push(r.e2el_ns().filter(|_| ok).map_or(0.0, secs));
            p.start_times.push(secs(r.sent_ns));
            p.queue_times
                .push(secs(r.sent_ns.saturating_sub(r.scheduled_ns)));
            p.generated_texts
                .push(r.answer.text.clone().unwrap_or_default());
            p.ok.push(ok);
            p.errors.push(
                r.error
                    .as_ref()
                    .map(|e| e.message.clone())
                    .unwrap_or_default(),
            );
        }
        p
    }

    /// One metric's values in seconds over the successful requests, as vLLM's
    /// `calculate_metrics` gathers them (TPOT only for more than one output token).
    fn metric_secs(&self, metric: &str) -> Vec<f64> {
        let ok = |i: &usize| self.ok[*i];
        let each = 0..self.ok.len();
        match metric {
            "ttft" => each.filter(ok).map(|i| self.ttfts[i]).collect(),
            "e2el" => each.filter(ok).map(|i| self.latencies[i]).collect(),
            "itl" => each.filter(ok).flat_map(|i| self.itls[i].clone()).collect(),
            "tpot" => each
                .filter(ok)
                .filter(|&i| self.output_lens[i] > 1)
                .map(|i| (self.latencies[i] - self.ttfts[i]) / (self.output_lens[i] - 1) as f64)
                .collect(),
            _ => vec![],
        }
    }
}

/// vLLM's file name: `--result-filename`, else
/// `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`, inside `--result-dir`.
pub fn file_name(o: &BenchOptions, model_id: &str, date: &str) -> PathBuf {
    let base_model = model_id.rsplit('/').next().unwrap_or(model_id);
    let concurrency = o
        .workload
        .max_concurrency
        .map(|c| format!("-concurrency{c}"))
        .unwrap_or_default();
    let label = o.run.label.as_deref().unwrap_or(&o.run.backend);
    let name = match (&o.save.result_filename, &o.workload.ramp) {
        (Some(name), _) => name.clone(),
        (None, Some(r)) => {
            let strategy = if r.exponential {
                "exponential"
            } else {
                "linear"
            };
            format!(
                "{label}-ramp-up-{strategy}-{}qps-{}qps{concurrency}-{base_model}-{date}.json",
                r.start_rps, r.end_rps
            )
        }
        (None, None) => format!(
            "{label}-{}qps{concurrency}-{base_model}-{date}.json",
            python_float(o.workload.request_rate)
        ),
    };
    match &o.save.result_dir {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// Python's `str(float)`: `4.0`, `0.5`, `inf`.
fn python_float(v: f64) -> String {
    match v.is_finite() {
        true => format!("{v:?}"),
        false => "inf".into(),
    }
}

/// Reads the run's result and records, writes vLLM's file; returns its path.
pub fn write(
    o: &BenchOptions,
    run_result: &Path,
    records: &Path,
) -> Result<PathBuf, VllmJsonError> {
    let read_err = |path: &Path, why: String| VllmJsonError::Read {
        path: path.to_path_buf(),
        why,
    };
    let text =
        std::fs::read_to_string(run_result).map_err(|e| read_err(run_result, e.to_string()))?;
    let run: Value =
        serde_json::from_str(&text).map_err(|e| read_err(run_result, e.to_string()))?;
    let lines = std::fs::read_to_string(records).map_err(|e| read_err(records, e.to_string()))?;
    let records: Vec<RequestRecord> = lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| read_err(records, e.to_string()))?;
    let result = vllm_result(o, &run, &records);
    let model_id = run
        .get("model_id")
        .and_then(Value::as_str)
        .unwrap_or("model");
    let date = run.get("date").and_then(Value::as_str).unwrap_or("date");
    let path = file_name(o, model_id, date);
    append_or_write(&path, &result, o.save.append_result).map_err(|source| {
        VllmJsonError::Write {
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
}

fn append_or_write(path: &Path, result: &Ordered, append: bool) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let body = serde_json::to_string(result).map_err(std::io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    // vLLM appends a newline before each result after the first.
    if append && file.metadata()?.len() > 0 {
        file.write_all(b"\n")?;
    }
    file.write_all(body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_words_are_pythons() {
        assert_eq!(percentile_word(99.0), "99");
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(python_float(4.0), "4.0");
        assert_eq!(python_float(f64::INFINITY), "inf");
    }

    #[test]
    fn percentiles_interpolate_as_numpys() {
        assert_eq!(numpy_percentile(vec![], 90.0), 0.0);
        assert_eq!(numpy_percentile(vec![3.0], 90.0), 3.0);
        // numpy.percentile([1, 2, 3, 4, 5], 90) == 4.6
        let p = numpy_percentile(vec![5.0, 1.0, 4.0, 2.0, 3.0], 90.0);
        assert!((p - 4.6).abs() < 1e-12, "{p}");
    }
}
