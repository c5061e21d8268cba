//! The servers a run talks to: the built-in simulator, or each `--target` in order, every
//! one checked (health, model list, one test request) before anything is sent.

use std::sync::Arc;

use anyhow::Result;

use crate::commands::config::{RunConfig, TargetSpec};
use crate::measuring::client::Client;
use crate::outputs::report::{FittedRun, TwinProvenance};
use crate::servers::sim::SimServer;
use crate::workloads::tokenizer::Tokenizer;

/// The targets of a run, checked, each one's model known.
pub(super) struct Targets {
    /// The built-in simulator, when it is the target; stopped when dropped.
    pub(super) sim: Option<SimServer>,
    /// One per target, in `--target` order (a request's `target` indexes this).
    pub(super) clients: Vec<Client>,
    /// How each target is named in reports (a URL's credentials hidden).
    pub(super) labels: Vec<String>,
    /// The model each target serves (`--model`, else the first it lists).
    pub(super) models: Vec<String>,
    /// `--output`, claimed for this run until it ends.
    pub(super) _output: Option<crate::outputs::output_dir::OutputDir>,
}

/// How reports name the built-in simulator: its profile or twin, any what-if (said
/// wherever the target is named), and how it was reached.
fn sim_label(what: &str, overrides: &[(String, String)], reached: &str) -> String {
    let what_if: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
    match what_if.is_empty() {
        true => format!("built-in simulator, {what} ({reached})"),
        false => format!(
            "built-in simulator, {what}, what-if {} ({reached})",
            what_if.join(",")
        ),
    }
}

impl Targets {
    /// Starts the simulator when it is the target, then checks every server before
    /// anything is sent.
    pub(super) fn connect(
        config: &RunConfig,
        tokenizer: &Arc<Tokenizer>,
        rt: &tokio::runtime::Runtime,
    ) -> Result<Targets> {
        let config_virtual = config.virtual_time;
        let (sim, urls, labels) = match &config.target {
            TargetSpec::Servers(urls) => {
                let labels = urls
                    .iter()
                    .map(|u| crate::safeguards::redact::string(u.clone()));
                (None, urls.clone(), labels.collect())
            }
            TargetSpec::Simulator { config, profile } => {
                let mut sim_config = (**config).clone();
                let counter = tokenizer.clone();
                sim_config.prompt_token_counter =
                    Some(Arc::new(move |text: &str| counter.count(text)));
                let server = match config_virtual {
                    true => SimServer::start_in(sim_config, rt)?,
                    false => SimServer::start(sim_config, 0)?,
                };
                let url = server.base_url();
                let what = match &config.twin {
                    // A run against a twin names it, its runs and its error in every report.
                    Some(twin) => twin.describe(profile),
                    None => format!("profile {profile}"),
                };
                // In virtual time the requests go over in-memory pipes on the simulated
                // clock (`SimServer::start_in`); the loopback URL only took the preflight.
                let reached = match config_virtual {
                    true => "virtual time, in-process".to_string(),
                    false => url.clone(),
                };
                let label = sim_label(&what, &config.overrides, &reached);
                (Some(server), vec![url], vec![label])
            }
        };
        let clients = urls
            .iter()
            .map(|url| {
                let client = Client::new(
                    url,
                    config.api_key.clone(),
                    config.timeouts,
                    config.request_id_prefix.clone(),
                )?;
                let client = client
                    .with_receive_clock(config.receive_clock)?
                    .with_trace(config.trace_id);
                Ok(client.with_headers(&config.headers)?)
            })
            .collect::<Result<Vec<Client>>>()?;
        let output = config
            .output
            .as_deref()
            .map(crate::outputs::output_dir::claim)
            .transpose()?;
        // Each error names its server's URL.
        let models = clients
            .iter()
            .map(|c| rt.block_on(c.preflight(config.model.as_deref(), config.api, config.usage)))
            .collect::<Result<Vec<String>, _>>()?;
        Ok(Targets {
            sim,
            clients,
            labels,
            models,
            _output: output,
        })
    }

    /// How the report names the targets: the one label, or each with its index.
    pub(super) fn label(&self) -> String {
        match self.labels.as_slice() {
            [one] => one.clone(),
            many => many
                .iter()
                .enumerate()
                .map(|(i, l)| format!("[{i}] {l}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The model of the report's header: the one model, or each different one.
    pub(super) fn model(&self) -> String {
        let mut distinct: Vec<&String> = Vec::new();
        for m in &self.models {
            if !distinct.contains(&m) {
                distinct.push(m);
            }
        }
        // Each name redacted alone (it may come from a server's `/v1/models`): a short
        // secret is hidden as a whole value only.
        let names: Vec<String> = distinct
            .iter()
            .map(|m| crate::safeguards::redact::string(m.to_string()))
            .collect();
        names.join(", ")
    }
}

/// The built-in simulator's what-if overrides, for result.json.
pub(super) fn sim_overrides(target: &TargetSpec) -> std::collections::BTreeMap<String, String> {
    match target {
        TargetSpec::Simulator { config, .. } => config.overrides.iter().cloned().collect(),
        TargetSpec::Servers(_) => Default::default(),
    }
}

/// The twin the built-in simulator runs, for the reports.
pub(super) fn twin_provenance(target: &TargetSpec) -> Option<TwinProvenance> {
    let TargetSpec::Simulator { config, profile } = target else {
        return None;
    };
    let twin = config.twin.as_ref()?;
    let runs = twin.runs.iter().map(|r| FittedRun {
        path: r.path.clone(),
        request_digest: r.request_digest.clone(),
    });
    Some(TwinProvenance {
        file: profile.clone(),
        runs: runs.collect(),
        error: twin.error_summary(),
    })
}
