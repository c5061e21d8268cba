//! The command line's grammar: clap types and value parsers. What each command does is in
//! `commands/`; this file only says what may be written.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::measuring::client::Api;
use crate::measuring::thresholds::{self, Threshold};
use crate::servers::sim::SimArgs;
use crate::sharding::shard::{Shard, ShardError, StartAt};
use crate::workloads::scenario::params::{parse_duration_secs, parse_override};

#[derive(Parser)]
#[command(
    name = "runner",
    version,
    about = "Run a scripted LLM-serving benchmark scenario (`runner FILE` is `runner run FILE`)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a scenario against a target (the built-in simulated server when no --target)
    Run(Box<RunArgs>),
    /// Show a scenario's name, description and parameters with their defaults (and, for a
    /// package, its manifest and digest)
    Info(InfoArgs),
    /// Pack a scenario package directory (with a scenario.toml) into one archive
    Pack(PackArgs),
    /// Check a package: its digest, manifest, interface version, parameters and phases
    Verify(VerifyArgs),
    /// Publish a package archive to an OCI registry (oci://HOST[:PORT]/REPO:TAG), also
    /// tagged sha256-<package digest>; prints the package digest and the manifest digest
    Push(PushArgs),
    /// Fetch a package from an OCI registry (oci://HOST[:PORT]/REPO:TAG or @sha256:DIGEST),
    /// checked as a run checks it, into a .scenario.tar.gz; prints its package digest
    Pull(PullArgs),
    /// Serve the simulated OpenAI-compatible server on loopback
    Sim(Box<SimCommand>),
    /// Compare saved results (result.json): each against the first, metric by metric
    Compare(CompareArgs),
    /// Merge the --output directories of a sharded run (runner run --shard I/N) into one
    /// report: result.json, report.txt and report.html as a single run writes them
    Merge(MergeArgs),
    /// Look at a request trace before replaying it
    #[command(subcommand)]
    Trace(TraceCommand),
    /// vLLM's benchmark command lines: `runner bench serve` takes `vllm bench serve`'s flags
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Fit a twin of the server from runs' --output directories: the simulator's engine
    /// model (step costs, concurrency limit, KV capacity) to run against with
    /// --sim-profile twin.toml
    Calibrate(CalibrateArgs),
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// The --output directories of runs against the server (requests.jsonl, result.json,
    /// server_metrics.jsonl where scraped)
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Where to write the twin
    #[arg(long, default_value = "twin.toml", value_name = "FILE")]
    pub out: PathBuf,
    /// Leave the phase of this name out of the fit and report the twin's error on it,
    /// replaying its requests against the twin (repeatable)
    #[arg(long, value_name = "PHASE")]
    pub holdout: Vec<String>,
    /// Fit nothing: replay every measured phase of the runs against this twin and print,
    /// per phase, the real run's figures against the twin's and where they part most
    #[arg(long, value_name = "TWIN", conflicts_with = "holdout")]
    pub twin: Option<PathBuf>,
    /// Replay against the twin in virtual time (`run --virtual-time`): the prediction is
    /// the twin's model alone, the same figure on any machine however busy
    #[arg(long)]
    pub virtual_time: bool,
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// `vllm bench serve`'s flags, verbatim, run as a generated scenario (--emit-scenario
    /// FILE writes it; `runner bench serve --help` lists what is taken and refused)
    #[command(disable_help_flag = true)]
    Serve(BenchServeArgs),
}

#[derive(Args)]
pub struct BenchServeArgs {
    /// The flags of `vllm bench serve`
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub flags: Vec<OsString>,
}

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Requests, sessions, turns, prefix reuse by hash id and the prefix-cache hit rate a
    /// trace (Mooncake or Bailian JSONL, Azure CSV) would give
    Analyze(TraceAnalyzeArgs),
}

#[derive(Args)]
pub struct TraceAnalyzeArgs {
    /// The trace file (its format is recognised from its first line)
    pub file: PathBuf,
    /// Tokens per hash id block (16 in Bailian traces, 512 in Mooncake's)
    #[arg(long, value_name = "N")]
    pub block_tokens: Option<u64>,
    /// Cache sizes in blocks for the prefix-cache hit rate (repeatable; 0 = unlimited)
    /// [default: unlimited, half and a tenth of the trace's distinct blocks]
    #[arg(long = "cache-blocks", value_name = "N", num_args = 1..)]
    pub cache_blocks: Vec<u64>,
    /// Print the analysis as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct MergeArgs {
    /// Every shard's --output directory, one per shard 0..N
    #[arg(required = true, num_args = 1.., value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the merged result.json, report.txt, report.html and requests.jsonl
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print only the results (no header)
    #[arg(short, long)]
    pub quiet: bool,
    /// Pass/fail threshold checked on the merged run (repeatable), as `runner run
    /// --threshold`; exit code 99 when one fails in any phase
    #[arg(long = "threshold", value_name = "METRIC<VALUE", value_parser = parse_threshold_arg)]
    pub thresholds: Vec<Threshold>,
}

#[derive(Args)]
pub struct CompareArgs {
    /// Result files written by --output (result.json) or --save-result; the first is the baseline
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Print markdown tables, for pasting into a document
    #[arg(long)]
    pub markdown: bool,
    /// Compare results of different scenarios or parameters anyway (with a warning)
    #[arg(long)]
    pub force: bool,
    /// Print one table instead: a row per phase with each result's total token throughput
    /// and mean TPOT and their change in % against the first (GPUStack's A/B table)
    #[arg(long)]
    pub headline: bool,
}

/// How a scenario is named on the command line.
#[derive(Args)]
pub struct ScenarioArg {
    /// A .rhai script, a .wasm component, a package directory or .scenario.tar.gz archive,
    /// or the name of a package in the scenario path (team-a/chat-mix, or team-a/chat-mix@1.2.0)
    pub scenario: PathBuf,
    /// A directory holding installed packages (repeatable; RUNNER_SCENARIO_PATH adds more,
    /// `:`-separated)
    #[arg(long = "scenario-path", value_name = "DIR")]
    pub scenario_path: Vec<PathBuf>,
    /// A registry (HOST or HOST:PORT) that oci:// references may reach over plain HTTP
    /// (repeatable; loopback registries always may)
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registry: Vec<String>,
}

#[derive(Args)]
pub struct PushArgs {
    /// The package: an archive (.scenario.tar.gz, written by `runner pack`) or a package
    /// directory, packed on the way
    pub package: PathBuf,
    /// Where to publish it: oci://HOST[:PORT]/REPO:TAG
    #[arg(value_name = "oci://HOST[:PORT]/REPO:TAG")]
    pub reference: String,
    /// A registry (HOST or HOST:PORT) that may be reached over plain HTTP (repeatable;
    /// loopback registries always may)
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registry: Vec<String>,
    /// Move the tag even when it already holds another package (without it, that push is
    /// refused)
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct PullArgs {
    /// What to fetch: oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:DIGEST
    #[arg(value_name = "oci://HOST[:PORT]/REPO:TAG")]
    pub reference: String,
    /// Where to write the archive: a directory (the file keeps its NAME-VERSION.scenario.tar.gz
    /// name there) or a file name; the current directory when not given
    #[arg(short, long, value_name = "DIR|FILE")]
    pub output: Option<PathBuf>,
    /// A registry (HOST or HOST:PORT) that may be reached over plain HTTP (repeatable;
    /// loopback registries always may)
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registry: Vec<String>,
}

#[derive(Args)]
pub struct PackArgs {
    /// The package directory (holding scenario.toml)
    pub dir: PathBuf,
    /// Where to write the archive
    #[arg(long = "out", value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub scenario: ScenarioArg,
    /// Fail unless the package digest is this one (what `runner pack` and `runner push`
    /// print as the package digest)
    #[arg(long, value_name = "sha256:DIGEST")]
    pub expect: Option<String>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub source: ScenarioArg,
    /// Override a scenario parameter (repeatable): -p requests=200
    #[arg(short = 'p', long = "param", value_name = "NAME=VALUE", value_parser = parse_override)]
    pub params: Vec<(String, String)>,
    /// Seed of the run (same as -p seed=N for scenarios with a `seed` parameter)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Base URL of an OpenAI-compatible server; without it the built-in simulator is used.
    /// Repeatable: requests go round-robin over the targets, unless a request names one
    /// (its `target` index, 0 for the first), and the report adds a per-target table
    #[arg(long, value_name = "URL")]
    pub target: Vec<String>,
    /// An HTTP header sent with every request (repeatable): --header 'x-tenant: acme'. A
    /// scenario's per-request header of the same name replaces it. Values of secret-looking
    /// names (authorization, api keys, tokens, cookies, passwords) are never printed
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Send every request of a session (a scenario's `session_step`) with this header,
    /// its value the session's own (the same on every request of one session, different
    /// for any two), so a router or a KV-aware scheduler sees the session: vLLM's
    /// `X-Session-ID` when given without a name
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "X-Session-ID")]
    pub session_header: Option<String>,
    /// The most steps (`session_step` calls) one session may take: a session past it ends
    /// the run in one line, as a scenario that never ends its sessions would otherwise
    /// send until stopped (a warning comes at a tenth of it)
    #[arg(long, value_name = "N", default_value_t = crate::measuring::engine::MAX_STEPS_PER_SESSION,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps_per_session: u32,
    /// Keep each answer's text (without reasoning) in requests.jsonl as `answer_text`,
    /// at most 64 KiB per answer and 64 MiB per run (then ""); bench serve's
    /// --save-detailed sets it for vLLM's `generated_texts`
    #[arg(long)]
    pub keep_answer_text: bool,
    /// Model name; by default the first one the server lists at /v1/models
    #[arg(long = "model", id = "target_model", value_name = "NAME")]
    pub model: Option<String>,
    /// Endpoint for plain prompts (chat messages always use /v1/chat/completions)
    #[arg(long, value_enum, default_value = "completions")]
    pub api: Api,
    /// API key sent as a bearer token (never printed)
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Tokenizer: o200k_base, cl100k_base, or a path to a Hugging Face tokenizer.json
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// Percentiles to report, comma-separated (e.g. 50,90,95,99,99.9)
    #[arg(long, default_value = "99")]
    pub percentiles: String,
    /// Goodput SLOs in ms, e.g. --goodput ttft:200 tpot:50 e2el:5000
    #[arg(long, num_args = 1.., value_name = "METRIC:MS")]
    pub goodput: Vec<String>,
    /// Write the result as JSON with the keys of `vllm bench serve --save-result`
    #[arg(long, value_name = "FILE")]
    pub save_result: Option<PathBuf>,
    /// Directory for requests.jsonl (written as requests finish) and result.json
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Scrape the server's Prometheus metrics from URL [default: each target's /metrics, summed], or `off`
    #[arg(long = "server-metrics", value_name = "URL|off")]
    pub server_metrics: Option<String>,
    /// Time between scrapes of the server's metrics (e.g. 1s, 250ms; at least 100ms)
    #[arg(long = "server-metrics-interval", value_name = "DURATION", default_value = "1s", value_parser = crate::servers::server_metrics::parse_interval)]
    pub server_metrics_interval: Duration,
    /// Serve the run's own metrics while it runs, in Prometheus text at
    /// http://ADDR/metrics: result.json's names prefixed `runner_`, the phase as a label
    /// (the phase's counters, and the last 5 s's throughput and latency quantiles).
    /// Loopback only, e.g. 127.0.0.1:9464
    #[arg(long = "live-metrics", value_name = "ADDR", value_parser = crate::outputs::live_metrics::parse_addr)]
    pub live_metrics: Option<std::net::SocketAddr>,
    /// Scrape a GPU energy or power exporter (NVIDIA DCGM exporter, AMD device-metrics
    /// exporter) at URL on the server metrics' ticks: each phase's energy, mean power,
    /// joules per output token and output tokens per joule; repeatable (exporters add up)
    #[arg(long = "power-metrics", value_name = "URL", value_parser = crate::servers::server_metrics::energy::parse_url)]
    pub power_metrics: Vec<String>,
    /// Empty every target's prefix cache before the run's first phase (`run`) or before
    /// each phase (`phase`): vLLM's POST /reset_prefix_cache (served with
    /// VLLM_SERVER_DEV_MODE=1), SGLang's /flush_cache, llama.cpp's slot erase (needs
    /// --slot-save-path); a server without one is a warning and the run goes on
    #[arg(long, value_enum, value_name = "run|phase")]
    pub reset_prefix_cache: Option<crate::servers::control::ResetWhen>,
    /// Run the server's profiler over the phase of this name (repeatable): POST
    /// /start_profile just before its clock starts, /stop_profile once its last response
    /// is in (vLLM started with VLLM_TORCH_PROFILER_DIR set, SGLang)
    #[arg(long = "profile-phase", value_name = "NAME")]
    pub profile_phase: Vec<String>,
    /// How long in-flight requests may finish once a phase is stopped by its duration or stop
    /// condition (e.g. 30s, 5m); a phase that sent all its requests waits for every one
    #[arg(long, default_value = "60s", value_parser = parse_duration_arg)]
    pub drain_timeout: Duration,
    /// Per-request timeout (e.g. 600s); a request still running then fails as `timeout`
    #[arg(long, default_value = "10m", value_parser = parse_timeout_arg)]
    pub request_timeout: Duration,
    /// What the chunk times are: `kernel`, when the kernel received the bytes (Linux
    /// SO_TIMESTAMPING; the user-space read time where the socket gives none), or `user`,
    /// when the client read them; reports show the client's own delay between the two
    #[arg(
        long,
        value_enum,
        default_value = "kernel",
        env = "RUNNER_RECEIVE_CLOCK"
    )]
    pub receive_clock: crate::measuring::client::ReceiveClock,
    /// Fail a request that has no generated content this long after it was sent (e.g. 30s),
    /// as `first_token_timeout`; by default only --request-timeout applies
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout_arg)]
    pub first_token_timeout: Option<Duration>,
    /// Each request is sent with the header `x-request-id: <PREFIX><phase>-<index>`, kept
    /// as `request_id` in requests.jsonl, to find it in the server's logs [default:
    /// `runner-` and 8 random hex digits and `-`, new for every run]
    #[arg(long, value_name = "PREFIX")]
    pub request_id_prefix: Option<String>,
    /// Export one span per request over OTLP/HTTP (protobuf) to URL, e.g.
    /// http://127.0.0.1:4318/v1/traces: its trace and span ids are the request's
    /// `traceparent`, its events the first token and the first answer token. Batched off
    /// the request path; an exporter that fails is a warning, never a failed run
    #[arg(long, value_name = "URL", value_parser = crate::outputs::otlp::parse_url)]
    pub otlp: Option<String>,
    /// End the run when more than this fraction of a phase's finished requests failed
    /// (0.1 or 10%), checked once 20 have finished; the report is printed and the exit code
    /// is 1. Failed requests are never retried: a benchmark counts them
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    pub max_error_rate: Option<f64>,
    /// Do not ask for `stream_options.include_usage` (for servers that reject it)
    #[arg(long, conflicts_with = "continuous_usage")]
    pub no_usage: bool,
    /// Also ask for usage on every chunk (vLLM's `continuous_usage_stats`), so per-chunk
    /// token counts come from the server
    #[arg(long)]
    pub continuous_usage: bool,
    /// Another directory the scenario may read data files from (repeatable)
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dirs: Vec<PathBuf>,
    /// Print only the results (no header, no progress display, no scenario log() lines;
    /// warnings and errors still go to stderr)
    #[arg(short, long)]
    pub quiet: bool,
    /// Pass/fail threshold checked at the end of the run (repeatable), e.g.
    /// 'p99_ttft_ms<500' or 'error_rate<0.01', or on one of several targets
    /// 'p99_ttft_ms[target=1]<500'; exit code 99 when one fails in any phase
    #[arg(long = "threshold", value_name = "METRIC<VALUE", value_parser = parse_threshold_arg)]
    pub thresholds: Vec<Threshold>,
    /// Run as shard I of N (0-based: 0/4 .. 3/4): send only this shard's stripe of the one
    /// seeded schedule and write mergeable results to --output, for `runner merge`. Without
    /// it: JOB_COMPLETION_INDEX (N from --shards or RUNNER_SHARDS), then
    /// SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT
    #[arg(long, value_name = "I/N", value_parser = parse_shard_arg)]
    pub shard: Option<Shard>,
    /// Number of shards, for a shard index taken from JOB_COMPLETION_INDEX
    #[arg(long, value_name = "N")]
    pub shards: Option<u64>,
    /// Run the whole scenario even inside a Kubernetes Indexed Job or a Slurm array (ignore
    /// their index variables)
    #[arg(long, conflicts_with_all = ["shard", "shards"])]
    pub no_shard: bool,
    /// Run phases that have no max_requests, no max_duration and no stop function against
    /// a real --target (they end only when the scenario runs out of requests, if ever)
    #[arg(long)]
    pub unbounded: bool,
    /// Start sending at this wall-clock instant (RFC 3339, or unix seconds), so that all
    /// shards begin together; each records how late it actually started
    #[arg(long, value_name = "TIME", value_parser = parse_start_at_arg)]
    pub start_at: Option<StartAt>,
    /// Run the scenario N times (2 to 100), each run's outputs in --output's run-1 … run-N,
    /// then each headline figure's mean, standard deviation and 95% confidence interval
    /// over the runs; every run gets a fresh seed derived from the first's unless
    /// --same-seed, and the built-in simulator is started afresh for each run
    #[arg(long, value_name = "N", value_parser = parse_repeat_arg)]
    pub repeat: Option<u32>,
    /// With --repeat: every run uses the same seed (the same requests), so the spread is
    /// the server's and the client's alone
    #[arg(long, requires = "repeat")]
    pub same_seed: bool,
    /// With --repeat: flag a figure whose coefficient of variation (std / mean) across the
    /// runs is above PCT percent
    #[arg(long, value_name = "PCT", default_value = "10", requires = "repeat", value_parser = parse_cv_arg)]
    pub cv_threshold: f64,
    /// Run on a simulated clock: the scenario, the client and the built-in simulator share
    /// one thread, and time jumps ahead whenever all of them wait, so a 20-minute scenario
    /// ends in seconds with the same requests. Only with the built-in simulator (no
    /// --target); the report says its numbers are a simulation, not a measurement
    #[arg(long, conflicts_with_all = ["target", "repeat", "live_metrics", "start_at"])]
    pub virtual_time: bool,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// A run count for --repeat: 2 to [`MAX_RUNS`](crate::outputs::report::series::MAX_RUNS).
pub fn parse_repeat_arg(s: &str) -> Result<u32, String> {
    let max = crate::outputs::report::series::MAX_RUNS;
    match s.trim().parse::<u32>() {
        Ok(n) if (2..=max).contains(&n) => Ok(n),
        Ok(n) if n > max => Err(format!(
            "at most {max} runs in one series, got {n} (the interval narrows as 1/√N: {max} runs already make it a tenth of one run's spread)"
        )),
        _ => Err(format!(
            "expected a number of runs from 2 to {max} (a spread needs two runs; leave --repeat out for one), got `{s}`"
        )),
    }
}

/// A percentage above 0 for --cv-threshold (`10` or `10%`), kept as a fraction.
pub fn parse_cv_arg(s: &str) -> Result<f64, String> {
    let t = s.trim();
    match t.strip_suffix('%').unwrap_or(t).trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v / 100.0),
        _ => Err(format!(
            "expected a percentage above 0 such as 10 or 2.5%, got `{s}`"
        )),
    }
}

pub fn parse_shard_arg(s: &str) -> Result<Shard, String> {
    s.parse().map_err(|e: ShardError| e.to_string())
}

pub fn parse_start_at_arg(s: &str) -> Result<StartAt, String> {
    s.parse().map_err(|e: ShardError| e.to_string())
}

#[derive(Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub source: ScenarioArg,
}

#[derive(Args)]
pub struct SimCommand {
    /// Port on 127.0.0.1
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Tokenizer used to count prompt tokens
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    #[command(flatten)]
    pub sim: SimArgs,
}

pub fn parse_threshold_arg(s: &str) -> Result<Threshold, String> {
    s.parse()
        .map_err(|e: thresholds::ThresholdError| e.to_string())
}

pub fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration_secs(s)
        .and_then(crate::workloads::scenario::params::duration_of)
        .ok_or_else(|| format!("expected a duration like 30s, 5m or 90, got `{s}`"))
}

/// A duration above zero: a zero timeout would fail every request.
pub fn parse_timeout_arg(s: &str) -> Result<Duration, String> {
    match parse_duration_arg(s)? {
        d if d.is_zero() => Err(format!("a timeout must be above zero, got `{s}`")),
        d => Ok(d),
    }
}

/// A fraction in [0, 1): `0.1` or `10%`.
pub fn parse_rate_arg(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let value = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match value {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a fraction of failed requests in [0, 1) such as 0.1 or 10%, got `{s}`"
        )),
    }
}

/// A command-line error on one line: clap's first paragraph (what is wrong), without its
/// usage block and tips.
pub fn usage_error_line(rendered: &str) -> String {
    let first = rendered
        .split("\n\n")
        .next()
        .unwrap_or(rendered)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let what = first.strip_prefix("error: ").unwrap_or(&first);
    format!("error: {what} (see --help)")
}

/// Subcommands and the flags that print and exit; any other first argument is a scenario.
const KNOWN_FIRST: [&str; 17] = [
    "run",
    "calibrate",
    "bench",
    "info",
    "pack",
    "verify",
    "push",
    "pull",
    "sim",
    "compare",
    "merge",
    "trace",
    "help",
    "-h",
    "--help",
    "-V",
    "--version",
];

/// Parses the process arguments; `runner FILE …` means `runner run FILE …`.
pub fn parse(mut args: Vec<OsString>) -> Result<Cli, clap::Error> {
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        if !KNOWN_FIRST.contains(&first) {
            args.insert(1, "run".into());
        }
    }
    Cli::try_parse_from(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_fractions_or_percentages() {
        assert_eq!(parse_rate_arg("0.25"), Ok(0.25));
        assert_eq!(parse_rate_arg("10%"), Ok(0.1));
        assert_eq!(parse_rate_arg("0"), Ok(0.0));
        for bad in ["1", "150%", "-0.1", "x", "NaN"] {
            assert!(parse_rate_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn repeat_counts_and_cv_thresholds_are_bounded() {
        assert_eq!(parse_repeat_arg("5"), Ok(5));
        assert_eq!(parse_repeat_arg("100"), Ok(100));
        for bad in ["0", "1", "-3", "x"] {
            assert!(
                parse_repeat_arg(bad).unwrap_err().contains("from 2 to 100"),
                "{bad}"
            );
        }
        assert!(parse_repeat_arg("101").unwrap_err().contains("at most 100"));
        assert_eq!(parse_cv_arg("10"), Ok(0.1));
        assert_eq!(parse_cv_arg("2.5%"), Ok(0.025));
        for bad in ["0", "-1", "x", "inf"] {
            assert!(parse_cv_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_errors_fit_one_line() {
        let rendered = "error: the following required arguments were not provided:\n  <SCENARIO>\n\nUsage: runner run <SCENARIO>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(rendered),
            "error: the following required arguments were not provided: <SCENARIO> (see --help)"
        );
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
