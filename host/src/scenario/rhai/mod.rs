//! Rhai scripts as scenarios. The script defines functions named after the contract
//! (`describe`, `phases`, `next_request`, optional `arrival`, `on_response`, `stop`); `this`
//! is a map kept across calls for the script's own state. The engine is sandboxed: no
//! file, clock or system access beyond the host functions, and limits on operations,
//! call depth and sizes so a runaway script ends with a clear error.

mod api;
mod convert;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rhai::{
    Array, CallFnOptions, Dynamic, Engine, EvalAltResult, FuncArgs, Map, Position, Scope, AST, INT,
};

use super::params::Params;
use super::spec::{Next, Outcome, PhaseSpec, Snapshot};
use super::{Description, HostContext, Scenario, ScenarioError};
use api::{number, register_host, sandboxed_engine};

/// Operations one call may run (a 32,000-token prompt is one host call, so this is generous).
const MAX_OPERATIONS: u64 = 50_000_000;
const MAX_CALL_LEVELS: usize = 64;
const MAX_STRING_BYTES: usize = 64 << 20;
const MAX_ARRAY_LEN: usize = 4_000_000;
const MAX_MAP_LEN: usize = 1_000_000;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

pub struct RhaiScenario {
    file: String,
    engine: Engine,
    ast: AST,
    scope: Scope<'static>,
    /// `this` inside script functions: the script's state across calls.
    state: Dynamic,
    host: Arc<Mutex<HostContext>>,
    params: Arc<Mutex<Params>>,
    description: Description,
    has_arrival: bool,
    has_on_response: bool,
    has_stop: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these plain values inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RhaiScenario {
    pub fn load(path: &Path, host: HostContext) -> Result<RhaiScenario, ScenarioError> {
        let file = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        let name_hint = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scenario")
            .to_string();
        let host = Arc::new(Mutex::new(host));
        lock(&host).scenario = name_hint;
        let params = Arc::new(Mutex::new(Params::default()));
        let mut engine = sandboxed_engine();
        register_host(&mut engine, &host, &params);

        let ast = engine.compile(&source).map_err(|e| {
            let pos = e.position();
            ScenarioError::Syntax {
                file: file.clone(),
                line: pos.line().unwrap_or(0),
                column: pos.position().unwrap_or(0),
                message: e.err_type().to_string(),
            }
        })?;
        let has = |name: &str, arity: usize| {
            ast.iter_functions()
                .any(|f| f.name == name && f.params.len() == arity)
        };
        for (name, arity, sig) in [
            ("describe", 0, "describe()"),
            ("phases", 0, "phases()"),
            ("next_request", 2, "next_request(phase, index)"),
        ] {
            if !has(name, arity) {
                return Err(ScenarioError::Invalid {
                    file,
                    function: name.into(),
                    message: format!("the script must define `fn {sig}`"),
                });
            }
        }
        let (has_arrival, has_on_response, has_stop) =
            (has("arrival", 2), has("on_response", 1), has("stop", 1));

        let mut scenario = RhaiScenario {
            file,
            engine,
            ast,
            scope: Scope::new(),
            state: Dynamic::from_map(Map::new()),
            host,
            params,
            description: Description {
                name: String::new(),
                description: String::new(),
                params: vec![],
                thresholds: vec![],
            },
            has_arrival,
            has_on_response,
            has_stop,
        };
        // Top-level statements run once, so scripts may define constants there.
        let ast = scenario.ast.clone();
        if let Err(e) = scenario
            .engine
            .run_ast_with_scope(&mut scenario.scope, &ast)
        {
            return Err(Self::to_error(&scenario.file, "<top level>", *e));
        }
        let described = scenario.call("describe", ())?;
        scenario.description = scenario.parse_description(described)?;
        lock(&scenario.host).scenario = scenario.description.name.clone();
        Ok(scenario)
    }

    fn call(&mut self, function: &str, args: impl FuncArgs) -> Result<Dynamic, ScenarioError> {
        let options = CallFnOptions::new()
            .eval_ast(false)
            .rewind_scope(true)
            .bind_this_ptr(&mut self.state);
        self.engine
            .call_fn_with_options::<Dynamic>(options, &mut self.scope, &self.ast, function, args)
            .map_err(|e| Self::to_error(&self.file, function, *e))
    }

    /// The innermost error of a chain of function calls carries the useful position.
    fn to_error(file: &str, function: &str, mut e: EvalAltResult) -> ScenarioError {
        let mut outer_pos = Position::NONE;
        while let EvalAltResult::ErrorInFunctionCall(_, _, inner, pos) = e {
            if outer_pos.is_none() {
                outer_pos = pos;
            }
            e = *inner;
        }
        let pos = if e.position().is_none() {
            outer_pos
        } else {
            e.position()
        };
        let message = match &e {
            EvalAltResult::ErrorRuntime(value, _) => value.to_string(),
            EvalAltResult::ErrorTooManyOperations(_) => format!(
                "the script ran more than {MAX_OPERATIONS} operations in one call (an endless loop?) and was stopped"
            ),
            EvalAltResult::ErrorDataTooLarge(what, _) => {
                format!("{what} grew past the scenario size limit (strings {MAX_STRING_BYTES} bytes, arrays {MAX_ARRAY_LEN}, maps {MAX_MAP_LEN})")
            }
            EvalAltResult::ErrorStackOverflow(_) => {
                format!("calls nested deeper than {MAX_CALL_LEVELS} levels (endless recursion?)")
            }
            other => other.to_string().split(" (line ").next().unwrap_or_default().to_string(),
        };
        ScenarioError::Script {
            file: file.to_string(),
            function: function.to_string(),
            line: pos.line().unwrap_or(0),
            column: pos.position().unwrap_or(0),
            message,
        }
    }

    fn invalid(&self, function: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.clone(),
            function: function.into(),
            message: message.into(),
        }
    }
}

impl Scenario for RhaiScenario {
    fn describe(&self) -> &Description {
        &self.description
    }

    fn configure(&mut self, params: &Params) -> Result<(), ScenarioError> {
        *lock(&self.params) = params.clone();
        lock(&self.host).reseed(params.seed());
        Ok(())
    }

    fn phases(&mut self) -> Result<Vec<PhaseSpec>, ScenarioError> {
        let d = self.call("phases", ())?;
        let list: Vec<Dynamic> = if d.is_array() {
            d.cast::<Array>()
        } else if d.is_map() {
            vec![d]
        } else {
            return Err(self.invalid("phases", "expected an array of phase maps"));
        };
        if list.is_empty() {
            return Err(self.invalid("phases", "returned no phases"));
        }
        list.into_iter()
            .enumerate()
            .map(|(i, p)| self.parse_phase(i, p))
            .collect()
    }

    fn next_request(&mut self, phase: usize, index: u64) -> Result<Next, ScenarioError> {
        let d = self.call("next_request", (phase as INT, index as INT))?;
        self.parse_request(d)
    }

    fn arrival(&mut self, phase: usize, index: u64) -> Result<f64, ScenarioError> {
        let d = self.call("arrival", (phase as INT, index as INT))?;
        match number(&d, "arrival") {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(self.invalid("arrival", format!("expected seconds >= 0, got {d}"))),
        }
    }

    fn wants_responses(&self) -> bool {
        self.has_on_response
    }

    fn on_response(&mut self, o: &Outcome) -> Result<(), ScenarioError> {
        let mut m = Map::new();
        m.insert("phase".into(), Dynamic::from_int(o.phase as INT));
        m.insert("index".into(), Dynamic::from_int(o.index as INT));
        m.insert(
            "tag".into(),
            o.tag.clone().map(Dynamic::from).unwrap_or(Dynamic::UNIT),
        );
        m.insert(
            "session".into(),
            o.session
                .clone()
                .map(Dynamic::from)
                .unwrap_or(Dynamic::UNIT),
        );
        m.insert("ok".into(), Dynamic::from_bool(o.ok));
        m.insert(
            "error".into(),
            o.error.clone().map(Dynamic::from).unwrap_or(Dynamic::UNIT),
        );
        m.insert("text".into(), Dynamic::from(o.text.clone()));
        m.insert("ttft_ms".into(), Dynamic::from_float(o.ttft_ms));
        m.insert("e2el_ms".into(), Dynamic::from_float(o.e2el_ms));
        m.insert(
            "input_tokens".into(),
            Dynamic::from_int(o.input_tokens as INT),
        );
        m.insert(
            "output_tokens".into(),
            Dynamic::from_int(o.output_tokens as INT),
        );
        self.call("on_response", (Dynamic::from_map(m),))
            .map(|_| ())
    }

    fn has_stop(&self) -> bool {
        self.has_stop
    }

    fn stop(&mut self, s: &Snapshot) -> Result<bool, ScenarioError> {
        let mut m = Map::new();
        m.insert("phase".into(), Dynamic::from_int(s.phase as INT));
        m.insert("elapsed".into(), Dynamic::from_float(s.elapsed_s));
        for (k, v) in [
            ("sent", s.sent),
            ("completed", s.completed),
            ("failed", s.failed),
            ("in_flight", s.in_flight),
            ("output_tokens", s.output_tokens),
        ] {
            m.insert(k.into(), Dynamic::from_int(v as INT));
        }
        for (k, v) in [
            ("ttft_p50_ms", s.ttft_p50_ms),
            ("ttft_p99_ms", s.ttft_p99_ms),
            ("e2el_p99_ms", s.e2el_p99_ms),
        ] {
            m.insert(k.into(), Dynamic::from_float(v));
        }
        let d = self.call("stop", (Dynamic::from_map(m),))?;
        d.as_bool()
            .map_err(|_| self.invalid("stop", format!("expected true or false, got {d}")))
    }
}
