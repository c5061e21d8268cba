//! The grammar of `vllm bench serve`: every flag its Python parser defines (as read from
//! vLLM's source, see tests/fixtures/vllm_bench_serve_flags.json), each either taken or a
//! named gap refused with its reason, and the runner's own few. Parsing is argparse's:
//! `--flag value`, `--flag=value`, `nargs` lists up to the next flag, `_` spelled as `-`
//! (vLLM's FlexibleArgumentParser); abbreviations are refused, since a prefix that names
//! one flag today may name two tomorrow.

use std::collections::BTreeMap;

use super::error::FlagError;

/// What a flag's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagKind {
    /// `action="store_true"`: no value.
    Switch,
    Int,
    Float,
    Text,
    /// `type=json.loads`.
    Json,
    /// `nargs="*"` or `nargs="+"`: the values up to the next flag.
    List,
}

/// Whether `runner bench serve` takes a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Taken,
    /// Refused by name, with why and what to use instead.
    Gap(&'static str),
}

#[derive(Clone, Copy, Debug)]
pub struct FlagSpec {
    pub name: &'static str,
    pub kind: FlagKind,
    pub support: Support,
}

const fn taken(name: &'static str, kind: FlagKind) -> FlagSpec {
    FlagSpec {
        name,
        kind,
        support: Support::Taken,
    }
}

const fn gap(name: &'static str, kind: FlagKind, why: &'static str) -> FlagSpec {
    FlagSpec {
        name,
        kind,
        support: Support::Gap(why),
    }
}

const HF: &str = "Hugging Face Hub datasets need the network and the `datasets` library; export the rows to JSONL and use --dataset-name custom --dataset-path FILE";
const MM: &str = "multimodal requests (images, video) are not generated; use a scenario whose requests carry `messages` with image parts";
const EMBED: &str = "embedding and rerank benchmarks are not driven through bench serve; use `runner run scenarios/embeddings.rhai --api embeddings`";
const SPEC: &str = "the spec_bench and speed_bench datasets are not generated; export their prompts to JSONL and use --dataset-name custom";
const TRACE: &str = "the timed_trace dataset is not read; replay a trace with `runner run scenarios/trace_replay.rhai`";
const PLOT: &str = "plots are not drawn by bench serve; pass --output DIR for report.html, which has the run's charts";

use FlagKind::{Float, Int, Json, List, Switch, Text};

/// Every flag of `vllm bench serve` (vllm/benchmarks/serve.py `add_cli_args` and
/// vllm/benchmarks/datasets/arg_utils.py `add_dataset_parser`), in their order.
pub const VLLM_FLAGS: &[FlagSpec] = &[
    taken("--seed", Int),
    taken("--num-prompts", Int),
    taken("--dataset-name", Text),
    gap("--no-stream", Switch, HF),
    taken("--dataset-path", Text),
    taken("--no-oversample", Switch),
    taken("--skip-chat-template", Switch),
    taken("--disable-shuffle", Switch),
    taken("--custom-output-len", Int),
    gap("--spec-bench-output-len", Int, SPEC),
    gap("--spec-bench-category", Text, SPEC),
    // Gone from vLLM 0.33.0 (its sonnet dataset too); kept so older command lines run.
    taken("--sonnet-input-len", Int),
    taken("--sonnet-output-len", Int),
    taken("--sonnet-prefix-len", Int),
    taken("--sharegpt-output-len", Int),
    gap("--blazedit-min-distance", Float, HF),
    gap("--blazedit-max-distance", Float, HF),
    taken("--random-input-len", Int),
    taken("--random-output-len", Int),
    taken("--random-range-ratio", Float),
    taken("--random-prefix-len", Int),
    gap("--random-batch-size", Int, EMBED),
    gap("--no-reranker", Switch, EMBED),
    gap("--random-mm-base-items-per-request", Int, MM),
    gap("--random-mm-num-mm-items-range-ratio", Float, MM),
    gap("--random-mm-limit-mm-per-prompt", Json, MM),
    gap("--random-mm-bucket-config", Text, MM),
    gap("--hf-subset", Text, HF),
    gap("--hf-split", Text, HF),
    gap("--hf-name", Text, HF),
    gap("--hf-output-len", Int, HF),
    taken("--prefix-repetition-prefix-len", Int),
    taken("--prefix-repetition-suffix-len", Int),
    taken("--prefix-repetition-num-prefixes", Int),
    taken("--prefix-repetition-output-len", Int),
    taken("--label", Text),
    taken("--backend", Text),
    taken("--base-url", Text),
    taken("--host", Text),
    taken("--port", Int),
    taken("--endpoint", Text),
    taken("--header", List),
    taken("--max-concurrency", Int),
    taken("--model", Text),
    taken("--input-len", Int),
    taken("--output-len", Int),
    taken("--tokenizer", Text),
    taken("--tokenizer-mode", Text),
    gap("--use-beam-search", Switch, "beam search is not requested; pass `use_beam_search` through --extra-body if the server takes it"),
    taken("--logprobs", Int),
    taken("--request-rate", Float),
    taken("--burstiness", Float),
    gap("--probe-request-rate", Float, "probe requests beside the workload are not sent; write a scenario with a second, slow phase of one-token requests"),
    taken("--disable-tqdm", Switch),
    taken("--num-warmups", Int),
    taken("--profile", Switch),
    taken("--save-result", Switch),
    taken("--save-detailed", Switch),
    taken("--append-result", Switch),
    taken("--metadata", List),
    taken("--result-dir", Text),
    taken("--result-filename", Text),
    taken("--ignore-eos", Switch),
    gap("--self-timed", Switch, TRACE),
    gap("--no-self-timed", Switch, TRACE),
    taken("--percentile-metrics", Text),
    taken("--metric-percentiles", Text),
    taken("--goodput", List),
    taken("--request-id-prefix", Text),
    taken("--top-p", Float),
    taken("--top-k", Int),
    taken("--min-p", Float),
    taken("--temperature", Float),
    taken("--frequency-penalty", Float),
    taken("--presence-penalty", Float),
    taken("--repetition-penalty", Float),
    taken("--served-model-name", Text),
    taken("--lora-modules", List),
    taken("--lora-assignment", Text),
    taken("--ramp-up-strategy", Text),
    taken("--ramp-up-start-rps", Int),
    taken("--ramp-up-end-rps", Int),
    taken("--ready-check-timeout-sec", Int),
    gap("--chat-template-kwargs", Json, "no chat template is applied on the client; send chat messages with --backend openai-chat and pass template options to the server through --extra-body"),
    taken("--extra-body", Json),
    gap("--skip-tokenizer-init", Switch, "the runner counts tokens itself; give --tokenizer o200k_base (the default) when the model's tokenizer is not at hand"),
    gap("--insecure", Switch, "TLS certificates are always verified; serve the benchmark over http:// on a trusted network or add the CA to the system store"),
    gap("--plot-timeline", Switch, PLOT),
    gap("--timeline-itl-thresholds", Text, PLOT),
    gap("--plot-dataset-stats", Switch, PLOT),
    // In vLLM 0.33.0, not in the source files first read.
    // Taken: the runner reads a tokenizer.json and runs no model code, so there is
    // nothing to trust; refusing it would break the one-word switch for no benefit.
    taken("--trust-remote-code", Switch),
    gap("--enable-multimodal-chat", Switch, MM),
    gap("--custom-ensure-client-side-data", Switch, "the custom dataset is always read by the runner itself; drop the flag"),
    gap("--asr-max-audio-len-sec", Float, "audio (ASR) requests are not generated; the runner benchmarks text generation"),
    gap("--asr-min-audio-len-sec", Float, "audio (ASR) requests are not generated; the runner benchmarks text generation"),
    gap("--bfcl-categories", Text, HF),
    gap("--speed-bench-dataset-subset", Text, SPEC),
    gap("--speed-bench-output-len", Int, SPEC),
    gap("--speed-bench-category", Text, SPEC),
    gap("--timed-trace-chunk-hash-size", Int, TRACE),
    gap("--timed-trace-sec-multiplier", Float, TRACE),
    gap("--timed-trace-label-timestamp", Text, TRACE),
    gap("--timed-trace-label-input-length", Text, TRACE),
    gap("--timed-trace-label-output-length", Text, TRACE),
    gap("--timed-trace-label-hash-ids", Text, TRACE),
];

/// The runner's own flags, beside vLLM's.
pub const OWN_FLAGS: &[FlagSpec] = &[
    // Writes the generated scenario, to edit and run with `runner run`.
    taken("--emit-scenario", Text),
    // Writes the scenario and prints the command, without running it.
    taken("--dry-run", Switch),
    // result.json, report.txt, report.html and requests.jsonl, as `runner run --output`.
    taken("--output", Text),
];

/// The flags given, by their canonical name, each with its values (a switch has none).
#[derive(Debug, Default)]
pub struct Parsed {
    values: BTreeMap<&'static str, Vec<String>>,
}

impl Parsed {
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    pub fn list(&self, name: &str) -> &[String] {
        self.values.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// An `Int` flag's value (checked when parsed).
    pub fn int(&self, name: &str) -> Option<i64> {
        self.text(name).and_then(|t| t.parse().ok())
    }

    /// A `Float` flag's value (checked when parsed).
    pub fn float(&self, name: &str) -> Option<f64> {
        self.text(name).and_then(parse_float)
    }
}

/// Python's `float()` spellings that matter here: numbers, `inf` and `infinity`.
fn parse_float(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        _ => t.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

pub fn spec(name: &str) -> Option<&'static FlagSpec> {
    VLLM_FLAGS
        .iter()
        .chain(OWN_FLAGS.iter())
        .find(|f| f.name == name)
}

/// Parses the arguments after `bench serve`.
pub fn parse(args: &[String]) -> Result<Parsed, FlagError> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(body) = arg.strip_prefix("--") else {
            return Err(FlagError::Positional(arg.clone()));
        };
        let (raw_name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let name = format!("--{}", raw_name.replace('_', "-"));
        let spec = spec(&name).ok_or_else(|| FlagError::Unknown(arg.clone()))?;
        if let Support::Gap(reason) = spec.support {
            return Err(FlagError::Gap {
                flag: spec.name.to_string(),
                reason,
            });
        }
        let (values, next) = take_values(spec, inline, args, i + 1)?;
        parsed.values.insert(spec.name, values);
        i = next;
    }
    Ok(parsed)
}

/// The values of the flag at `args[start - 1]`, and the index after them.
fn take_values(
    spec: &FlagSpec,
    inline: Option<String>,
    args: &[String],
    start: usize,
) -> Result<(Vec<String>, usize), FlagError> {
    let is_flag = |s: &String| s.starts_with("--");
    match spec.kind {
        FlagKind::Switch => match inline {
            Some(_) => Err(FlagError::SwitchValue(spec.name.to_string())),
            None => Ok((vec![], start)),
        },
        FlagKind::List => {
            let mut values: Vec<String> = inline.into_iter().collect();
            let mut next = start;
            while next < args.len() && !is_flag(&args[next]) {
                values.push(args[next].clone());
                next += 1;
            }
            Ok((values, next))
        }
        _ => {
            let (value, next) = match inline {
                Some(v) => (v, start),
                None => match args.get(start) {
                    Some(v) if !is_flag(v) || looks_negative(v) => (v.clone(), start + 1),
                    _ => return Err(FlagError::MissingValue(spec.name.to_string())),
                },
            };
            check_value(spec, &value)?;
            Ok((vec![value], next))
        }
    }
}

/// argparse takes `-5` as a value; `--x` never is one.
fn looks_negative(s: &str) -> bool {
    s.starts_with('-') && !s.starts_with("--")
}

fn check_value(spec: &FlagSpec, value: &str) -> Result<(), FlagError> {
    let ok = match spec.kind {
        FlagKind::Int => value.trim().parse::<i64>().is_ok(),
        FlagKind::Float => parse_float(value).is_some(),
        FlagKind::Json => serde_json::from_str::<serde_json::Value>(value).is_ok(),
        FlagKind::Switch | FlagKind::Text | FlagKind::List => true,
    };
    match ok {
        true => Ok(()),
        false => Err(FlagError::BadValue {
            flag: spec.name.to_string(),
            expected: match spec.kind {
                FlagKind::Int => "an integer",
                FlagKind::Float => "a number",
                _ => "JSON",
            },
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn values_lists_and_switches() {
        let p = parse(&args(&[
            "--num_prompts=5",
            "--header",
            "a=1",
            "b=2",
            "--ignore-eos",
            "--request-rate",
            "inf",
            "--seed",
            "-3",
        ]))
        .unwrap();
        assert_eq!(p.int("--num-prompts"), Some(5));
        assert_eq!(p.list("--header"), ["a=1", "b=2"]);
        assert!(p.has("--ignore-eos"));
        assert_eq!(p.float("--request-rate"), Some(f64::INFINITY));
        assert_eq!(p.int("--seed"), Some(-3));
    }

    #[test]
    fn unknown_gaps_and_bad_values_are_refused_by_name() {
        let err = |a: &[&str]| parse(&args(a)).unwrap_err().to_string();
        assert!(err(&["--num-prompt", "3"]).contains("--num-prompt"));
        assert!(err(&["--hf-split", "x"]).contains("--hf-split"));
        assert!(err(&["--num-prompts", "x"]).contains("an integer"));
        assert!(err(&["--num-prompts"]).contains("needs a value"));
        assert!(err(&["--ignore-eos=1"]).contains("--ignore-eos"));
        assert!(err(&["model"]).contains("model"));
    }

    #[test]
    fn every_flag_is_named_once() {
        let mut names: Vec<&str> = VLLM_FLAGS.iter().chain(OWN_FLAGS).map(|f| f.name).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
    }
}
