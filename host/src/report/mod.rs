//! Reports: the text block of `vllm bench serve` (byte-compatible) followed by our extras,
//! a closing table over phases, and the `--save-result` JSON object.

pub mod json;
pub mod table;
pub mod text;

use serde::{Deserialize, Serialize};

pub use json::{vllm_backend, vllm_result_json, vllm_result_json_with};
pub use table::{render_phase_table_csv, render_phase_table_markdown};
pub use text::{render_extras, render_header, render_phase_table, render_vllm_block};

/// What was run, against what: printed before the results and saved in the JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub scenario: String,
    pub description: String,
    /// Scenario parameters, in declaration order.
    pub params: Vec<(String, String)>,
    pub seed: u64,
    /// URL, or "built-in simulator (profile default)".
    pub target: String,
    pub model: String,
    /// "completions" or "chat".
    pub api: String,
    pub tokenizer: String,
    /// sha256 hex of the request stream, known at the end of the run.
    pub request_digest: Option<String>,
    pub runner_version: String,
}
