//! [`RunConfig`]: what `runner run` was asked to do, built once from the command line and
//! the loaded scenario (its parameters, phases and declared thresholds). Nothing below
//! this point reads clap types.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::commands::cli::RunArgs;
use crate::measuring::client::headers::parse_header_arg;
use crate::measuring::client::{Api, ReceiveClock, Timeouts, TraceId, UsageRequest};
use crate::measuring::metrics::{parse_percentiles, MetricsOptions, Slo};
use crate::measuring::thresholds::{self, Threshold};
use crate::servers::sim::SimConfig;
use crate::sharding::shard::{Shard, ShardPlan, StartAt};
use crate::workloads::scenario::{Description, Params, PhaseSpec, Scenario};

/// Where the requests go.
pub enum TargetSpec {
    /// Real servers' base URLs (`--target`, one or more, in order).
    Servers(Vec<String>),
    /// The built-in simulator on loopback, with its configuration and profile name.
    Simulator {
        config: Box<SimConfig>,
        profile: String,
    },
}

/// One run's settings, validated.
pub struct RunConfig {
    /// The scenario as named on the command line, for messages.
    pub source: PathBuf,
    pub params: Params,
    pub seed: u64,
    /// The command line's thresholds, then the scenario's.
    pub thresholds: Vec<Threshold>,
    /// Percentiles (with those the thresholds read) and the goodput SLO.
    pub metrics: MetricsOptions,
    pub timeouts: Timeouts,
    pub target: TargetSpec,
    /// This process's shard of the run, when sharded.
    pub shard: Option<ShardPlan>,
    /// The phases as the scenario declared them.
    pub declared_phases: Vec<PhaseSpec>,
    /// The phases as this process runs them (its shard's share when sharded).
    pub phases: Vec<PhaseSpec>,
    /// `x-request-id` of each request: this prefix, then `<phase>-<index>`.
    pub request_id_prefix: String,
    /// The run's W3C trace: each request is a span of it (`traceparent`), new every run.
    pub trace_id: TraceId,
    /// `--otlp`: where each request's span is exported.
    pub otlp: Option<String>,
    pub api: Api,
    pub usage: UsageRequest,
    pub model: Option<String>,
    pub api_key: Option<String>,
    /// `--header`s, sent with every request.
    pub headers: Vec<(String, String)>,
    /// `--session-header`: the header naming each request's session.
    pub session_header: Option<String>,
    /// `--max-steps-per-session`.
    pub max_steps_per_session: u32,
    /// `--keep-answer-text`: each record keeps its answer's text (bounded).
    pub keep_answer_text: bool,
    /// `--receive-clock`: what the latencies' chunk times are.
    pub receive_clock: ReceiveClock,
    pub drain_timeout: Duration,
    pub max_error_rate: Option<f64>,
    pub output: Option<PathBuf>,
    pub save_result: Option<PathBuf>,
    /// `--server-metrics` (a URL, `off`, or each target's /metrics when `None`) and its interval.
    pub server_metrics: (Option<String>, Duration),
    /// `--power-metrics`: energy or power exporters, scraped on the same ticks.
    pub power_metrics: Vec<String>,
    /// `--live-metrics`: where the run's own metrics are served while it runs.
    pub live_metrics: Option<std::net::SocketAddr>,
    pub quiet: bool,
    pub start_at: Option<StartAt>,
    /// `--virtual-time`: the run is on a simulated clock (its numbers are a simulation).
    pub virtual_time: bool,
}

impl RunConfig {
    /// Resolves the parameters, configures `scenario` with them and reads its phases.
    pub fn new(
        a: &RunArgs,
        description: &Description,
        scenario: &mut dyn Scenario,
    ) -> Result<RunConfig> {
        let source = a.source.scenario.clone();
        let (params, seed) = resolve_params(a, description)?;
        scenario.configure(&params)?;
        let declared_phases = scenario.phases()?;
        if !a.target.is_empty() && !a.unbounded && !scenario.has_stop() {
            refuse_unbounded(&source, &declared_phases)?;
        }
        let (shard, phases) = plan_shard(a, scenario, &declared_phases)?;
        let mut checks = a.thresholds.clone();
        checks.extend(
            thresholds::parse_all(&description.thresholds)
                .map_err(|e| anyhow!("{}: {e}", source.display()))?,
        );
        let metrics = metrics_options(a, &checks)?;
        Ok(RunConfig {
            source,
            params,
            seed,
            thresholds: checks,
            metrics,
            timeouts: Timeouts {
                request: a.request_timeout,
                first_token: a.first_token_timeout,
            },
            target: target_spec(a)?,
            shard,
            declared_phases,
            phases,
            request_id_prefix: a
                .request_id_prefix
                .clone()
                .unwrap_or_else(|| format!("runner-{:08x}-", rand::random::<u32>())),
            trace_id: TraceId::random(),
            otlp: a.otlp.clone(),
            api: a.api,
            usage: usage_request(a),
            model: a.model.clone(),
            api_key: a.api_key.clone(),
            headers: a
                .headers
                .iter()
                .map(|h| parse_header_arg(h).map_err(|e| anyhow!("--header: {e}")))
                .collect::<Result<_>>()?,
            session_header: a
                .session_header
                .as_deref()
                .map(session_header)
                .transpose()?,
            max_steps_per_session: a.max_steps_per_session,
            keep_answer_text: a.keep_answer_text,
            receive_clock: a.receive_clock,
            drain_timeout: a.drain_timeout,
            max_error_rate: a.max_error_rate,
            output: a.output.clone(),
            save_result: a.save_result.clone(),
            server_metrics: (a.server_metrics.clone(), a.server_metrics_interval),
            power_metrics: a.power_metrics.clone(),
            live_metrics: a.live_metrics,
            quiet: a.quiet,
            start_at: a.start_at,
            virtual_time: a.virtual_time,
        })
    }

    /// Whether goodput was asked for (its rows are then shown).
    pub fn goodput(&self) -> bool {
        self.metrics.goodput.is_some()
    }
}

/// `--session-header NAME`: a header the client may set (not `Host`, `Content-Length`, …)
/// and not a credential's (`Authorization`, `x-api-key`, `Cookie`, any name
/// [`redact::secret_header`] hides): the session id would replace the API key the
/// client sends there, every request would fail to authenticate, and the ids would be
/// hidden in every output as secrets.
///
/// [`redact::secret_header`]: crate::safeguards::redact::secret_header
fn session_header(name: &str) -> Result<String> {
    let (name, _) =
        parse_header_arg(&format!("{name}: s")).map_err(|e| anyhow!("--session-header: {e}"))?;
    if crate::safeguards::redact::secret_header(&name) {
        bail!("--session-header: `{name}` carries credentials (the API key goes in `Authorization` or `x-api-key`), not a session id: name another header, e.g. X-Session-ID");
    }
    Ok(name)
}

/// The parameters with `-p` and `--seed` applied, and the run's seed: the scenario's
/// `seed` parameter when it declares one, else `--seed` (0 without it).
fn resolve_params(a: &RunArgs, description: &Description) -> Result<(Params, u64)> {
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
    Ok((params, seed))
}

/// A phase with no bound on requests or time runs against a real server until the
/// scenario runs out of requests, which may be never: refused unless asked for. A phase
/// of sessions is bounded by its count of them, as a dataset bounds its phase (each
/// session ends by its script's own turn count).
fn refuse_unbounded(file: &Path, phases: &[PhaseSpec]) -> Result<()> {
    match phases.iter().find(|p| {
        p.max_requests.is_none() && p.max_duration.is_none() && p.sessions.is_none()
    }) {
        Some(p) => bail!(
            "{}: phase `{}` has no max_requests, no max_duration and no sessions, so against a real server it ends only when the scenario runs out of requests, if ever; set one, or pass --unbounded",
            file.display(),
            p.name
        ),
        None => Ok(()),
    }
}

/// The shard this process runs (from --shard, or a job array's index variables) and the
/// phases as it runs them; the whole run's phases when not sharded.
fn plan_shard(
    a: &RunArgs,
    scenario: &dyn Scenario,
    phases: &[PhaseSpec],
) -> Result<(Option<ShardPlan>, Vec<PhaseSpec>)> {
    let shard = Shard::resolve(a.shard, a.shards, |name| {
        std::env::var(name).ok().filter(|_| !a.no_shard)
    })?;
    let Some(shard) = shard else {
        return Ok((None, phases.to_vec()));
    };
    // A virtual run simulates its own server in its own process: a shard's simulator would
    // see its stripe of the load alone, not the whole run's, and the shards share no clock.
    if a.virtual_time {
        bail!("shard {shard}: --virtual-time runs the whole load against one simulated server in one process, so it cannot be sharded; run it unsharded (--no-shard where a job array sets the shard index)");
    }
    if a.output.is_none() {
        bail!("shard {shard}: --output DIR is required (the shard's mergeable results go there)");
    }
    // Phases or requests that depend on responses differ from shard to shard: their
    // union would not be the single run's stream.
    // Sessions split whole (each shard runs its own, decided by a hash of their ids), so
    // a scenario whose sessions carry its conversations shards; one that adapts to the
    // whole run's responses does not. (`stop` is each shard's own: it sees its snapshot.)
    let adapts = [
        (scenario.has_next_phase(), "next_phase"),
        (scenario.wants_responses(), "on_response"),
    ];
    if let Some((_, hook)) = adapts.iter().find(|(has, _)| *has) {
        bail!(
            "{} adapts to the whole run ({hook}), so its request stream cannot be split into shards: each shard would see only its own responses; run it unsharded, or carry its conversations in sessions (session_step), which shard whole",
            a.source.scenario.display()
        );
    }
    let (plan, phases) = ShardPlan::new(shard, phases);
    Ok((Some(plan), phases))
}

/// The percentiles (a threshold on a percentile the report would not compute gets it
/// computed) and the goodput SLO.
fn metrics_options(a: &RunArgs, checks: &[Threshold]) -> Result<MetricsOptions> {
    let mut percentiles =
        parse_percentiles(&a.percentiles).map_err(|e| anyhow!("--percentiles: {e}"))?;
    percentiles.extend(thresholds::missing_percentiles(checks, &percentiles));
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
    Ok(MetricsOptions {
        percentiles,
        goodput,
    })
}

fn target_spec(a: &RunArgs) -> Result<TargetSpec> {
    Ok(match a.target.as_slice() {
        [] => TargetSpec::Simulator {
            config: Box::new(a.sim.to_config()?),
            profile: a.sim.profile.clone(),
        },
        urls => TargetSpec::Servers(urls.to_vec()),
    })
}

fn usage_request(a: &RunArgs) -> UsageRequest {
    match (a.no_usage, a.continuous_usage) {
        (true, _) => UsageRequest::None,
        (_, true) => UsageRequest::Continuous,
        _ => UsageRequest::Final,
    }
}
