//! Reports: the text block of `vllm bench serve` (byte-compatible) followed by our extras,
//! a closing table over phases, the `--save-result` JSON object, and with `--output` a
//! self-contained HTML page with charts, a markdown copy and per-request CSV; plus the
//! comparison of saved results (`runner compare`); the spread of a series of repeated
//! runs (`--repeat`).

pub mod compare;
pub mod csv;
pub mod html;
pub mod json;
pub mod leftover_cache;
pub mod markdown;
pub mod output;
pub mod prefix_intent;
pub mod run_report;
pub mod series;
mod sessions;
pub mod table;
pub mod text;

use serde::{Deserialize, Serialize};

pub use json::vllm_backend;
pub use run_report::{ReportParts, ReportPhase, RunReport, ShardStart, ShardStarts};
pub use text::render_header;

/// What was run, against what: printed before the results and saved in the JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub scenario: String,
    pub description: String,
    /// Scenario parameters, in declaration order.
    pub params: Vec<(String, String)>,
    pub seed: u64,
    /// URL, or "built-in simulator (profile default)"; with several targets, each one as
    /// `[index] URL`, comma-separated.
    pub target: String,
    /// With several `--target`s, each one's URL, by index (records name the index);
    /// empty with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    pub model: String,
    /// "completions" or "chat".
    pub api: String,
    pub tokenizer: String,
    /// sha256 hex of the request stream, known at the end of the run.
    pub request_digest: Option<String>,
    /// The run's W3C trace id (hex): every request was sent as a span of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// What the request stream may have depended on beyond the seed and the parameters
    /// (see `scenario::dependence`); empty: the same seed sends the same stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_depends_on: Vec<String>,
    pub runner_version: String,
    /// The package the scenario came from (name, version); none for a single file.
    pub package: Option<(String, String)>,
    /// sha256 of the package's content, or of the single scenario file.
    pub scenario_digest: String,
    /// The `bench:scenario` WIT package version this runner implements.
    pub wit_version: String,
    /// The twin the built-in simulator ran (`--sim-profile twin.toml`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<TwinProvenance>,
    /// The built-in simulator's engine parameters set over its profile's or twin's
    /// (`--sim KEY=VALUE` and the `--sim-*` engine flags), in vLLM's words: a what-if,
    /// not the server as profiled or fitted.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sim_overrides: std::collections::BTreeMap<String, String>,
    /// The run was on a simulated clock (`--virtual-time`): its times are a simulation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub virtual_time: bool,
}

/// What a run against a twin simulated: the twin file, the real runs it was fitted from
/// and its error on phases held out of the fit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct TwinProvenance {
    /// The twin file (`runner calibrate --out`).
    pub file: String,
    /// The runs it was fitted from.
    pub runs: Vec<FittedRun>,
    /// Its error on held-out phases in a few words, or that none was measured.
    pub error: String,
}

/// A run a twin was fitted from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct FittedRun {
    /// Its --output directory, as given to `runner calibrate`.
    pub path: String,
    /// Its result.json's request digest.
    pub request_digest: String,
}

impl RunHeader {
    /// What makes two runs the same workload: the scenario's code (package or file
    /// digest), every parameter value, the seed and the tokenizer (it shapes the prompts).
    /// Two results with equal ids sent the same kind of requests by construction.
    pub fn workload_id(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(self.scenario_digest.as_bytes());
        h.update(format!(
            "\nseed={}\ntokenizer={}\n",
            self.seed, self.tokenizer
        ));
        for (name, value) in &self.params {
            h.update(format!("{name}={value}\n"));
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}
