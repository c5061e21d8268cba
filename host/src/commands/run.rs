//! `runner run SCENARIO`: config → target → engine → report → outputs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Result};

use super::source::{load_scenario, LoadedScenario};
use super::targets::Targets;
use super::{load_tokenizer, runtime, virtual_runtime, EXIT_INTERRUPTED};
use crate::commands::cli::RunArgs;
use crate::commands::config::{RunConfig, TargetSpec};
use crate::measuring::engine::{self, EngineConfig, RunResult, StopReason};
use crate::measuring::thresholds::EXIT_THRESHOLDS_FAILED;
use crate::outputs::live_metrics::LiveMetrics;
use crate::outputs::otlp::OtlpExporter;
use crate::outputs::progress::{self, Progress};
use crate::outputs::report::{output, text, ReportParts, ReportPhase, RunHeader, RunReport};
use crate::safeguards::interrupt::Interrupts;
use crate::servers::control::ServerControl;
use crate::servers::server_metrics::{ScrapeConfig, Scraper};
use crate::sharding::merge::shard_file::{ShardFile, ShardRun, STREAM_FILE};
use crate::workloads::package::{self, Package};
use crate::workloads::scenario::{self, Scenario};
use crate::workloads::tokenizer::Tokenizer;

pub fn run(a: RunArgs) -> Result<i32> {
    let session = Session::open(&a)?;
    Ok(run_once(&session, &a, Print::Report)?.code)
}

/// Whether a run prints its report on stdout (a series prints only its last run's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Print {
    Report,
    Nothing,
}

/// A run that ended with a report: the report and the run's exit code.
pub(super) struct Ran {
    pub(super) report: RunReport,
    pub(super) code: i32,
}

/// One run, from loading the scenario to its outputs; an error once the report is out is
/// the run's own failure.
pub(super) fn run_once(session: &Session, a: &RunArgs, print: Print) -> Result<Ran> {
    let tokenizer = load_tokenizer(&a.tokenizer)?;
    let mut loaded = load_scenario(&a.source, tokenizer.clone(), &a.data_dirs, a.quiet)?;
    let config = RunConfig::new(a, &loaded.description, &mut *loaded.scenario)?;
    let target = Targets::connect(&config, &tokenizer, &session.rt)?;
    let mut header = run_header(&config, &loaded, &target, &tokenizer);
    let control = server_control(a, &config, &target, session)?;
    let finished = execute(
        session,
        loaded.scenario,
        &config,
        target,
        tokenizer,
        &control,
    )?;
    control.warn_unmatched();
    header.request_digest = Some(finished.result.digest.clone());
    let otlp = finished.otlp.clone();
    let failure = finish_shard(&config, &header, finished)?;
    // What was sent, not what --api asked for (chat messages go to chat whatever it says).
    // After the shard file: its header keeps `--api`, the same in every shard, which
    // `runner merge` checks.
    let used = crate::outputs::report::run_report::endpoints_used(
        failure.result.phases.iter().map(|p| &p.summary),
    );
    header.api = crate::outputs::report::run_report::api_used(&used, &header.api);
    let mut report = build_report(&config, header, &failure.result);
    report.otlp = otlp;
    if let Err(e) = write_and_print(&config, &report, print) {
        // The run's own failure (requests.jsonl cut by the same full disk) comes first:
        // the error that ends the command would hide it.
        if let Some(cut) = &failure.failure {
            crate::errln!("error: {cut}");
        }
        return Err(e);
    }
    let code = exit_code(&report, failure, config.shard.is_some())?;
    Ok(Ran { report, code })
}

/// What holds for the whole command: the run's secrets are hidden in every line, record
/// and file; signals are handled from the start (loading and the pre-run checks end at
/// once with exit code 130, the run itself stops and reports, see `interrupt`).
pub(super) struct Session {
    rt: tokio::runtime::Runtime,
    interrupts: Interrupts,
    /// The unpacked package's own signal watcher stands down while this is held.
    _signals: package::unpacked::SignalsHandledElsewhere,
}

impl Session {
    pub(super) fn open(a: &RunArgs) -> Result<Session> {
        let mut secrets = crate::safeguards::redact::Redactor::new(a.api_key.as_deref(), None);
        for target in &a.target {
            secrets.add_target(target);
        }
        secrets.add_header_args(&a.headers);
        if let Some(warning) = secrets.warning() {
            crate::errln!("{warning}");
        }
        crate::safeguards::redact::install(secrets);
        let rt = match a.virtual_time {
            true => virtual_runtime()?,
            false => runtime()?,
        };
        let interrupts = Interrupts::listen(&rt);
        let _signals = package::signals_handled_elsewhere();
        // A sweep opens thousands of connections; lift the soft descriptor limit to the
        // hard one.
        let _ = rlimit::increase_nofile_limit(u64::MAX);
        Ok(Session {
            rt,
            interrupts,
            _signals,
        })
    }
}

fn run_header(
    config: &RunConfig,
    loaded: &LoadedScenario,
    target: &Targets,
    tokenizer: &Tokenizer,
) -> RunHeader {
    let d = &loaded.description;
    RunHeader {
        scenario: d.name.clone(),
        description: d.description.clone(),
        params: config
            .params
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        seed: config.seed,
        target: target.label(),
        targets: match target.labels.len() {
            1 => vec![],
            _ => target.labels.clone(),
        },
        model: target.model(),
        api: config.api.name().to_string(),
        tokenizer: tokenizer.name().to_string(),
        request_digest: None,
        trace_id: Some(config.trace_id.hex()),
        stream_depends_on: scenario::dependence::stream_dependence(
            &*loaded.scenario,
            &config.declared_phases,
        ),
        runner_version: env!("CARGO_PKG_VERSION").to_string(),
        package: loaded.package.as_ref().map(package_id),
        scenario_digest: loaded.digest.clone(),
        wit_version: scenario::wasm::version::VERSION.to_string(),
        twin: super::targets::twin_provenance(&config.target),
        sim_overrides: super::targets::sim_overrides(&config.target),
        virtual_time: config.virtual_time,
    }
}

fn package_id(p: &Package) -> (String, String) {
    (p.manifest.name.clone(), p.manifest.version.clone())
}

/// A run that reached its end (or its first error), with when and how it began.
struct Finished {
    result: RunResult,
    started: SystemTime,
    clock_offset_ms: Option<f64>,
    /// What became of the `--otlp` spans.
    otlp: Option<crate::outputs::otlp::OtlpSummary>,
}

/// Runs the engine, with the progress display, from `--start-at` if given.
fn execute(
    session: &Session,
    scenario: Box<dyn Scenario>,
    config: &RunConfig,
    target: Targets,
    tokenizer: Arc<Tokenizer>,
    control: &Arc<ServerControl>,
) -> Result<Finished> {
    let mut engine_config = engine_config(config, target.models[0].clone());
    engine_config.control = control.clone();
    let otlp = config
        .otlp
        .as_deref()
        .map(OtlpExporter::start)
        .transpose()?;
    engine_config.record_tap = otlp.clone().map(|e| e as Arc<dyn engine::RecordTap>);
    engine_config.target_models = target.models.clone();
    if let Some(scraper) = start_server_metrics(config, &target)? {
        engine_config.live = engine::LiveView::with_server_metrics(scraper);
    }
    let clock_offset_ms = config.start_at.map(|at| {
        if !config.quiet {
            crate::errln!("waiting to start at {}", at.rfc3339());
        }
        at.wait()
    });
    let started = SystemTime::now();
    let known_phases = (!scenario.has_next_phase()).then_some(config.phases.len());
    let served = config
        .live_metrics
        .map(|addr| LiveMetrics::start(addr, engine_config.live.clone()))
        .transpose()?;
    let progress = Progress::start(
        engine_config.live.clone(),
        known_phases,
        progress::wanted(config.quiet || config.virtual_time),
    );
    // From here a signal stops the run, which then reports what finished.
    session.interrupts.run_started();
    let result = session.rt.block_on(engine::run(
        scenario,
        config.phases.clone(),
        target.clients,
        tokenizer,
        engine_config,
        session.interrupts.receiver(),
    ));
    progress.finish();
    drop(served);
    drop(target.sim);
    let otlp = otlp.map(|e| e.finish());
    if let Some(summary) = otlp.as_ref() {
        if !config.quiet || !summary.complete() {
            crate::errln!("{}", summary.line());
        }
    }
    Ok(Finished {
        result: result?,
        started,
        clock_offset_ms,
        otlp,
    })
}

/// The calls to every target around the phases (`--reset-prefix-cache`, `--profile-phase`,
/// and what a phase asks itself).
/// The shards of a run send to the same servers side by side: shard 0 alone calls them.
fn server_control(
    a: &RunArgs,
    config: &RunConfig,
    target: &Targets,
    session: &Session,
) -> Result<Arc<ServerControl>> {
    if let Some(plan) = config.shard.as_ref().filter(|p| p.shard.index != 0) {
        if a.reset_prefix_cache.is_some() || !a.profile_phase.is_empty() {
            crate::errln!(
                "note: shard {} leaves --reset-prefix-cache and --profile-phase to shard 0",
                plan.shard.index
            );
        }
        return Ok(Arc::default());
    }
    let urls: Vec<&str> = target.clients.iter().map(|c| c.base_url()).collect();
    let control = ServerControl::new(
        &urls,
        config.api_key.as_deref(),
        a.reset_prefix_cache,
        a.profile_phase.clone(),
    )?;
    Ok(Arc::new(control.stopped_by(session.interrupts.receiver())))
}

/// The scraper of every target's metrics, unless `--server-metrics off`, and of the
/// `--power-metrics` exporters.
fn start_server_metrics(config: &RunConfig, target: &Targets) -> Result<Option<Scraper>> {
    let (flag, interval) = &config.server_metrics;
    let targets: Vec<&str> = target.clients.iter().map(|c| c.base_url()).collect();
    let scrape = ScrapeConfig::for_run(
        flag.as_deref(),
        &targets,
        config.api_key.as_deref(),
        *interval,
        config.output.as_deref(),
    );
    // The scraper polls over TCP on the real clock: a virtual run reads no /metrics.
    if config.virtual_time {
        return Ok(None);
    }
    let mut scrape = scrape.unwrap_or_else(|| ScrapeConfig::none(*interval));
    scrape.power.clone_from(&config.power_metrics);
    if scrape.endpoints.is_empty() && scrape.power.is_empty() {
        return Ok(None);
    }
    Ok(Some(Scraper::start(scrape)?))
}

fn engine_config(config: &RunConfig, model: String) -> EngineConfig {
    let output = config.output.as_ref();
    EngineConfig {
        api: config.api,
        model,
        usage: config.usage,
        drain_timeout: config.drain_timeout,
        interrupt_drain: Duration::from_secs(5),
        lookahead: 256,
        metrics: config.metrics.clone(),
        records: output.map(|d| d.join("requests.jsonl")),
        seed: config.seed,
        max_error_rate: config.max_error_rate,
        live: engine::LiveView::new(),
        shard: config
            .shard
            .clone()
            .map(|plan| std::sync::Arc::new(plan) as std::sync::Arc<dyn engine::RequestStripe>),
        targets: match &config.target {
            TargetSpec::Servers(urls) => urls.len(),
            TargetSpec::Simulator { .. } => 1,
        },
        target_models: vec![],
        session_header: config.session_header.clone(),
        max_steps_per_session: config.max_steps_per_session,
        control: Default::default(),
        record_tap: None,
        answer_text: config.keep_answer_text.then(Default::default),
        stream_log: config
            .shard
            .as_ref()
            .and(output)
            .map(|d| d.join(STREAM_FILE)),
    }
}

/// A run with its failure, if it failed part-way after sending something.
struct Outcome {
    result: RunResult,
    failure: Option<engine::EngineError>,
}

/// A run that failed before sending anything, and a shard that failed at all (its partial
/// file must not be merged), end with the error; a shard writes its shard.json.
fn finish_shard(config: &RunConfig, header: &RunHeader, f: Finished) -> Result<Outcome> {
    let mut result = f.result;
    let mut failure = result.failure.take();
    if let Some(e) = failure.take_if(|_| config.shard.is_some() || nothing_sent(&result)) {
        return Err(e.into());
    }
    if let (Some(plan), Some(dir)) = (&config.shard, &config.output) {
        ShardFile::from_run(&ShardRun {
            plan,
            header,
            result: &result,
            declared: &config.declared_phases,
            metrics: &config.metrics,
            start_at: config.start_at,
            clock_offset_ms: f.clock_offset_ms,
            started: f.started,
            dir,
        })?
        .write(dir)?;
    }
    Ok(Outcome { result, failure })
}

fn build_report(config: &RunConfig, header: RunHeader, result: &RunResult) -> RunReport {
    let phases = result
        .phases
        .iter()
        .map(|p| ReportPhase {
            summary: p.summary.clone(),
            warmup: p.spec.warmup,
            arrival: p.spec.arrival.describe(),
            ended: (p.stop != StopReason::Exhausted).then(|| p.stop.describe()),
            cut: p.cut,
            server: p.server.clone().map(|mut s| {
                if let Some(e) = &mut s.energy {
                    e.count_tokens(p.summary.total_output_tokens);
                }
                s
            }),
        })
        .collect();
    let parts = ReportParts {
        header,
        phases,
        notes: result.notes.clone(),
        shards: None,
        otlp: None,
    };
    let mut report = RunReport::new(parts, &config.thresholds);
    report.shard = config
        .shard
        .as_ref()
        .map(|plan| (plan.shard.index, plan.shard.count));
    report
}

/// Every file is written before the report is printed: a reader that closes stdout early
/// (`| head -1`) must not cost any of them.
fn write_and_print(config: &RunConfig, report: &RunReport, print: Print) -> Result<()> {
    // The header is printed with the body, as report.txt has it: only the run knows the
    // API its requests went to (chat messages go to chat whatever --api says) and the
    // request stream's digest.
    let body = if config.quiet {
        text::render_body(report)
    } else {
        text::render(report)
    };
    let written = (|| -> Result<()> {
        if let Some(path) = &config.save_result {
            output::write_result_json(report, path)?;
        }
        if let Some(dir) = &config.output {
            output::write_outputs(report, dir)?;
        }
        Ok(())
    })();
    if print == Print::Report {
        crate::out!("{body}");
    }
    if let Some(leftover) = crate::outputs::report::leftover_cache::check(report) {
        crate::errln!("{}", leftover.warning());
    }
    written
}

/// The exit code: the run's own error first, then an interrupt (130), failed thresholds
/// (99, what CI reads), then a run that stopped early or where nothing succeeded (1).
fn exit_code(report: &RunReport, outcome: Outcome, sharded: bool) -> Result<i32> {
    let Outcome { result, failure } = outcome;
    if let Some(e) = failure {
        return Err(e.into());
    }
    if result.interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    if let Some(line) = report.failed_thresholds() {
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
    if let Some(cancelled) = all_cancelled(&result) {
        bail!("all {cancelled} requests were cancelled before they finished (by the scenario's cancel_after_tokens or cancel_after_ms, or by an interrupt): nothing was measured but their time to first token");
    }
    // A shard may own none of a run's few sessions: its empty part still merges.
    if nothing_sent(&result) && sharded {
        crate::errln!("note: this shard had none of the run's requests to send (its shard.json merges as an empty part)");
        return Ok(0);
    }
    if nothing_sent(&result) {
        bail!("nothing was sent: the scenario's phases ended before their first request (an empty dataset, or max_requests of 0?)");
    }
    if result.phases.iter().all(|p| p.summary.completed == 0) {
        bail!("no request succeeded; see the failure counts above");
    }
    Ok(0)
}

/// No request of any phase was sent: none finished, well or badly, and none was cancelled.
fn nothing_sent(result: &RunResult) -> bool {
    result
        .phases
        .iter()
        .all(|p| p.summary.completed + p.summary.failed + p.summary.cancelled == 0)
}

/// How many requests were sent when every one of them was cancelled (none finished).
fn all_cancelled(result: &RunResult) -> Option<u64> {
    let sum = |f: fn(&crate::measuring::metrics::PhaseSummary) -> u64| -> u64 {
        result.phases.iter().map(|p| f(&p.summary)).sum()
    };
    let cancelled = sum(|s| s.cancelled);
    (cancelled > 0 && sum(|s| s.completed + s.failed) == 0).then_some(cancelled)
}
