//! WebAssembly components as scenarios, behind the same trait as Rhai scripts. A component
//! implements the `bench:scenario` WIT package (wit/scenario.wit, or an earlier version
//! kept in wit/compat/0.3.0 or wit/compat/0.2.0: see `instance`); it is compiled once per
//! run and runs in a sandbox (see `sandbox`): no network, no environment, no clock, a
//! read-only view of its own directory, a memory cap, and a time limit on every call.

mod compile_cache;
mod convert;
mod imports;
mod instance;
mod last_words;
mod sandbox;
pub mod version;

use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmtime::{Engine, Store, Trap, WasmBacktrace};

use super::params::Params;
use super::spec::{Next, NoteValue, Outcome, PhaseReport, PhaseSpec, SessionState, Snapshot, Step};
use super::{validate, Description, HostContext, Scenario, ScenarioError};
use convert::Hooks;
use imports::HostTrap;
use instance::{CallError, Instance, LinkError, Pre};
use last_words::Said;
use sandbox::{GuestState, EPOCH_TICK};

/// The bindings of the current interface version, wit/scenario.wit.
mod bindings {
    // Every import may trap: a host function over its budget ends the call.
    wasmtime::component::bindgen!({
        world: "scenario",
        path: "../wit",
        imports: { default: trappable },
    });
}

/// The bindings of 0.3, frozen in wit/compat/0.3.0, for components built against it (no
/// sessions, no tools).
mod v0_3 {
    wasmtime::component::bindgen!({
        world: "scenario",
        path: "../wit/compat/0.3.0",
        imports: { default: trappable },
    });
}

/// The bindings of 0.2, frozen in wit/compat/0.2.0, for components built against it.
mod v0_2 {
    wasmtime::component::bindgen!({
        world: "scenario",
        path: "../wit/compat/0.2.0",
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
    instance: Instance,
    /// Set after a trap: wasmtime refuses further calls into the instance.
    trapped: bool,
}

pub struct WasmScenario {
    file: String,
    engine: Engine,
    pre: Pre,
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
        let interface = version::check(
            ty.imports(&engine).map(|(name, _)| name),
            ty.exports(&engine).map(|(name, _)| name),
        )
        .map_err(fail)?;
        let pre = Pre::link(&engine, &component, interface).map_err(|e| match e {
            LinkError::Host(e) => fail(format!("cannot link the host interface: {e}")),
            LinkError::Component(e) => fail(format!(
                "the component needs something the sandbox does not offer: {}",
                e.root_cause()
            )),
        })?;

        host.check_mount().map_err(|e| fail(e.to_string()))?;
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
            hooks: Hooks::default(),
            phases_given: 0,
        };
        scenario.instantiate(host, Params::default())?;
        let (description, hooks) = scenario.call("describe", CALL_LIMIT, Instance::describe)?;
        scenario.hooks = hooks;
        scenario.description = description;
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

    /// One call into the guest under a time limit; traps and the scenario's own errors
    /// become errors naming the scenario and the function, values the host's rules
    /// refuse say which rule.
    fn call<T>(
        &mut self,
        function: &str,
        limit: Duration,
        f: impl FnOnce(&Instance, &mut Store<GuestState>) -> Result<T, CallError>,
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
        match f(&live.instance, &mut live.store) {
            Ok(v) => Ok(v),
            Err(CallError::Trap(e)) => {
                live.trapped = true;
                let message = failure_message(&live.store, limit, &e);
                Err(self.script_error(function, message))
            }
            Err(CallError::Scenario(message)) => {
                Err(self.script_error(function, last_words::one_line(&message)))
            }
            Err(CallError::Invalid(message)) => Err(self.invalid(function, message)),
        }
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
/// stack overflow, or the trap itself; then what the guest wrote to stderr, where a Rust
/// panic's message and a Python traceback land (see `last_words`): a panic or an
/// uncaught exception is said instead of the trap it ended in.
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
    let said = last_words::summary(&String::from_utf8_lossy(&state.stderr.contents()));
    let message = match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => format!(
            "ran longer than {:.1} s and was stopped (an endless loop?)",
            limit.as_secs_f64()
        ),
        Some(Trap::StackOverflow) => STACK_OVERFLOW.to_string(),
        Some(Trap::MemoryOutOfBounds) if wrapped_stack(e) => STACK_OVERFLOW.to_string(),
        Some(trap) => match said {
            Some(Said::Panic(p)) => return format!("the component {p}"),
            Some(Said::Exception(x)) => return x,
            _ => format!("the component trapped: {trap}"),
        },
        None => format!("the call failed: {}", e.root_cause()),
    };
    match said {
        Some(said) => format!("{message}; it wrote: {}", said.text()),
        None => message,
    }
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
        let phases = self.call("phases", SETUP_LIMIT, Instance::phases)?;
        validate::phase_count(phases.len(), self.has_next_phase())
            .map_err(|m| self.invalid("phases", m))?;
        self.phases_given = phases.len();
        Ok(phases)
    }

    fn has_next_phase(&self) -> bool {
        self.hooks.next_phase
    }

    fn next_phase(&mut self, history: &[PhaseReport]) -> Result<Option<PhaseSpec>, ScenarioError> {
        let given = self.phases_given;
        let next = self.call("next-phase", CALL_LIMIT, |i, s| {
            i.next_phase(s, history, given)
        })?;
        if next.is_some() {
            self.phases_given += 1;
        }
        Ok(next)
    }

    fn notes(&self) -> Vec<(String, NoteValue)> {
        self.live
            .as_ref()
            .map(|l| l.store.data().host.notes().to_vec())
            .unwrap_or_default()
    }

    fn next_request(&mut self, phase: usize, index: u64) -> Result<Next, ScenarioError> {
        let phase = phase as u32;
        let next = self.call("next-request", CALL_LIMIT, |i, s| {
            i.next_request(s, phase, index)
        })?;
        validate::next(next, self.wants_responses()).map_err(|m| self.invalid("next-request", m))
    }

    fn arrival(&mut self, phase: usize, index: u64) -> Result<f64, ScenarioError> {
        let phase = phase as u32;
        let gap = self.call("arrival", CALL_LIMIT, |i, s| i.arrival(s, phase, index))?;
        validate::gap(gap).map_err(|m| self.invalid("arrival", m))
    }

    fn has_sessions(&self) -> bool {
        self.hooks.sessions
    }

    /// The guest's call draws from the session's own random stream: the host context
    /// switches to it for the call and back after it, whether the call succeeded or not.
    fn session_step(&mut self, state: &SessionState) -> Result<Step, ScenarioError> {
        if !self.hooks.sessions {
            return Err(ScenarioError::Unsupported {
                file: self.file.clone(),
                message: "a phase has `sessions` but the component's `describe` did not announce `sessions` in its hooks".into(),
            });
        }
        if let Some(live) = &mut self.live {
            live.store.data_mut().host.enter_session(state);
        }
        let step = self.call("session-step", CALL_LIMIT, |i, s| i.session_step(s, state));
        if let Some(live) = &mut self.live {
            live.store.data_mut().host.leave_session();
        }
        validate::step(step?).map_err(|m| self.invalid("session-step", m))
    }

    fn wants_responses(&self) -> bool {
        self.hooks.on_response
    }

    fn on_response(&mut self, outcome: &Outcome) -> Result<(), ScenarioError> {
        self.call("on-response", CALL_LIMIT, |i, s| i.on_response(s, outcome))
    }

    fn has_stop(&self) -> bool {
        self.hooks.stop
    }

    fn stop(&mut self, snapshot: &Snapshot) -> Result<bool, ScenarioError> {
        self.call("stop", CALL_LIMIT, |i, s| i.stop(s, snapshot))
    }
}
