//! The scenario contract: one trait that the engine drives. Rhai scripts and Wasm
//! components implement it; the engine cannot tell them apart.

pub mod budget;
pub mod dependence;
pub mod files;
pub mod host;
pub mod params;
pub mod rhai;
pub mod spec;
pub mod validate;
pub mod wasm;

use std::path::Path;

pub use host::HostContext;
pub use params::{ParamSpec, ParamValue, Params};
pub use spec::{
    ArrivalSpec, Cancel, LatencySummary, NamedWindow, Next, NoteValue, Outcome, PhaseReport,
    PhaseSpec, Prompt, RequestSpec, ServerStat, ServerValues, SessionState, Snapshot, Step,
    ToolCall, ToolSpec,
};

/// What `runner info` shows, and the parameters `-p name=value` may override.
#[derive(Clone, Debug)]
pub struct Description {
    pub name: String,
    pub description: String,
    pub params: Vec<ParamSpec>,
    /// Pass/fail thresholds the scenario declares (`p99_ttft_ms<500`), checked at the end
    /// of the run like `--threshold`.
    pub thresholds: Vec<String>,
}

/// An error raised by scenario code or by the host while validating what it returned.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{file}: cannot read the scenario: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: syntax error: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}{at}: error in `{function}`: {message}", at = position_suffix(*line, *column))]
    Script {
        file: String,
        function: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: `{function}` returned an invalid value: {message}")]
    Invalid {
        file: String,
        function: String,
        message: String,
    },
    #[error("{0}")]
    Param(String),
    /// A session past its bound (`--max-steps-per-session`): a scenario that never ends
    /// its sessions, stopped before it floods the server.
    #[error("{file}: {message}")]
    Runaway { file: String, message: String },
    #[error("{file}: {message}")]
    Unsupported { file: String, message: String },
}

fn position_suffix(line: usize, column: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{column}")
    }
}

/// The contract between the engine and a scenario, the same for both guest languages (a
/// Wasm guest sees it as wit/scenario.wit). Calls happen on the scenario's own thread,
/// never on the I/O path; the engine calls `configure` once, then `phases`, then for each phase
/// `next_request` (and `arrival` for custom processes) ahead of send time. An adaptive
/// scenario (`has_next_phase`) is asked for one more phase by `next_phase` each time the
/// phases it has given so far are done.
pub trait Scenario: Send {
    /// Name, description and parameters with defaults.
    fn describe(&self) -> &Description;

    /// Receives the resolved parameter values before anything else runs.
    fn configure(&mut self, params: &Params) -> Result<(), ScenarioError>;

    /// The phases of the run, in order (a sweep has one per point). An adaptive scenario
    /// may return only its first phases, or none.
    fn phases(&mut self) -> Result<Vec<PhaseSpec>, ScenarioError>;

    /// Whether `next_phase` exists.
    fn has_next_phase(&self) -> bool {
        false
    }

    /// Called once the phases given so far are done, with a report of every finished
    /// phase in order: the next phase to run, or `None` to end the run.
    fn next_phase(&mut self, history: &[PhaseReport]) -> Result<Option<PhaseSpec>, ScenarioError> {
        let _ = history;
        Ok(None)
    }

    /// Key-value results the scenario reported with the host's `note` function, in the
    /// order first reported.
    fn notes(&self) -> Vec<(String, NoteValue)> {
        Vec::new()
    }

    /// Request `index` of a phase, `Next::Done` when the phase's dataset is exhausted, or
    /// `Next::Wait` to be asked again (same index) after the next `on_response`.
    fn next_request(&mut self, phase: usize, index: u64) -> Result<Next, ScenarioError>;

    /// For `ArrivalSpec::Custom`: seconds to wait after the previous request's scheduled time.
    fn arrival(&mut self, phase: usize, index: u64) -> Result<f64, ScenarioError> {
        let _ = (phase, index);
        Ok(0.0)
    }

    /// The next step of a session of a phase with `sessions` (see [`SessionState`]). The
    /// host draws this call's random numbers from the session's own stream (seeded by
    /// the run's seed, the phase, the session's id and its step), so a session's
    /// requests do not depend on how the others interleave, nor on which shard runs it.
    fn session_step(&mut self, state: &SessionState) -> Result<Step, ScenarioError> {
        let _ = state;
        Err(ScenarioError::Unsupported {
            file: self.describe().name.clone(),
            message: "a phase has `sessions` but the scenario has no `session_step`".into(),
        })
    }

    /// Whether `session_step` exists.
    fn has_sessions(&self) -> bool {
        false
    }

    /// Whether `on_response` exists (the client then keeps response texts).
    fn wants_responses(&self) -> bool {
        false
    }

    /// The outcome of a finished request, for adaptive workloads.
    fn on_response(&mut self, outcome: &Outcome) -> Result<(), ScenarioError> {
        let _ = outcome;
        Ok(())
    }

    /// Whether `stop` exists.
    fn has_stop(&self) -> bool {
        false
    }

    /// Whether to end the current phase now, given a live snapshot.
    fn stop(&mut self, snapshot: &Snapshot) -> Result<bool, ScenarioError> {
        let _ = snapshot;
        Ok(false)
    }
}

/// The largest scenario file loaded (a componentized Python or JavaScript guest is tens
/// of MiB).
const MAX_SCENARIO_BYTES: u64 = 512 << 20;

/// Loads a scenario from a file, choosing the implementation by extension.
pub fn load(path: &Path, host: HostContext) -> Result<Box<dyn Scenario>, ScenarioError> {
    let file = path.display().to_string();
    // A FIFO or a device would block the read or never end it; a file of gigabytes
    // would be read whole.
    if let Ok(meta) = std::fs::metadata(path) {
        let problem = if !meta.is_file() {
            Some("not a regular file".to_string())
        } else if meta.len() > MAX_SCENARIO_BYTES {
            Some(format!(
                "{} bytes, over the {MAX_SCENARIO_BYTES}-byte limit for a scenario",
                meta.len()
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            return Err(ScenarioError::Unsupported { file, message });
        }
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("rhai") => Ok(Box::new(rhai::RhaiScenario::load(path, host)?)),
        Some("wasm") => Ok(Box::new(wasm::WasmScenario::load(path, host)?)),
        _ => Err(ScenarioError::Unsupported {
            file,
            message: "unknown scenario kind; expected a .rhai script or a .wasm component".into(),
        }),
    }
}
