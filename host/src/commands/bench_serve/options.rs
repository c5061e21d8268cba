//! What the flags mean: vLLM's defaults filled in, its general flags mapped onto the
//! dataset's own (`--input-len`, `--output-len`), and the combinations vLLM refuses
//! refused here too, each by name.

use std::path::{Path, PathBuf};

use super::error::FlagError;
use super::flags::Parsed;

/// The request stream: which prompts, how long the answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Dataset {
    Random {
        input_len: u64,
        output_len: u64,
        range_ratio: f64,
        prefix_len: u64,
    },
    ShareGpt {
        path: PathBuf,
        output_len: Option<u64>,
    },
    Sonnet {
        path: PathBuf,
        input_len: u64,
        output_len: u64,
        prefix_len: u64,
    },
    Custom {
        path: PathBuf,
        output_len: u64,
    },
    PrefixRepetition {
        prefix_len: u64,
        suffix_len: u64,
        num_prefixes: u64,
        output_len: u64,
    },
}

impl Dataset {
    pub fn name(&self) -> &'static str {
        match self {
            Dataset::Random { .. } => "random",
            Dataset::ShareGpt { .. } => "sharegpt",
            Dataset::Sonnet { .. } => "sonnet",
            Dataset::Custom { .. } => "custom",
            Dataset::PrefixRepetition { .. } => "prefix_repetition",
        }
    }

    /// The data file the scenario reads, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Dataset::ShareGpt { path, .. }
            | Dataset::Sonnet { path, .. }
            | Dataset::Custom { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// vLLM's `--ramp-up-strategy`: the rate moves from start to end over the requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ramp {
    pub exponential: bool,
    pub start_rps: u64,
    pub end_rps: u64,
}

/// What the generated scenario holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub dataset: Dataset,
    pub num_prompts: u64,
    pub seed: u64,
    pub shuffle: bool,
    pub oversample: bool,
    /// Requests per second; infinite sends them all at once.
    pub request_rate: f64,
    pub burstiness: f64,
    pub ramp: Option<Ramp>,
    pub max_concurrency: Option<u64>,
    pub num_warmups: u64,
    pub ignore_eos: bool,
    /// Sampling parameters, `--logprobs` and `--extra-body`, merged into every body.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    pub lora_modules: Vec<String>,
    pub lora_round_robin: bool,
    /// Whether a custom dataset's prompts would have had the chat template applied.
    pub custom_chat_template_skipped: bool,
}

/// Where the requests go and how the run is reported.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSettings {
    pub target: String,
    /// The runner's `--api`: `completions` or `chat`.
    pub api: &'static str,
    pub backend: String,
    pub label: Option<String>,
    /// The name sent in requests (`--served-model-name`, else `--model`).
    pub model_name: Option<String>,
    /// `--model`: vLLM's `model_id`.
    pub model_id: Option<String>,
    /// The runner's `--tokenizer`.
    pub tokenizer: String,
    /// `--tokenizer` as given, for the result's `tokenizer_id`.
    pub tokenizer_id: Option<String>,
    pub headers: Vec<String>,
    pub percentile_metrics: Vec<String>,
    pub metric_percentiles: Vec<f64>,
    pub goodput: Vec<String>,
    pub request_id_prefix: Option<String>,
    pub profile: bool,
    pub ready_check_timeout_sec: u64,
}

/// vLLM's result file flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SaveSettings {
    pub save_result: bool,
    pub save_detailed: bool,
    pub append_result: bool,
    pub result_dir: Option<PathBuf>,
    pub result_filename: Option<String>,
    pub metadata: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    pub workload: Workload,
    pub run: RunSettings,
    pub save: SaveSettings,
    pub emit_scenario: Option<PathBuf>,
    pub dry_run: bool,
    pub output: Option<PathBuf>,
}

impl BenchOptions {
    pub fn from_parsed(p: &Parsed) -> Result<BenchOptions, FlagError> {
        Ok(BenchOptions {
            workload: workload(p)?,
            run: run_settings(p)?,
            save: save_settings(p)?,
            emit_scenario: p.text("--emit-scenario").map(PathBuf::from),
            dry_run: p.has("--dry-run"),
            output: p.text("--output").map(PathBuf::from),
        })
    }
}

/// A count flag: an integer at or above zero, or its default.
fn count(p: &Parsed, flag: &'static str, default: u64) -> Result<u64, FlagError> {
    match p.int(flag) {
        None => Ok(default),
        Some(v) => u64::try_from(v).map_err(|_| FlagError::value(flag, "must not be negative")),
    }
}

fn workload(p: &Parsed) -> Result<Workload, FlagError> {
    let dataset = dataset(p)?;
    let request_rate = p.float("--request-rate").unwrap_or(f64::INFINITY);
    if request_rate <= 0.0 {
        return Err(FlagError::value(
            "--request-rate",
            "must be above 0 (inf sends every request at once)",
        ));
    }
    let burstiness = p.float("--burstiness").unwrap_or(1.0);
    if burstiness <= 0.0 || !burstiness.is_finite() {
        return Err(FlagError::value(
            "--burstiness",
            "must be a positive number",
        ));
    }
    let max_concurrency = match p.int("--max-concurrency") {
        None => None,
        Some(n) if n > 0 => Some(n as u64),
        Some(_) => {
            return Err(FlagError::value(
                "--max-concurrency",
                "must be greater than 0",
            ))
        }
    };
    let lora_round_robin = match p.text("--lora-assignment").unwrap_or("random") {
        "random" => false,
        "round-robin" => true,
        other => {
            return Err(FlagError::value(
                "--lora-assignment",
                format!("`{other}` is not one of random, round-robin"),
            ))
        }
    };
    Ok(Workload {
        ignore_eos: p.has("--ignore-eos") || matches!(dataset, Dataset::Random { .. }),
        custom_chat_template_skipped: matches!(dataset, Dataset::Custom { .. })
            && !p.has("--skip-chat-template"),
        dataset,
        num_prompts: count(p, "--num-prompts", 1000)?,
        seed: count(p, "--seed", 0)?,
        shuffle: !p.has("--disable-shuffle"),
        oversample: !p.has("--no-oversample"),
        request_rate,
        burstiness,
        ramp: ramp(p, request_rate)?,
        max_concurrency,
        num_warmups: count(p, "--num-warmups", 0)?,
        extra_body: extra_body(p)?,
        lora_modules: p.list("--lora-modules").to_vec(),
        lora_round_robin,
    })
}

fn dataset(p: &Parsed) -> Result<Dataset, FlagError> {
    let name = p.text("--dataset-name").unwrap_or("random");
    let path = p.text("--dataset-path").map(PathBuf::from);
    let output = p.int("--output-len");
    let out = |flag: &'static str, default: u64| -> Result<u64, FlagError> {
        match output {
            Some(v) => u64::try_from(v)
                .map_err(|_| FlagError::value("--output-len", "must not be negative")),
            None => count(p, flag, default),
        }
    };
    let needs_path = |path: Option<PathBuf>| {
        path.ok_or_else(|| {
            FlagError::value(
                "--dataset-path",
                format!("the {name} dataset needs --dataset-path FILE"),
            )
        })
    };
    let no_path = || {
        match &path {
        Some(f) => Err(FlagError::value("--dataset-path", format!("cannot be used with the '{name}' dataset (it generates its prompts); use --dataset-name sharegpt, sonnet or custom for {}", f.display()))),
        None => Ok(()),
    }
    };
    Ok(match name {
        "random" => {
            no_path()?;
            random(p, out("--random-output-len", 128)?)?
        }
        "sharegpt" => Dataset::ShareGpt {
            path: needs_path(path)?,
            output_len: match output {
                Some(_) => Some(out("--sharegpt-output-len", 0)?),
                None => p.int("--sharegpt-output-len").map(|v| v.max(0) as u64),
            },
        },
        "sonnet" => Dataset::Sonnet {
            path: needs_path(path)?,
            input_len: count(p, "--sonnet-input-len", 550)?,
            output_len: count(p, "--sonnet-output-len", 150)?,
            prefix_len: count(p, "--sonnet-prefix-len", 200)?,
        },
        "custom" => Dataset::Custom {
            path: needs_path(path)?,
            output_len: out("--custom-output-len", 256)?,
        },
        "prefix_repetition" => {
            no_path()?;
            prefix_repetition(p, out("--prefix-repetition-output-len", 128)?)?
        }
        "random-mm" => return Err(FlagError::value("--dataset-name", "random-mm (multimodal requests) is not generated by the runner; use --dataset-name random for text, or a scenario whose requests carry `messages` with image parts")),
        "hf" => return Err(FlagError::value("--dataset-name", "hf needs the Hugging Face Hub, which the runner never reaches; export the rows to JSONL and use --dataset-name custom --dataset-path FILE")),
        other => return Err(FlagError::value("--dataset-name", format!("`{other}` is not generated by the runner; use random, sharegpt, sonnet, custom or prefix_repetition"))),
    })
}

fn random(p: &Parsed, output_len: u64) -> Result<Dataset, FlagError> {
    let input_len = match p.int("--input-len") {
        Some(_) => count(p, "--input-len", 0)?,
        None => count(p, "--random-input-len", 1024)?,
    };
    let range_ratio = p.float("--random-range-ratio").unwrap_or(0.0);
    if !(0.0..1.0).contains(&range_ratio) {
        return Err(FlagError::value(
            "--random-range-ratio",
            "must be in [0, 1)",
        ));
    }
    Ok(Dataset::Random {
        input_len,
        output_len,
        range_ratio,
        prefix_len: count(p, "--random-prefix-len", 0)?,
    })
}

fn prefix_repetition(p: &Parsed, output_len: u64) -> Result<Dataset, FlagError> {
    let num_prefixes = count(p, "--prefix-repetition-num-prefixes", 10)?;
    if num_prefixes == 0 {
        return Err(FlagError::value(
            "--prefix-repetition-num-prefixes",
            "must be at least 1",
        ));
    }
    Ok(Dataset::PrefixRepetition {
        prefix_len: count(p, "--prefix-repetition-prefix-len", 256)?,
        suffix_len: count(p, "--prefix-repetition-suffix-len", 256)?,
        num_prefixes,
        output_len,
    })
}

/// vLLM's ramp-up checks, in its order.
fn ramp(p: &Parsed, request_rate: f64) -> Result<Option<Ramp>, FlagError> {
    let Some(strategy) = p.text("--ramp-up-strategy") else {
        return Ok(None);
    };
    let exponential = match strategy {
        "linear" => false,
        "exponential" => true,
        other => {
            return Err(FlagError::value(
                "--ramp-up-strategy",
                format!("`{other}` is not one of linear, exponential"),
            ))
        }
    };
    if request_rate.is_finite() {
        return Err(FlagError::value(
            "--request-rate",
            "do not give it with --ramp-up-strategy: the ramp sets the rate",
        ));
    }
    let (Some(start), Some(end)) = (p.int("--ramp-up-start-rps"), p.int("--ramp-up-end-rps"))
    else {
        return Err(FlagError::value(
            "--ramp-up-strategy",
            "needs both --ramp-up-start-rps and --ramp-up-end-rps",
        ));
    };
    if start < 0 || end < 0 || start > end {
        return Err(FlagError::value(
            "--ramp-up-start-rps",
            "start and end must be non-negative, start at most end",
        ));
    }
    if exponential && start == 0 {
        return Err(FlagError::value(
            "--ramp-up-start-rps",
            "cannot be 0 for an exponential ramp-up",
        ));
    }
    Ok(Some(Ramp {
        exponential,
        start_rps: start as u64,
        end_rps: end as u64,
    }))
}

/// The sampling flags that are set, then `--logprobs`, then `--extra-body` over them (as
/// vLLM merges them).
fn extra_body(p: &Parsed) -> Result<serde_json::Map<String, serde_json::Value>, FlagError> {
    let mut body = serde_json::Map::new();
    for (flag, key) in [
        ("--top-p", "top_p"),
        ("--min-p", "min_p"),
        ("--temperature", "temperature"),
        ("--frequency-penalty", "frequency_penalty"),
        ("--presence-penalty", "presence_penalty"),
        ("--repetition-penalty", "repetition_penalty"),
    ] {
        if let Some(v) = p.float(flag) {
            body.insert(key.into(), serde_json::json!(v));
        }
    }
    for (flag, key) in [("--top-k", "top_k"), ("--logprobs", "logprobs")] {
        if let Some(v) = p.int(flag) {
            body.insert(key.into(), serde_json::json!(v));
        }
    }
    if let Some(text) = p.text("--extra-body") {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(m)) => {
                refuse_owned(&m)?;
                body.extend(m)
            }
            _ => return Err(FlagError::value("--extra-body", "must be a JSON object")),
        }
    }
    Ok(body)
}

/// The fields every request of the generated scenario is built with: its prompt (or
/// messages) and its answer's length, from the dataset flags.
const REQUEST_FIELDS: [&str; 4] = ["prompt", "messages", "max_tokens", "max_completion_tokens"];

/// `--extra-body` naming a field the runner owns (`stream`, `stream_options`) or builds
/// from the dataset flags: refused before anything is sent, as a run refuses it in a
/// scenario's `extra` (see `api::owned_field`). vLLM lets `"stream": false` through, and
/// then every TTFT is the whole response time.
fn refuse_owned(extra: &serde_json::Map<String, serde_json::Value>) -> Result<(), FlagError> {
    use crate::measuring::client::api::OWNED_FIELDS;
    for key in extra.keys() {
        let why = if OWNED_FIELDS.iter().any(|(k, _)| k == key) {
            "is the runner's own: every request is streamed, and its times are read from the stream"
        } else if REQUEST_FIELDS.contains(&key.as_str()) {
            "is built from the dataset flags (the prompt, and its length from --*-output-len)"
        } else {
            continue;
        };
        return Err(FlagError::value(
            "--extra-body",
            format!("`{key}` {why}: leave it out"),
        ));
    }
    Ok(())
}

fn run_settings(p: &Parsed) -> Result<RunSettings, FlagError> {
    let backend = p.text("--backend").unwrap_or("openai").to_string();
    let endpoint = p.text("--endpoint").unwrap_or("/v1/completions");
    let api = api_of(&backend, endpoint)?;
    let target = match p.text("--base-url") {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            let host = p.text("--host").unwrap_or("127.0.0.1");
            let port = p.int("--port").unwrap_or(8000);
            match host.contains(':') {
                true => format!("http://[{host}]:{port}"),
                false => format!("http://{host}:{port}"),
            }
        }
    };
    match p.text("--tokenizer-mode").unwrap_or("auto") {
        "auto" | "hf" => {}
        other => {
            return Err(FlagError::value(
                "--tokenizer-mode",
                format!(
                    "`{other}` is not taken: the runner reads a tokenizer.json (modes auto and hf)"
                ),
            ))
        }
    }
    Ok(RunSettings {
        target,
        api,
        label: p.text("--label").map(String::from),
        model_name: p
            .text("--served-model-name")
            .or(p.text("--model"))
            .map(String::from),
        model_id: p.text("--model").map(String::from),
        tokenizer: tokenizer(p.text("--tokenizer"))?,
        tokenizer_id: p.text("--tokenizer").map(String::from),
        headers: pairs(p, "--header")?
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect(),
        percentile_metrics: percentile_metrics(p)?,
        metric_percentiles: metric_percentiles(p)?,
        goodput: p.list("--goodput").to_vec(),
        request_id_prefix: p.text("--request-id-prefix").map(String::from),
        profile: p.has("--profile"),
        ready_check_timeout_sec: count(p, "--ready-check-timeout-sec", 0)?,
        backend,
    })
}

/// The runner's `--api` for vLLM's backend and endpoint.
fn api_of(backend: &str, endpoint: &str) -> Result<&'static str, FlagError> {
    match backend {
        "openai" | "vllm" | "openai-chat" => {}
        other => {
            return Err(FlagError::value(
                "--backend",
                format!("`{other}` is not taken; use openai, vllm (completions) or openai-chat"),
            ))
        }
    }
    match endpoint.trim_end_matches('/') {
        "/v1/chat/completions" => Ok("chat"),
        "/v1/completions" if backend == "openai-chat" => Err(FlagError::value("--endpoint", "the openai-chat backend needs --endpoint /v1/chat/completions")),
        "/v1/completions" => Ok("completions"),
        other => Err(FlagError::value("--endpoint", format!("`{other}` is not taken; use /v1/completions or /v1/chat/completions (put any path prefix in --base-url)"))),
    }
}

/// A tokenizer the runner can load offline: its named encodings, a tokenizer.json, or a
/// directory holding one (what a Hugging Face model directory has).
fn tokenizer(given: Option<&str>) -> Result<String, FlagError> {
    let Some(given) = given else {
        return Ok("o200k_base".into());
    };
    if matches!(given, "o200k_base" | "cl100k_base") {
        return Ok(given.into());
    }
    let path = Path::new(given);
    if path.is_file() {
        return Ok(given.into());
    }
    let inside = path.join("tokenizer.json");
    if inside.is_file() {
        return Ok(inside.display().to_string());
    }
    Err(FlagError::value("--tokenizer", format!("`{given}` is not a tokenizer.json or a directory holding one (Hugging Face names are not downloaded); give a local path, or o200k_base")))
}

/// `KEY=VALUE` items of a list flag.
fn pairs(p: &Parsed, flag: &'static str) -> Result<Vec<(String, String)>, FlagError> {
    p.list(flag)
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(FlagError::value(
                flag,
                format!("expected KEY=VALUE, got `{item}`"),
            )),
        })
        .collect()
}

/// The metrics vLLM reports percentiles of; those the runner's report has.
fn percentile_metrics(p: &Parsed) -> Result<Vec<String>, FlagError> {
    let text = p.text("--percentile-metrics").unwrap_or("ttft,tpot,itl");
    let names: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    for n in &names {
        if !matches!(n.as_str(), "ttft" | "tpot" | "itl" | "e2el") {
            return Err(FlagError::value("--percentile-metrics", format!("`{n}` is not reported by the runner; choose from ttft, tpot, itl, e2el (the client queue times are in --output's requests.jsonl)")));
        }
    }
    Ok(names)
}

fn metric_percentiles(p: &Parsed) -> Result<Vec<f64>, FlagError> {
    let text = p.text("--metric-percentiles").unwrap_or("99");
    text.split(',')
        .map(|s| match s.trim().parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
            _ => Err(FlagError::value(
                "--metric-percentiles",
                format!("`{s}` is not a percentile between 0 and 100"),
            )),
        })
        .collect()
}

fn save_settings(p: &Parsed) -> Result<SaveSettings, FlagError> {
    Ok(SaveSettings {
        save_result: p.has("--save-result"),
        save_detailed: p.has("--save-detailed"),
        append_result: p.has("--append-result"),
        result_dir: p.text("--result-dir").map(PathBuf::from),
        result_filename: p.text("--result-filename").map(String::from),
        metadata: pairs(p, "--metadata")?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::flags::parse;
    use super::*;

    fn options(a: &[&str]) -> Result<BenchOptions, FlagError> {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        BenchOptions::from_parsed(&parse(&args)?)
    }

    #[test]
    fn defaults_are_vllms() {
        let o = options(&[]).unwrap();
        assert_eq!(o.workload.num_prompts, 1000);
        assert_eq!(o.workload.seed, 0);
        assert!(o.workload.request_rate.is_infinite());
        assert!(o.workload.ignore_eos, "random forces ignore_eos");
        assert_eq!(o.run.target, "http://127.0.0.1:8000");
        assert_eq!(o.run.api, "completions");
        assert_eq!(o.run.percentile_metrics, ["ttft", "tpot", "itl"]);
        assert_eq!(
            o.workload.dataset,
            Dataset::Random {
                input_len: 1024,
                output_len: 128,
                range_ratio: 0.0,
                prefix_len: 0
            }
        );
    }

    #[test]
    fn general_lengths_map_onto_the_dataset() {
        let o = options(&["--input-len", "7", "--output-len", "3"]).unwrap();
        assert!(matches!(
            o.workload.dataset,
            Dataset::Random {
                input_len: 7,
                output_len: 3,
                ..
            }
        ));
    }

    #[test]
    fn vllms_refusals_are_kept() {
        let err = |a: &[&str]| options(a).unwrap_err().to_string();
        assert!(err(&["--dataset-path", "x.json"]).contains("--dataset-path"));
        assert!(err(&["--dataset-name", "sharegpt"]).contains("--dataset-path"));
        assert!(err(&["--dataset-name", "hf"]).contains("hf"));
        assert!(err(&["--dataset-name", "random-mm"]).contains("random-mm"));
        assert!(err(&["--ramp-up-strategy", "linear"]).contains("--ramp-up-end-rps"));
        assert!(err(&["--max-concurrency", "0"]).contains("--max-concurrency"));
        assert!(err(&["--backend", "tgi"]).contains("tgi"));
        assert!(err(&["--tokenizer", "meta-llama/Llama-3-8B"]).contains("--tokenizer"));
    }
}
