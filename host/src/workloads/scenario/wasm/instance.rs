//! A component linked and called through the bindings of the interface version it was
//! built against (`version::check` reads it before linking), the way Spin keeps
//! components of older WIT versions running: each version has bindings of its own
//! (`bindings`, `v0_3`, `v0_2`), and each call converts its values from and to the host's
//! types with that version's conversions (`convert::current`, `convert::v0_3`,
//! `convert::v0_2`), so the rest of the host sees one scenario whatever its version.

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store};

use super::convert::Hooks;
use super::sandbox::GuestState;
use super::version::Interface;
use super::{bindings, v0_2, v0_3};
use crate::workloads::scenario::spec::{
    Next, Outcome, PhaseReport, PhaseSpec, SessionState, Snapshot, Step,
};
use crate::workloads::scenario::Description;

/// Why a call into the component gave no usable value.
pub enum CallError {
    /// The component trapped (or a host function stopped it): it cannot be called again.
    Trap(wasmtime::Error),
    /// The scenario's own error message (an `err` result).
    Scenario(String),
    /// A value the host's rules refuse.
    Invalid(String),
}

/// The guest's answer of a `result<T, string>` function.
fn answer<T>(r: wasmtime::Result<Result<T, String>>) -> Result<T, CallError> {
    r.map_err(CallError::Trap)?.map_err(CallError::Scenario)
}

/// A component linked to the host and the sandbox, ready to instantiate.
pub enum Pre {
    Current(bindings::ScenarioPre<GuestState>),
    V0_3(v0_3::ScenarioPre<GuestState>),
    V0_2(v0_2::ScenarioPre<GuestState>),
}

/// Why linking failed: the host's own interface could not be added (a runner bug), or the
/// component imports something the sandbox does not offer.
pub enum LinkError {
    Host(wasmtime::Error),
    Component(wasmtime::Error),
}

impl Pre {
    pub fn link(
        engine: &Engine,
        component: &Component,
        interface: Interface,
    ) -> Result<Pre, LinkError> {
        let mut linker: Linker<GuestState> = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(LinkError::Host)?;
        // The same three steps for each version's bindings: add its host interface, link
        // the component, keep the result as that version's case.
        macro_rules! link {
            ($bindings:ident, $case:ident) => {{
                $bindings::Scenario::add_to_linker::<GuestState, HasSelf<GuestState>>(
                    &mut linker,
                    |s| s,
                )
                .map_err(LinkError::Host)?;
                let pre = linker.instantiate_pre(component);
                pre.and_then($bindings::ScenarioPre::new)
                    .map(Pre::$case)
                    .map_err(LinkError::Component)
            }};
        }
        match interface {
            Interface::Current => link!(bindings, Current),
            Interface::V0_3 => link!(v0_3, V0_3),
            Interface::V0_2 => link!(v0_2, V0_2),
        }
    }

    pub fn instantiate(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Instance> {
        match self {
            Pre::Current(pre) => pre.instantiate(store).map(Instance::Current),
            Pre::V0_3(pre) => pre.instantiate(store).map(Instance::V0_3),
            Pre::V0_2(pre) => pre.instantiate(store).map(Instance::V0_2),
        }
    }
}

/// A running component, in the bindings of its version.
pub enum Instance {
    Current(bindings::Scenario),
    V0_3(v0_3::Scenario),
    V0_2(v0_2::Scenario),
}

/// Runs `$body` with `$workload` the instance's exports and `$convert` the conversions of
/// its version: the same code, type-checked once per version.
macro_rules! with_version {
    ($instance:expr, |$workload:ident, $convert:ident| $body:expr) => {
        match $instance {
            Instance::Current(i) => {
                use super::convert::current as $convert;
                let $workload = i.bench_scenario_workload();
                $body
            }
            Instance::V0_3(i) => {
                use super::convert::v0_3 as $convert;
                let $workload = i.bench_scenario_workload();
                $body
            }
            Instance::V0_2(i) => {
                use super::convert::v0_2 as $convert;
                let $workload = i.bench_scenario_workload();
                $body
            }
        }
    };
}

type Guest = Store<GuestState>;

impl Instance {
    pub fn describe(&self, store: &mut Guest) -> Result<(Description, Hooks), CallError> {
        with_version!(self, |w, convert| {
            let d = w.call_describe(store).map_err(CallError::Trap)?;
            convert::description(d).map_err(CallError::Invalid)
        })
    }

    /// The phases `phases` returns, numbered from 0 in messages.
    pub fn phases(&self, store: &mut Guest) -> Result<Vec<PhaseSpec>, CallError> {
        with_version!(self, |w, convert| {
            let list = answer(w.call_phases(store))?;
            list.into_iter()
                .enumerate()
                .map(|(i, p)| convert::phase(i, p).map_err(CallError::Invalid))
                .collect()
        })
    }

    /// The next phase after `history`; `given` phases came before it (its number in
    /// messages).
    pub fn next_phase(
        &self,
        store: &mut Guest,
        history: &[PhaseReport],
        given: usize,
    ) -> Result<Option<PhaseSpec>, CallError> {
        with_version!(self, |w, convert| {
            let history: Vec<_> = history.iter().map(convert::phase_summary).collect();
            match answer(w.call_next_phase(store, &history))? {
                None => Ok(None),
                Some(p) => convert::phase(given, p)
                    .map(Some)
                    .map_err(CallError::Invalid),
            }
        })
    }

    pub fn next_request(
        &self,
        store: &mut Guest,
        phase: u32,
        index: u64,
    ) -> Result<Next, CallError> {
        with_version!(self, |w, convert| {
            let next = answer(w.call_next_request(store, phase, index))?;
            convert::next(next).map_err(CallError::Invalid)
        })
    }

    pub fn arrival(&self, store: &mut Guest, phase: u32, index: u64) -> Result<f64, CallError> {
        match self {
            Instance::Current(i) => answer(
                i.bench_scenario_workload()
                    .call_arrival(store, phase, index),
            ),
            Instance::V0_3(i) => answer(
                i.bench_scenario_workload()
                    .call_arrival(store, phase, index),
            ),
            Instance::V0_2(i) => answer(
                i.bench_scenario_workload()
                    .call_arrival(store, phase, index),
            ),
        }
    }

    pub fn on_response(&self, store: &mut Guest, outcome: &Outcome) -> Result<(), CallError> {
        with_version!(self, |w, convert| {
            answer(w.call_on_response(store, &convert::outcome(outcome)))
        })
    }

    /// Written out per version: the 0.2 snapshot holds only numbers, so its bindings take
    /// it by value, and the later ones (with the server's metrics) by reference.
    pub fn stop(&self, store: &mut Guest, snapshot: &Snapshot) -> Result<bool, CallError> {
        match self {
            Instance::Current(i) => {
                let s = super::convert::current::snapshot(snapshot);
                answer(i.bench_scenario_workload().call_stop(store, &s))
            }
            Instance::V0_3(i) => {
                let s = super::convert::v0_3::snapshot(snapshot);
                answer(i.bench_scenario_workload().call_stop(store, &s))
            }
            Instance::V0_2(i) => {
                let s = super::convert::v0_2::snapshot(snapshot);
                answer(i.bench_scenario_workload().call_stop(store, s))
            }
        }
    }

    /// The next step of a session. Only the current version has sessions: an earlier
    /// component cannot announce the hook, so the host never asks it (and an error says
    /// so if it did).
    pub fn session_step(&self, store: &mut Guest, state: &SessionState) -> Result<Step, CallError> {
        match self {
            Instance::Current(i) => {
                let state = super::convert::current::session_state(state);
                let step = answer(i.bench_scenario_workload().call_session_step(store, &state))?;
                super::convert::current::step(step).map_err(CallError::Invalid)
            }
            Instance::V0_3(_) | Instance::V0_2(_) => Err(CallError::Invalid(
                "the component was built against a version of bench:scenario without sessions (before 0.4)".into(),
            )),
        }
    }
}
