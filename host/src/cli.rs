//! The command line: parse, load, run, report. Every user error ends here as one line on
//! stderr and a non-zero exit code, never a panic.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use sha2::Digest;

use crate::client::{Api, Client, Timeouts, UsageRequest};
use crate::display::{escape_control, escape_control_multiline};
use crate::engine::{self, EngineConfig, RunResult, StopReason};
use crate::interrupt::Interrupts;
use crate::merge;
use crate::metrics::{parse_percentiles, MetricsOptions, PhaseSummary, Slo};
use crate::package::{self, Package, Resolved};
use crate::progress::{self, Progress};
use crate::report::{self, RunHeader};
use crate::scenario::files::FileAccess;
use crate::scenario::params::{parse_duration_secs, parse_override};
use crate::scenario::{self, Description, HostContext, Params, Scenario};
use crate::shard::{Shard, ShardError, ShardPlan, StartAt};
use crate::sim::{SimArgs, SimServer};
use crate::thresholds::{self, Threshold, EXIT_THRESHOLDS_FAILED};
use crate::tokenizer::Tokenizer;

pub use crate::interrupt::EXIT_INTERRUPTED;

#[derive(Parser)]
#[command(
    name = "runner",
    version,
    about = "Run a scripted LLM-serving benchmark scenario (`runner FILE` is `runner run FILE`)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario against a target (the built-in simulated server when no --target)
    Run(Box<RunArgs>),
    /// Show a scenario's name, description and parameters with their defaults (and, for a
    /// package, its manifest and digest)
    Info(InfoArgs),
    /// Pack a scenario package directory (with a scenario.toml) into one archive
    Pack(PackArgs),
    /// Check a package: its digest, manifest, interface version, parameters and phases
    Verify(VerifyArgs),
    /// Serve the simulated OpenAI-compatible server on loopback
    Sim(Box<SimCommand>),
    /// Compare saved results (result.json): each against the first, metric by metric
    Compare(CompareArgs),
    /// Merge the --output directories of a sharded run (runner run --shard I/N) into one
    /// report: result.json, report.txt and report.html as a single run writes them
    Merge(MergeArgs),
}

#[derive(Args)]
struct MergeArgs {
    /// Every shard's --output directory, one per shard 0..N
    #[arg(required = true, num_args = 1.., value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where to write the merged result.json, report.txt, report.html and requests.jsonl
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Print only the results (no header)
    #[arg(short, long)]
    quiet: bool,
    /// Pass/fail threshold checked on the merged run (repeatable), as `runner run
    /// --threshold`; exit code 99 when one fails in any phase
    #[arg(long = "threshold", value_name = "METRIC<VALUE", value_parser = parse_threshold_arg)]
    thresholds: Vec<Threshold>,
}

#[derive(Args)]
struct CompareArgs {
    /// Result files written by --output (result.json) or --save-result; the first is the baseline
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json")]
    results: Vec<PathBuf>,
    /// Print markdown tables, for pasting into a document
    #[arg(long)]
    markdown: bool,
    /// Compare results of different scenarios or parameters anyway (with a warning)
    #[arg(long)]
    force: bool,
}

/// How a scenario is named on the command line.
#[derive(Args)]
struct ScenarioArg {
    /// A .rhai script, a .wasm component, a package directory or .scenario.tar.gz archive,
    /// or the name of a package in the scenario path (team-a/chat-mix, or team-a/chat-mix@1.2.0)
    scenario: PathBuf,
    /// A directory holding installed packages (repeatable; RUNNER_SCENARIO_PATH adds more,
    /// `:`-separated)
    #[arg(long = "scenario-path", value_name = "DIR")]
    scenario_path: Vec<PathBuf>,
}

#[derive(Args)]
struct PackArgs {
    /// The package directory (holding scenario.toml)
    dir: PathBuf,
    /// Where to write the archive
    #[arg(long = "out", value_name = "DIR", default_value = ".")]
    out: PathBuf,
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    scenario: ScenarioArg,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    source: ScenarioArg,
    /// Override a scenario parameter (repeatable): -p requests=200
    #[arg(short = 'p', long = "param", value_name = "NAME=VALUE", value_parser = parse_override)]
    params: Vec<(String, String)>,
    /// Seed of the run (same as -p seed=N for scenarios with a `seed` parameter)
    #[arg(long)]
    seed: Option<u64>,
    /// Base URL of an OpenAI-compatible server; without it the built-in simulator is used
    #[arg(long, value_name = "URL")]
    target: Option<String>,
    /// Model name; by default the first one the server lists at /v1/models
    #[arg(long = "model", id = "target_model", value_name = "NAME")]
    model: Option<String>,
    /// Endpoint for plain prompts (chat messages always use /v1/chat/completions)
    #[arg(long, value_enum, default_value = "completions")]
    api: Api,
    /// API key sent as a bearer token (never printed)
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Tokenizer: o200k_base, cl100k_base, or a path to a Hugging Face tokenizer.json
    #[arg(long, default_value = "o200k_base")]
    tokenizer: String,
    /// Percentiles to report, comma-separated (e.g. 50,90,95,99,99.9)
    #[arg(long, default_value = "99")]
    percentiles: String,
    /// Goodput SLOs in ms, e.g. --goodput ttft:200 tpot:50 e2el:5000
    #[arg(long, num_args = 1.., value_name = "METRIC:MS")]
    goodput: Vec<String>,
    /// Write the result as JSON with the keys of `vllm bench serve --save-result`
    #[arg(long, value_name = "FILE")]
    save_result: Option<PathBuf>,
    /// Directory for requests.jsonl (written as requests finish) and result.json
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// How long in-flight requests may finish once a phase is stopped by its duration or stop
    /// condition (e.g. 30s, 5m); a phase that sent all its requests waits for every one
    #[arg(long, default_value = "60s", value_parser = parse_duration_arg)]
    drain_timeout: Duration,
    /// Per-request timeout (e.g. 600s); a request still running then fails as `timeout`
    #[arg(long, default_value = "10m", value_parser = parse_timeout_arg)]
    request_timeout: Duration,
    /// Fail a request that has no generated content this long after it was sent (e.g. 30s),
    /// as `first_token_timeout`; by default only --request-timeout applies
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout_arg)]
    first_token_timeout: Option<Duration>,
    /// Each request is sent with the header `x-request-id: <PREFIX><phase>-<index>`, kept
    /// as `request_id` in requests.jsonl, to find it in the server's logs [default:
    /// `runner-` and 8 random hex digits and `-`, new for every run]
    #[arg(long, value_name = "PREFIX")]
    request_id_prefix: Option<String>,
    /// End the run when more than this fraction of a phase's finished requests failed
    /// (0.1 or 10%), checked once 20 have finished; the report is printed and the exit code
    /// is 1. Failed requests are never retried: a benchmark counts them
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    max_error_rate: Option<f64>,
    /// Do not ask for `stream_options.include_usage` (for servers that reject it)
    #[arg(long, conflicts_with = "continuous_usage")]
    no_usage: bool,
    /// Also ask for usage on every chunk (vLLM's `continuous_usage_stats`), so per-chunk
    /// token counts come from the server
    #[arg(long)]
    continuous_usage: bool,
    /// Another directory the scenario may read data files from (repeatable)
    #[arg(long = "data-dir", value_name = "DIR")]
    data_dirs: Vec<PathBuf>,
    /// Print only the results (no header, no progress display)
    #[arg(short, long)]
    quiet: bool,
    /// Pass/fail threshold checked at the end of the run (repeatable), e.g.
    /// 'p99_ttft_ms<500' or 'error_rate<0.01'; exit code 99 when one fails in any phase
    #[arg(long = "threshold", value_name = "METRIC<VALUE", value_parser = parse_threshold_arg)]
    thresholds: Vec<Threshold>,
    /// Run as shard I of N (0-based: 0/4 .. 3/4): send only this shard's stripe of the one
    /// seeded schedule and write mergeable results to --output, for `runner merge`. Without
    /// it: JOB_COMPLETION_INDEX (N from --shards or RUNNER_SHARDS), then
    /// SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT
    #[arg(long, value_name = "I/N", value_parser = parse_shard_arg)]
    shard: Option<Shard>,
    /// Number of shards, for a shard index taken from JOB_COMPLETION_INDEX
    #[arg(long, value_name = "N")]
    shards: Option<u64>,
    /// Run the whole scenario even inside a Kubernetes Indexed Job or a Slurm array (ignore
    /// their index variables)
    #[arg(long, conflicts_with_all = ["shard", "shards"])]
    no_shard: bool,
    /// Run phases that have no max_requests, no max_duration and no stop function against
    /// a real --target (they end only when the scenario runs out of requests, if ever)
    #[arg(long)]
    unbounded: bool,
    /// Start sending at this wall-clock instant (RFC 3339, or unix seconds), so that all
    /// shards begin together; each records how late it actually started
    #[arg(long, value_name = "TIME", value_parser = parse_start_at_arg)]
    start_at: Option<StartAt>,
    #[command(flatten)]
    sim: SimArgs,
}

fn parse_shard_arg(s: &str) -> Result<Shard, String> {
    s.parse().map_err(|e: ShardError| e.to_string())
}

fn parse_start_at_arg(s: &str) -> Result<StartAt, String> {
    s.parse().map_err(|e: ShardError| e.to_string())
}

#[derive(Args)]
struct InfoArgs {
    #[command(flatten)]
    source: ScenarioArg,
}

#[derive(Args)]
struct SimCommand {
    /// Port on 127.0.0.1
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Tokenizer used to count prompt tokens
    #[arg(long, default_value = "o200k_base")]
    tokenizer: String,
    #[command(flatten)]
    sim: SimArgs,
}

fn parse_threshold_arg(s: &str) -> Result<Threshold, String> {
    s.parse()
        .map_err(|e: thresholds::ThresholdError| e.to_string())
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration_secs(s)
        .and_then(crate::scenario::params::duration_of)
        .ok_or_else(|| format!("expected a duration like 30s, 5m or 90, got `{s}`"))
}

/// A duration above zero: a zero timeout would fail every request.
fn parse_timeout_arg(s: &str) -> Result<Duration, String> {
    match parse_duration_arg(s)? {
        d if d.is_zero() => Err(format!("a timeout must be above zero, got `{s}`")),
        d => Ok(d),
    }
}

/// A fraction in [0, 1): `0.1` or `10%`.
fn parse_rate_arg(s: &str) -> Result<f64, String> {
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
fn usage_error_line(rendered: &str) -> String {
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

/// Entry point of the binary; returns the process exit code.
pub fn main() -> i32 {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    // `runner FILE …` means `runner run FILE …`.
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        let known = [
            "run",
            "info",
            "pack",
            "verify",
            "sim",
            "compare",
            "merge",
            "help",
            "-h",
            "--help",
            "-V",
            "--version",
        ];
        if !known.contains(&first) {
            args.insert(1, "run".into());
        }
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            crate::errln!("{}", usage_error_line(&e.render().to_string()));
            return 2;
        }
        Err(e) => {
            // --help and --version.
            let _ = e.print();
            return 0;
        }
    };
    let result = match cli.command {
        Command::Run(a) => run_command(*a),
        Command::Info(a) => info_command(a).map(|_| 0),
        Command::Pack(a) => pack_command(a).map(|_| 0),
        Command::Verify(a) => verify_command(a).map(|_| 0),
        Command::Sim(a) => sim_command(*a).map(|_| 0),
        Command::Compare(a) => compare_command(a),
        Command::Merge(a) => merge_command(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            crate::errln!("error: {}", crate::redact::text(&error_line(&e)));
            1
        }
    }
}

/// The error and its causes on one line; a cause its parent already quotes is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
    }
    one_line(&s)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn load_tokenizer(spec: &str) -> Result<Arc<Tokenizer>> {
    Ok(Arc::new(Tokenizer::load(spec)?))
}

fn scenario_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A scenario ready to configure, with its description (package defaults applied) and
/// where it came from.
struct Loaded {
    scenario: Box<dyn Scenario>,
    description: Description,
    package: Option<Package>,
    /// What identifies the workload's code: the package digest, or the sha256 of the file.
    digest: String,
}

fn load_scenario(
    arg: &ScenarioArg,
    tokenizer: Arc<Tokenizer>,
    data_dirs: &[PathBuf],
    quiet: bool,
) -> Result<Loaded> {
    let search = package::search_path(&arg.scenario_path);
    let (entry, package) = match package::resolve(&arg.scenario, &search).map_err(|e| anyhow!(e))? {
        Resolved::File(path) => (path, None),
        Resolved::Package(p) => (p.entry(), Some(*p)),
    };
    for d in data_dirs {
        if !d.is_dir() {
            bail!("--data-dir {} is not a directory", d.display());
        }
    }
    let files = match &package {
        Some(p) => FileAccess::package(&p.root, data_dirs),
        None => FileAccess::lone_file(&scenario_dir(&entry), data_dirs),
    };
    let scenario = scenario::load(&entry, HostContext::new(tokenizer, files, quiet))?;
    let mut description = scenario.describe().clone();
    let digest = match &package {
        Some(p) => {
            p.apply_defaults(&mut description).map_err(|e| anyhow!(e))?;
            p.digest.clone()
        }
        None => hex::encode(sha2::Sha256::digest(
            std::fs::read(&entry).with_context(|| format!("cannot read {}", entry.display()))?,
        )),
    };
    Ok(Loaded {
        scenario,
        description,
        package,
        digest,
    })
}

fn pack_command(a: PackArgs) -> Result<()> {
    if !a.out.is_dir() {
        bail!("--out {} is not a directory", a.out.display());
    }
    let (archive, p) = package::pack(&a.dir, &a.out).map_err(|e| anyhow!(e))?;
    let m = &p.manifest;
    crate::outln!(
        "packed {} {} ({}) into {}",
        m.name,
        m.version,
        m.entry,
        archive.display()
    );
    crate::outln!("sha256 {}", p.digest);
    Ok(())
}

fn verify_command(a: VerifyArgs) -> Result<()> {
    let tokenizer = load_tokenizer("o200k_base")?;
    let mut loaded = load_scenario(&a.scenario, tokenizer, &[], true)?;
    let params = Params::resolve(
        &a.scenario.scenario.display().to_string(),
        &loaded.description.params,
        &[],
    )?;
    loaded.scenario.configure(&params)?;
    let phases = loaded.scenario.phases()?;
    let phases = if loaded.scenario.has_next_phase() {
        format!("{} (then adaptive)", phases.len())
    } else {
        phases.len().to_string()
    };
    match &loaded.package {
        Some(p) => crate::outln!(
            "ok: {} {} — digest {} matches its content; interface {}; entry {} loads; {} parameters, {} phases",
            p.manifest.name,
            p.manifest.version,
            p.digest,
            p.manifest.interface,
            p.manifest.entry,
            loaded.description.params.len(),
            phases.len()
        ),
        None => crate::outln!(
            "ok: {} (a single file, no manifest) — sha256 {}; {} parameters, {} phases",
            a.scenario.scenario.display(),
            loaded.digest,
            loaded.description.params.len(),
            phases.len()
        ),
    }
    Ok(())
}

fn info_command(a: InfoArgs) -> Result<()> {
    let tokenizer = load_tokenizer("o200k_base")?;
    let loaded = load_scenario(&a.source, tokenizer, &[], true)?;
    let d = &loaded.description;
    // Names, descriptions and help come from the package: shown, never obeyed.
    crate::outln!(
        "{}  ({})",
        escape_control(&d.name),
        a.source.scenario.display()
    );
    if !d.description.is_empty() {
        crate::outln!("{}", escape_control_multiline(&d.description));
    }
    match &loaded.package {
        Some(p) => {
            let m = &p.manifest;
            crate::outln!("\nPackage:    {} {}", m.name, m.version);
            if !m.description.is_empty() {
                crate::outln!("            {}", escape_control_multiline(&m.description));
            }
            if !m.authors.is_empty() {
                crate::outln!("Authors:    {}", escape_control(&m.authors.join(", ")));
            }
            crate::outln!("Entry:      {}", m.entry);
            crate::outln!("Interface:  {}", m.interface);
            if !m.data.is_empty() {
                crate::outln!("Data:       {}", m.data.join(", "));
            }
            crate::outln!("Digest:     sha256 {}", p.digest);
            if let Some(t) = &m.target {
                for (label, v) in [
                    ("Server flags", &t.server_flags),
                    ("Model", &t.model),
                    ("Notes", &t.notes),
                ] {
                    if let Some(v) = v {
                        let v = match label {
                            "Notes" => escape_control_multiline(v),
                            _ => escape_control(v),
                        };
                        crate::outln!("Recommended {label}: {v}");
                    }
                }
            }
        }
        None => crate::outln!("\nsha256 {}", loaded.digest),
    }
    if d.params.is_empty() {
        crate::outln!("\nNo parameters.");
        return Ok(());
    }
    crate::outln!("\nParameters (override with -p NAME=VALUE):");
    let name_w = d
        .params
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let def_w = d
        .params
        .iter()
        .map(|p| p.default.to_string().len())
        .max()
        .unwrap_or(0)
        .max(7);
    crate::outln!("  {:<name_w$}  {:<def_w$}  meaning", "name", "default");
    for p in &d.params {
        crate::outln!(
            "  {:<name_w$}  {:<def_w$}  {}",
            escape_control(&p.name),
            escape_control(&p.default.to_string()),
            escape_control(&p.help)
        );
    }
    Ok(())
}

fn compare_command(a: CompareArgs) -> Result<i32> {
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
    crate::out!("{}", r.text);
    Ok(0)
}

/// The shard's plan and the phases as it runs them, once the run is known to be shardable.
fn shard_plan(
    shard: Shard,
    scenario: &dyn Scenario,
    a: &RunArgs,
    phases: &[scenario::PhaseSpec],
) -> Result<(ShardPlan, Vec<scenario::PhaseSpec>)> {
    let name = a.source.scenario.display();
    if a.output.is_none() {
        bail!("shard {shard}: --output DIR is required (the shard's mergeable results go there)");
    }
    // Phases or requests that depend on responses differ from shard to shard: their
    // union would not be the single run's stream.
    if scenario.has_next_phase() || scenario.wants_responses() {
        bail!(
            "{name} adapts to responses (next_phase or on_response), so its request stream cannot be split into shards; run it unsharded"
        );
    }
    Ok(ShardPlan::new(shard, phases))
}

fn merge_command(a: MergeArgs) -> Result<i32> {
    let merged = merge::merge(&a.dirs, &a.thresholds)?;
    // Shard files carry servers' messages: escaped for report.txt as for the terminal.
    let body = escape_control_multiline(&merged.render_body()).into_owned();
    if !a.quiet {
        crate::out!("{}", report::render_header(&merged.header));
        crate::outln!();
    }
    // The files first, as `run` does: stdout may be a pipe closed early.
    if let Some(out) = &a.output {
        merged.write(&a.dirs, out, &body)?;
    }
    crate::out!("{body}");
    Ok(
        match failed_thresholds(&merged.verdicts, merged.many_phases()) {
            Some(line) => {
                crate::errln!("error: {line}");
                EXIT_THRESHOLDS_FAILED
            }
            None => 0,
        },
    )
}

/// A phase with no bound on requests or time runs against a real server until the
/// scenario runs out of requests, which may be never: refused unless asked for.
fn refuse_unbounded(file: &Path, phases: &[scenario::PhaseSpec]) -> Result<()> {
    match phases
        .iter()
        .find(|p| p.max_requests.is_none() && p.max_duration.is_none())
    {
        Some(p) => bail!(
            "{}: phase `{}` has no max_requests and no max_duration, so against a real server it ends only when the scenario runs out of requests, if ever; set one, or pass --unbounded",
            file.display(),
            p.name
        ),
        None => Ok(()),
    }
}

/// `N of M thresholds failed: ...`, naming each failed one with its value (and its phase
/// when there are several); `None` when all passed.
fn failed_thresholds(verdicts: &[thresholds::Verdict], many_phases: bool) -> Option<String> {
    let failed: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(|v| {
            let phase = if many_phases {
                format!(" in phase `{}`", v.phase)
            } else {
                String::new()
            };
            format!("{} ({}{phase})", v.threshold, v.value_text())
        })
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "{} of {} thresholds failed: {}",
            failed.len(),
            verdicts.len(),
            failed.join(", ")
        )
    })
}

fn sim_command(a: SimCommand) -> Result<()> {
    // 10,000 open streams need as many sockets: lift the soft limit to the hard one.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let tokenizer = load_tokenizer(&a.tokenizer)?;
    let mut config = a.sim.to_config()?;
    let counter = tokenizer.clone();
    config.prompt_token_counter = Some(Arc::new(move |text: &str| counter.count(text)));
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = crate::sim::bind(a.port)
            .with_context(|| format!("cannot listen on 127.0.0.1:{}", a.port))?;
        crate::errln!(
            "simulated OpenAI-compatible server ({} profile) on http://127.0.0.1:{}",
            a.sim.profile,
            a.port
        );
        tokio::select! {
            r = crate::sim::serve(listener, config) => r.context("the simulated server stopped"),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

fn run_command(a: RunArgs) -> Result<i32> {
    // Before anything is sent or printed: the key and the target's credentials are hidden
    // in every line, record and file from here on.
    crate::redact::install(crate::redact::Redactor::new(
        a.api_key.as_deref(),
        a.target.as_deref(),
    ));
    // Signals are handled from the start: loading and the pre-run checks end at once
    // with exit code 130, the run itself stops and reports (see `interrupt`).
    let rt = runtime()?;
    let interrupts = Interrupts::listen(&rt);
    // Those handlers, not the unpacked package's own watcher, act on signals from here on.
    let _signals = package::signals_handled_elsewhere();
    // A sweep opens thousands of connections; lift the soft descriptor limit to the hard one.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let tokenizer = load_tokenizer(&a.tokenizer)?;
    let loaded = load_scenario(&a.source, tokenizer.clone(), &a.data_dirs, a.quiet)?;
    let Loaded {
        mut scenario,
        description,
        package,
        digest: scenario_digest,
    } = loaded;
    let mut overrides = a.params.clone();
    if let (Some(seed), Some((_, value))) = (a.seed, a.params.iter().find(|(n, _)| n == "seed")) {
        bail!("--seed {seed} and -p seed={value} both set the seed: give only one");
    }
    let declares_seed = description.params.iter().any(|p| p.name == "seed");
    if let (Some(seed), true) = (a.seed, declares_seed) {
        overrides.push(("seed".into(), seed.to_string()));
    }
    let params = Params::resolve(
        &a.source.scenario.display().to_string(),
        &description.params,
        &overrides,
    )?;
    let seed = if declares_seed {
        params.seed()
    } else {
        a.seed.unwrap_or(0)
    };
    scenario.configure(&params)?;
    let phases = scenario.phases()?;
    if a.target.is_some() && !a.unbounded && !scenario.has_stop() {
        refuse_unbounded(&a.source.scenario, &phases)?;
    }
    let declared_phases = phases.clone();
    let (shard_plan, phases) = match Shard::resolve(a.shard, a.shards, |name| {
        std::env::var(name).ok().filter(|_| !a.no_shard)
    })? {
        Some(shard) => {
            let (plan, phases) = shard_plan(shard, &*scenario, &a, &phases)?;
            (Some(plan), phases)
        }
        None => (None, phases),
    };

    // Thresholds of the command line, then those the scenario declares.
    let mut checks = a.thresholds.clone();
    checks.extend(
        thresholds::parse_all(&description.thresholds)
            .map_err(|e| anyhow!("{}: {e}", a.source.scenario.display()))?,
    );
    let mut percentiles =
        parse_percentiles(&a.percentiles).map_err(|e| anyhow!("--percentiles: {e}"))?;
    // A threshold on a percentile the report would not compute gets it computed.
    percentiles.extend(thresholds::missing_percentiles(&checks, &percentiles));
    let goodput = if a.goodput.is_empty() {
        None
    } else {
        Some(
            a.goodput
                .join(" ")
                .parse::<Slo>()
                .map_err(|e| anyhow!("--goodput: {e}"))?,
        )
    };
    let metrics = MetricsOptions {
        percentiles: percentiles.clone(),
        goodput,
    };

    // The target: a real server, or the built-in simulator on loopback.
    let (sim, target, target_label) = match &a.target {
        Some(url) => (None, url.clone(), crate::redact::string(url.clone())),
        None => {
            let mut config = a.sim.to_config()?;
            let counter = tokenizer.clone();
            config.prompt_token_counter = Some(Arc::new(move |text: &str| counter.count(text)));
            let server = SimServer::start(config, 0)?;
            let url = server.base_url();
            let label = format!("built-in simulator, profile {} ({url})", a.sim.profile);
            (Some(server), url, label)
        }
    };
    let timeouts = Timeouts {
        request: a.request_timeout,
        first_token: a.first_token_timeout,
    };
    let request_id_prefix = a
        .request_id_prefix
        .clone()
        .unwrap_or_else(|| format!("runner-{:08x}-", rand::random::<u32>()));
    let client = Client::new(&target, a.api_key.clone(), timeouts, request_id_prefix)?;
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    }

    let usage = match (a.no_usage, a.continuous_usage) {
        (true, _) => UsageRequest::None,
        (_, true) => UsageRequest::Continuous,
        _ => UsageRequest::Final,
    };
    let model = rt.block_on(client.preflight(a.model.as_deref(), a.api, usage))?;
    let mut header = RunHeader {
        scenario: description.name.clone(),
        description: description.description.clone(),
        params: params
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        seed,
        target: target_label,
        model: crate::redact::string(model.clone()),
        api: a.api.name().to_string(),
        tokenizer: tokenizer.name().to_string(),
        request_digest: None,
        runner_version: env!("CARGO_PKG_VERSION").to_string(),
        package: package
            .as_ref()
            .map(|p| (p.manifest.name.clone(), p.manifest.version.clone())),
        scenario_digest,
        wit_version: scenario::wasm::version::VERSION.to_string(),
    };
    if !a.quiet {
        crate::out!("{}", report::render_header(&header));
        crate::outln!();
    }

    let config = EngineConfig {
        api: a.api,
        model,
        usage,
        drain_timeout: a.drain_timeout,
        interrupt_drain: Duration::from_secs(5),
        lookahead: 256,
        metrics: metrics.clone(),
        records: a.output.as_ref().map(|d| d.join("requests.jsonl")),
        seed,
        max_error_rate: a.max_error_rate,
        live: engine::LiveView::new(),
        shard: shard_plan.clone(),
        stream_log: shard_plan
            .as_ref()
            .and(a.output.as_ref())
            .map(|d| d.join(merge::shard_file::STREAM_FILE)),
    };
    let clock_offset_ms = a.start_at.map(|at| {
        if !a.quiet {
            crate::errln!("waiting to start at {}", at.rfc3339());
        }
        at.wait()
    });
    let started = std::time::SystemTime::now();
    let known_phases = (!scenario.has_next_phase()).then_some(phases.len());
    let progress = Progress::start(config.live.clone(), known_phases, progress::wanted(a.quiet));
    // From here a signal stops the run, which then reports what finished.
    interrupts.run_started();
    let result = rt.block_on(engine::run(
        scenario,
        phases,
        client,
        tokenizer.clone(),
        config,
        interrupts.receiver(),
    ));
    progress.finish();
    let mut result: RunResult = result?;
    drop(sim);
    // A run that failed part-way reports what finished, then its error; one that failed
    // before sending anything, and a shard (whose partial file must not be merged), only
    // the error.
    let mut failure = result.failure.take();
    if let Some(e) = failure.take_if(|_| shard_plan.is_some() || nothing_sent(&result)) {
        return Err(e.into());
    }
    header.request_digest = Some(result.digest.clone());
    if let (Some(plan), Some(dir)) = (&shard_plan, &a.output) {
        merge::shard_file::ShardFile::from_run(&merge::shard_file::ShardRun {
            plan,
            header: &header,
            result: &result,
            declared: &declared_phases,
            metrics: &metrics,
            start_at: a.start_at,
            clock_offset_ms,
            started,
            dir,
        })?
        .write(dir)?;
    }

    let goodput_on = !a.goodput.is_empty();
    let phases: Vec<report::text::PhaseText> = result
        .phases
        .iter()
        .map(|p| report::text::PhaseText {
            summary: &p.summary,
            arrival: p.spec.arrival.describe(),
            warmup: p.spec.warmup,
            ended: (p.stop != StopReason::Exhausted).then(|| p.stop.describe()),
            cut: p.cut,
        })
        .collect();
    let mut body = report::text::render_phases(&phases, &percentiles, goodput_on);
    let measured: Vec<PhaseSummary> = result
        .phases
        .iter()
        .filter(|p| !p.spec.warmup)
        .map(|p| p.summary.clone())
        .collect();
    let verdicts = thresholds::check_all(&checks, &measured);
    body += &report::text::render_notes(&result.notes);
    body += &report::text::render_thresholds(&verdicts, measured.len() > 1);
    body += &format!("Request stream digest (sha256): {}\n", result.digest);
    let body = crate::redact::string(body);

    let mut json = result_json(&header, &result, &percentiles);
    if let (false, Some(map)) = (checks.is_empty(), json.as_object_mut()) {
        let list = verdicts.iter().map(thresholds::Verdict::to_json).collect();
        map.insert("thresholds".into(), serde_json::Value::Array(list));
    }
    // Every file is written before the report is printed: a reader that closes stdout
    // early (`| head -1`) must not cost any of them.
    let written = (|| -> Result<()> {
        if let Some(path) = &a.save_result {
            write_json(path, &json)?;
        }
        if let Some(dir) = &a.output {
            write_json(&dir.join("result.json"), &json)?;
            let text = format!("{}\n{body}", report::render_header(&header));
            write_text(&dir.join("report.txt"), &escape_control_multiline(&text))?;
            if measured.len() > 1 {
                write_text(
                    &dir.join("phases.md"),
                    &report::render_phase_table_markdown(&measured),
                )?;
                write_text(
                    &dir.join("phases.csv"),
                    &report::render_phase_table_csv(&measured),
                )?;
            }
            let phases_out: Vec<report::output::PhaseOut> = result
                .phases
                .iter()
                .map(|p| report::output::PhaseOut {
                    summary: &p.summary,
                    warmup: p.spec.warmup,
                })
                .collect();
            report::output::write_reports(
                dir,
                &report::output::RunOut {
                    header: &header,
                    phases: &phases_out,
                    percentiles: &percentiles,
                    goodput: goodput_on,
                    verdicts: &verdicts,
                    notes: &result.notes,
                },
            )?;
        }
        Ok(())
    })();
    crate::out!("{body}");
    written?;
    if let Some(e) = failure {
        return Err(e.into());
    }
    if result.interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    // Failed thresholds decide the exit code before the run's own failures: CI reads 99.
    if let Some(line) = failed_thresholds(&verdicts, measured.len() > 1) {
        crate::errln!("error: {line}");
        return Ok(EXIT_THRESHOLDS_FAILED);
    }
    if let Some(p) = result
        .phases
        .iter()
        .find(|p| matches!(p.stop, StopReason::MaxErrorRate { .. }))
    {
        bail!(
            "the run stopped early in phase `{}`: {}",
            p.spec.name,
            p.stop.describe()
        );
    }
    let completed: u64 = result.phases.iter().map(|p| p.summary.completed).sum();
    if nothing_sent(&result) {
        bail!("nothing was sent: the scenario's phases ended before their first request (an empty dataset, or max_requests of 0?)");
    }
    if completed == 0 {
        bail!("no request succeeded; see the failure counts above");
    }
    Ok(0)
}

/// No request of any phase finished, well or badly.
fn nothing_sent(result: &RunResult) -> bool {
    result
        .phases
        .iter()
        .all(|p| p.summary.completed + p.summary.failed == 0)
}

/// One measured phase: the vLLM keys at the top level. Several: a `phases` array of them.
/// Warm-up phases are listed under `warmup_phases` with their counts only.
fn result_json(header: &RunHeader, result: &RunResult, percentiles: &[f64]) -> serde_json::Value {
    let mut objects: Vec<serde_json::Value> = result
        .phases
        .iter()
        .filter(|p| !p.spec.warmup)
        .map(|p| {
            let extra =
                serde_json::Map::from_iter([("phase".to_string(), serde_json::json!(p.spec.name))]);
            serde_json::Value::Object(report::json::vllm_result_json_with(
                header,
                &p.summary,
                percentiles,
                &extra,
                None,
            ))
        })
        .collect();
    let warmups: Vec<serde_json::Value> = result
        .phases
        .iter()
        .filter(|p| p.spec.warmup)
        .map(|p| serde_json::json!({"phase": p.spec.name, "completed": p.summary.completed, "failed": p.summary.failed}))
        .collect();
    let mut value = if objects.len() == 1 {
        objects.remove(0)
    } else {
        serde_json::json!({
            "scenario": header.scenario,
            "request_digest": result.digest,
            "phases": objects,
        })
    };
    if let (false, Some(map)) = (warmups.is_empty(), value.as_object_mut()) {
        map.insert("warmup_phases".into(), serde_json::Value::Array(warmups));
    }
    if let (false, Some(map)) = (result.notes.is_empty(), value.as_object_mut()) {
        let notes = result.notes.iter().map(|(k, v)| (k.clone(), v.to_json()));
        map.insert(
            "scenario_result".into(),
            serde_json::Value::Object(notes.collect()),
        );
    }
    value
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot serialise the result")?;
    write_text(path, &(text + "\n"))
}

/// Every file the CLI writes passes the redaction of the run's secrets.
fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, crate::redact::text(text).as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
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
