//! A script's sessions: `session_step(s)` is called when a session starts and after each
//! of its steps ends, with `s` a map of `kind` (`"start"`, `"answer"` or `"join"`),
//! `phase`, `id`, `step`, `last` (the outcome of its last request, or `()`) and `joined`
//! (the children that ended, after a fan-out; `[]` on other steps). README.md's "Agentic
//! sessions" holds the table of these per kind, which tests/e2e/session_state.rs checks
//! against this map. Its random draws come from the session's own stream
//! (`HostContext::enter_session`).

use rhai::{Array, Dynamic, Map, INT};

use super::record::HostRecord;
use super::{convert, lock, outcome_map, RhaiScenario};
use crate::workloads::scenario::spec::{SessionState, Step};
use crate::workloads::scenario::{validate, ScenarioError};

/// Calls the script's `session_step` for `state` and checks what it returned.
pub(super) fn step(
    scenario: &mut RhaiScenario,
    state: &SessionState,
) -> Result<Step, ScenarioError> {
    let arg = state_map(state);
    lock(&scenario.host).enter_session(state);
    let result = scenario.call("session_step", (arg,));
    lock(&scenario.host).leave_session();
    convert::step(result?)
        .and_then(validate::step)
        .map_err(|m| scenario.invalid("session_step", m))
}

fn state_map(state: &SessionState) -> Dynamic {
    let mut m = Map::new();
    m.insert("kind".into(), Dynamic::from(state.kind().to_string()));
    m.insert("phase".into(), Dynamic::from_int(state.phase as INT));
    m.insert("id".into(), Dynamic::from(state.id.clone()));
    m.insert("step".into(), Dynamic::from_int(state.step as INT));
    m.insert(
        "last".into(),
        state.last.as_ref().map_or(Dynamic::UNIT, outcome_map),
    );
    let joined: Array = state.joined.iter().cloned().map(Dynamic::from).collect();
    m.insert("joined".into(), Dynamic::from_array(joined));
    HostRecord::dynamic("session", m)
}
