//! WebAssembly components as scenarios, behind the same trait as Rhai scripts. A component
//! implements the `bench:scenario` WIT package (wit/scenario.wit); it is compiled once per
//! run and runs in a sandbox (see `sandbox`): no network, no environment, no clock, a
//! read-only view of its own directory, a memory cap, and a time limit on every call.

mod compile_cache;
mod convert;
mod imports;
mod sandbox;
pub mod version;

use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store, Trap, WasmBacktrace};

use super::params::Params;
use super::spec::{Next, NoteValue, Outcome, PhaseReport, PhaseSpec, Snapshot};
use super::{validate, Description, HostContext, Scenario, ScenarioError};
use bindings::bench::scenario::types::Hooks;
use bindings::exports::bench::scenario::workload::Guest;
use imports::HostTrap;
use sandbox::{GuestState, EPOCH_TICK};

mod bindings {
    // Every import may trap: a host function over its budget ends the call.
    wasmtime::component::bindgen!({
        world: "scenario",
        path: "../wit",
        imports: { default: trappable },
    });
}

/// How long one call into the component may run: generating a request is microseconds,
/// so a call still running after this is an endless loop.
const CALL_LIMIT: Duration = Duration::from_secs(1);
/// Instantiation and `phases` may load and parse a dataset.
const SETUP_LIMIT: Duration = Duration::from_secs(10);
/// The cap on a component's linear memory.
const MEMORY_CAP_BYTES: usize = 1 << 30;

/// An instance and the store it lives in.
struct Live {
    store: Store<GuestState>,
    instance: bindings::Scenario,
    /// Set after a trap: wasmtime refuses further calls into the instance.
    trapped: bool,
}

pub struct WasmScenario {
    file: String,
    engine: Engine,
    pre: bindings::ScenarioPre<GuestState>,
    /// The readable directory mounted in every instance, and where.
    mount: Option<(PathBuf, String)>,
    live: Option<Live>,
    description: Description,
    hooks: Hooks,
    /// Phases given so far, so `next-phase`'s phases are numbered after them.
    phases_given: usize,
}

impl WasmScenario {
    pub fn load(path: &Path, host: HostContext) -> Result<WasmScenario, ScenarioError> {
        let file = path.display().to_string();
        let fail = |message: String| ScenarioError::Unsupported {
            file: file.clone(),
            message,
        };
        let bytes = std::fs::read(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        check_is_component(&bytes).map_err(fail)?;
        let engine =
            sandbox::engine().map_err(|e| fail(format!("cannot start the Wasm engine: {e}")))?;
        let component = compile_cache::compile(&engine, &bytes).map_err(|e| {
            fail(format!(
                "not a valid WebAssembly component: {}",
                e.root_cause()
            ))
        })?;
        let ty = component.component_type();
        version::check(
            ty.imports(&engine).map(|(name, _)| name),
            ty.exports(&engine).map(|(name, _)| name),
        )
        .map_err(fail)?;

        let mut linker: Linker<GuestState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|_| {
                bindings::Scenario::add_to_linker::<GuestState, HasSelf<GuestState>>(
                    &mut linker,
                    |s| s,
                )
            })
            .map_err(|e| fail(format!("cannot link the host interface: {e}")))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(bindings::ScenarioPre::new)
            .map_err(|e| {
                fail(format!(
                    "the component needs something the sandbox does not offer: {}",
                    e.root_cause()
                ))
            })?;

        let mount = host
            .mount()
            .map(|(d, at)| (d.to_path_buf(), at.to_string()));
        let mut scenario = WasmScenario {
            file,
            engine,
            pre,
            mount,
            live: None,
            description: Description {
                name: String::new(),
                description: String::new(),
                params: vec![],
                thresholds: vec![],
            },
            hooks: Hooks::empty(),
            phases_given: 0,
        };
        scenario.instantiate(host, Params::default())?;
        let described = scenario.call("describe", CALL_LIMIT, |g, s| g.call_describe(s))?;
        scenario.hooks = described.hooks;
        scenario.description =
            convert::description(described).map_err(|m| scenario.invalid("describe", m))?;
        let name = scenario.description.name.clone();
        if let Some(live) = &mut scenario.live {
            live.store.data_mut().host.scenario = name;
        }
        Ok(scenario)
    }

    fn mount(&self) -> Option<(&Path, &str)> {
        self.mount
            .as_ref()
            .map(|(d, at)| (d.as_path(), at.as_str()))
    }

    /// A fresh instance in a fresh store: the sandbox's randomness is seeded from the
    /// parameters, so instantiating again after `configure` makes the run reproducible.
    fn instantiate(&mut self, host: HostContext, params: Params) -> Result<(), ScenarioError> {
        let state = GuestState::new(host, params, MEMORY_CAP_BYTES, self.mount()).map_err(|e| {
            ScenarioError::Unsupported {
                file: self.file.clone(),
                message: format!("cannot set up the sandbox: {e}"),
            }
        })?;
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(ticks(SETUP_LIMIT));
        store.data_mut().deadline.start(SETUP_LIMIT);
        match self.pre.instantiate(&mut store) {
            Ok(instance) => {
                self.live = Some(Live {
                    store,
                    instance,
                    trapped: false,
                });
                Ok(())
            }
            Err(e) => {
                let message = failure_message(&store, SETUP_LIMIT, &e);
                Err(self.script_error("instantiation", message))
            }
        }
    }

    /// One call into the guest under a time limit; traps become errors naming the
    /// scenario and the function.
    fn call<T>(
        &mut self,
        function: &str,
        limit: Duration,
        f: impl FnOnce(&Guest, &mut Store<GuestState>) -> wasmtime::Result<T>,
    ) -> Result<T, ScenarioError> {
        let Some(live) = self.live.as_mut() else {
            return Err(self.script_error(function, "the component is not running".into()));
        };
        if live.trapped {
            return Err(self.script_error(
                function,
                "the component cannot be called after it trapped".into(),
            ));
        }
        live.store.set_epoch_deadline(ticks(limit));
        live.store.data_mut().deadline.start(limit);
        match f(live.instance.bench_scenario_workload(), &mut live.store) {
            Ok(v) => Ok(v),
            Err(e) => {
                live.trapped = true;
                let message = failure_message(&live.store, limit, &e);
                Err(self.script_error(function, message))
            }
        }
    }

    /// A call whose guest result is `result<T, string>`: an `err` is the scenario's own
    /// error message.
    fn call_checked<T>(
        &mut self,
        function: &str,
        limit: Duration,
        f: impl FnOnce(&Guest, &mut Store<GuestState>) -> wasmtime::Result<Result<T, String>>,
    ) -> Result<T, ScenarioError> {
        self.call(function, limit, f)?
            .map_err(|m| self.script_error(function, m))
    }

    fn script_error(&self, function: &str, message: String) -> ScenarioError {
        ScenarioError::Script {
            file: self.file.clone(),
            function: function.into(),
            line: 0,
            column: 0,
            message,
        }
    }

    fn invalid(&self, function: &str, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.clone(),
            function: function.into(),
            message,
        }
    }
}

fn ticks(limit: Duration) -> u64 {
    (limit.as_nanos() / EPOCH_TICK.as_nanos()) as u64 + 1
}

/// The magic and layer fields say whether the bytes are a component; a core module is
/// the usual mistake (built for wasm32-wasip1 or wasm32-unknown-unknown).
fn check_is_component(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err("not a WebAssembly file".into());
    }
    if bytes[6..8] == [0, 0] {
        return Err("this is a core WebAssembly module, not a component; build the scenario for the wasm32-wasip2 target (or wrap it with `wasm-tools component new`)".into());
    }
    Ok(())
}

/// Says why a call failed: the memory cap, a host function's budget, the time limit, a
/// stack overflow, or the trap itself with the last lines the guest wrote to stderr (a
/// Rust panic message lands there).
fn failure_message(store: &Store<GuestState>, limit: Duration, e: &wasmtime::Error) -> String {
    let state = store.data();
    if state.limits.hit {
        return format!(
            "the component tried to grow its memory past the {} MiB cap and was stopped",
            state.limits.max_bytes >> 20
        );
    }
    if let Some(host) = e.downcast_ref::<HostTrap>() {
        return host.to_string();
    }
    let mut message = match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => format!(
            "ran longer than {:.1} s and was stopped (an endless loop?)",
            limit.as_secs_f64()
        ),
        Some(Trap::StackOverflow) => STACK_OVERFLOW.to_string(),
        Some(Trap::MemoryOutOfBounds) if wrapped_stack(e) => STACK_OVERFLOW.to_string(),
        Some(trap) => format!("the component trapped: {trap}"),
        None => format!("the call failed: {}", e.root_cause()),
    };
    if let Some(tail) = state.stderr_tail() {
        message += &format!("; it wrote: {tail}");
    }
    message
}

const STACK_OVERFLOW: &str = "overflowed its stack (recursion too deep?) and was stopped";

/// A function seen this many times among the frames of a trap's backtrace (wasmtime
/// keeps the innermost 20) means recursion.
const RECURSION_FRAMES: usize = 8;

/// A Rust guest keeps its stack in linear memory, growing down from the bottom
/// (wasm-ld's `--stack-first`), so overflowing it wraps the stack pointer and wasmtime
/// reports an out-of-bounds access rather than a stack overflow. An out-of-bounds access
/// deep in recursion is taken for what it almost always is.
fn wrapped_stack(e: &wasmtime::Error) -> bool {
    let Some(trace) = e.downcast_ref::<WasmBacktrace>() else {
        return false;
    };
    let frames = trace.frames();
    frames.iter().any(|f| {
        let same = |g: &&wasmtime::FrameInfo| {
            g.func_index() == f.func_index() && g.module().name() == f.module().name()
        };
        frames.iter().filter(same).count() >= RECURSION_FRAMES
    })
}

impl Scenario for WasmScenario {
    fn describe(&self) -> &Description {
        &self.description
    }

    fn configure(&mut self, params: &Params) -> Result<(), ScenarioError> {
        let Some(old) = self.live.take() else {
            return Err(self.script_error("configure", "the component is not running".into()));
        };
        let mut host = old.store.into_data().host;
        host.reseed(params.seed());
        self.instantiate(host, params.clone())?;
        let name = self.description.name.clone();
        if let Some(live) = &mut self.live {
            live.store.data_mut().host.scenario = name;
        }
        Ok(())
    }

    fn phases(&mut self) -> Result<Vec<PhaseSpec>, ScenarioError> {
        let list = self.call_checked("phases", SETUP_LIMIT, |g, s| g.call_phases(s))?;
        validate::phase_count(list.len(), self.has_next_phase())
            .map_err(|m| self.invalid("phases", m))?;
        let phases = list
            .into_iter()
            .enumerate()
            .map(|(i, p)| convert::phase(i, p).map_err(|m| self.invalid("phases", m)))
            .collect::<Result<Vec<_>, _>>()?;
        self.phases_given = phases.len();
        Ok(phases)
    }

    fn has_next_phase(&self) -> bool {
        self.hooks.contains(Hooks::NEXT_PHASE)
    }

    fn next_phase(&mut self, history: &[PhaseReport]) -> Result<Option<PhaseSpec>, ScenarioError> {
        let history: Vec<_> = history.iter().map(convert::phase_summary).collect();
        let next = self.call_checked("next-phase", CALL_LIMIT, |g, s| {
            g.call_next_phase(s, &history)
        })?;
        let Some(phase) = next else {
            return Ok(None);
        };
        let spec =
            convert::phase(self.phases_given, phase).map_err(|m| self.invalid("next-phase", m))?;
        self.phases_given += 1;
        Ok(Some(spec))
    }

    fn notes(&self) -> Vec<(String, NoteValue)> {
        self.live
            .as_ref()
            .map(|l| l.store.data().host.notes().to_vec())
            .unwrap_or_default()
    }

    fn next_request(&mut self, phase: usize, index: u64) -> Result<Next, ScenarioError> {
        let phase = phase as u32;
        let next = self.call_checked("next-request", CALL_LIMIT, |g, s| {
            g.call_next_request(s, phase, index)
        })?;
        convert::next(next)
            .and_then(|n| validate::next(n, self.wants_responses()))
            .map_err(|m| self.invalid("next-request", m))
    }

    fn arrival(&mut self, phase: usize, index: u64) -> Result<f64, ScenarioError> {
        let phase = phase as u32;
        let gap = self.call_checked("arrival", CALL_LIMIT, |g, s| {
            g.call_arrival(s, phase, index)
        })?;
        validate::gap(gap).map_err(|m| self.invalid("arrival", m))
    }

    fn wants_responses(&self) -> bool {
        self.hooks.contains(Hooks::ON_RESPONSE)
    }

    fn on_response(&mut self, outcome: &Outcome) -> Result<(), ScenarioError> {
        let o = convert::outcome(outcome);
        self.call_checked("on-response", CALL_LIMIT, |g, s| g.call_on_response(s, &o))
    }

    fn has_stop(&self) -> bool {
        self.hooks.contains(Hooks::STOP)
    }

    fn stop(&mut self, snapshot: &Snapshot) -> Result<bool, ScenarioError> {
        let s = convert::snapshot(snapshot);
        self.call_checked("stop", CALL_LIMIT, |g, st| g.call_stop(st, s))
    }
}
