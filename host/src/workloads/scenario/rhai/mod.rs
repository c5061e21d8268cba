//! Rhai scripts as scenarios. The script defines functions named after the contract
//! (`describe`, `phases`, `next_request`, optional `arrival`, `on_response`, `stop`,
//! `next_phase`); `this`
//! is a map kept across calls for the script's own state. The engine is sandboxed: no
//! file, clock or system access beyond the host functions, and limits on operations,
//! call depth and sizes so a runaway script ends with a clear error.

mod agent_api;
mod api;
mod convert;
mod deadline;
mod hooks;
mod limits;
mod record;
mod session;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rhai::{
    Array, CallFnOptions, Dynamic, Engine, EvalAltResult, FuncArgs, Map, Position, Scope, AST, INT,
};

use super::params::Params;
use super::spec::{
    LatencySummary, Next, NoteValue, Outcome, PhaseReport, PhaseSpec, ServerStat, ServerValues,
    SessionState, Snapshot, Step,
};
use super::{validate, Description, HostContext, Scenario, ScenarioError};
use api::{number, register_host, sandboxed_engine};
use deadline::CallDeadline;
use record::HostRecord;

/// Operations one call may run (a 32,000-token prompt is one host call, so this is generous).
const MAX_OPERATIONS: u64 = 50_000_000;
const MAX_CALL_LEVELS: usize = 64;

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
    has_next_phase: bool,
    has_session_step: bool,
    /// Phases given so far, so `next_phase`'s phases are numbered after them.
    phases_given: usize,
    /// The wall-clock limit of the call in progress.
    deadline: CallDeadline,
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
        let host = Arc::new(Mutex::new(host));
        // Until `describe` names it, the scenario is named after its file.
        lock(&host).scenario = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scenario")
            .to_string();
        let params = Arc::new(Mutex::new(Params::default()));
        let mut engine = sandboxed_engine();
        register_host(&mut engine, &host, &params);
        agent_api::register(&mut engine, &host);
        record::register(&mut engine);
        let deadline = CallDeadline::install(&mut engine);
        let ast = compile(&engine, &file, &source)?;
        let has = |name: &str, arity: usize| {
            ast.iter_functions()
                .any(|f| f.name == name && f.params.len() == arity)
        };
        check_hooks(&file, &ast)?;
        let mut scenario = RhaiScenario {
            has_arrival: has("arrival", 2),
            has_on_response: has("on_response", 1),
            has_stop: has("stop", 1),
            has_next_phase: has("next_phase", 1),
            has_session_step: has("session_step", 1),
            file,
            engine,
            ast: ast.clone(),
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
            phases_given: 0,
            deadline,
        };
        // Top-level statements run once, so scripts may define constants there.
        scenario.deadline.start("<top level>");
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
        self.deadline.start(function);
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
            EvalAltResult::ErrorTerminated(token, _) if token.to_string() == limits::TOKEN => {
                format!(
                    "the call added more than {} MiB to the heap (the scenario size limit: a quarter of the runner's memory budget, at most 1024 MiB in a setup call, 256 MiB in the others) and was stopped",
                    limits::call_heap_limit(function) >> 20
                )
            }
            EvalAltResult::ErrorTerminated(token, _) if token.to_string() == deadline::TOKEN => {
                format!(
                    "the call ran longer than {} s (wall clock, host calls included) and was stopped",
                    CallDeadline::limit_of(function).as_secs()
                )
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

/// The script compiled, or its first syntax error with its position.
fn compile(engine: &Engine, file: &str, source: &str) -> Result<AST, ScenarioError> {
    engine.compile(source).map_err(|e| {
        let pos = e.position();
        ScenarioError::Syntax {
            file: file.to_string(),
            line: pos.line().unwrap_or(0),
            column: pos.position().unwrap_or(0),
            message: e.err_type().to_string(),
        }
    })
}

/// The three hooks every script defines must be there (`next_request` may be left out by
/// a script of sessions only, which defines `session_step`); a function that looks like a
/// misspelled hook gets a warning (it would never be called).
fn check_hooks(file: &str, ast: &AST) -> Result<(), ScenarioError> {
    let defined: Vec<(String, usize)> = ast
        .iter_functions()
        .map(|f| (f.name.to_string(), f.params.len()))
        .collect();
    let sessions = defined.iter().any(|(n, a)| n == "session_step" && *a == 1);
    for &(name, arity, sig) in &hooks::HOOKS[..3] {
        if sessions && name == "next_request" {
            continue;
        }
        if !defined.iter().any(|(n, a)| n == name && *a == arity) {
            return Err(ScenarioError::Invalid {
                file: file.to_string(),
                function: name.into(),
                message: format!("the script must define `fn {sig}`"),
            });
        }
    }
    for warning in hooks::near_misses(&defined) {
        crate::errln!("warning: {file}: {warning}");
    }
    Ok(())
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
        validate::phase_count(list.len(), self.has_next_phase)
            .map_err(|m| self.invalid("phases", m))?;
        let phases = list
            .into_iter()
            .enumerate()
            .map(|(i, p)| self.parse_phase(i, p))
            .collect::<Result<Vec<_>, _>>()?;
        self.phases_given = phases.len();
        Ok(phases)
    }

    fn has_next_phase(&self) -> bool {
        self.has_next_phase
    }

    fn next_phase(&mut self, history: &[PhaseReport]) -> Result<Option<PhaseSpec>, ScenarioError> {
        let list: Array = history.iter().map(phase_report_map).collect();
        let d = self.call("next_phase", (Dynamic::from_array(list),))?;
        // `()` or "done" ends the run.
        if d.is_unit() || d.clone().into_string().is_ok_and(|s| s == "done") {
            return Ok(None);
        }
        let phase = self
            .parse_phase(self.phases_given, d)
            .map_err(|e| match e {
                ScenarioError::Invalid { file, message, .. } => ScenarioError::Invalid {
                    file,
                    function: "next_phase".into(),
                    message,
                },
                other => other,
            })?;
        self.phases_given += 1;
        Ok(Some(phase))
    }

    fn notes(&self) -> Vec<(String, NoteValue)> {
        lock(&self.host).notes().to_vec()
    }

    fn next_request(&mut self, phase: usize, index: u64) -> Result<Next, ScenarioError> {
        let d = self.call("next_request", (phase as INT, index as INT))?;
        self.parse_request(d)
    }

    fn arrival(&mut self, phase: usize, index: u64) -> Result<f64, ScenarioError> {
        let d = self.call("arrival", (phase as INT, index as INT))?;
        number(&d, "arrival")
            .map_err(|_| validate::not_a_gap(&d))
            .and_then(validate::gap)
            .map_err(|m| self.invalid("arrival", m))
    }

    fn wants_responses(&self) -> bool {
        self.has_on_response
    }

    fn on_response(&mut self, o: &Outcome) -> Result<(), ScenarioError> {
        self.call("on_response", (outcome_map(o),)).map(|_| ())
    }

    fn has_sessions(&self) -> bool {
        self.has_session_step
    }

    fn session_step(&mut self, state: &SessionState) -> Result<Step, ScenarioError> {
        session::step(self, state)
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
        m.insert("server".into(), server_values_map(&s.server));
        let d = self.call("stop", (HostRecord::dynamic("snapshot", m),))?;
        d.as_bool()
            .map_err(|_| self.invalid("stop", format!("expected true or false, got {d}")))
    }
}

/// A finished request as the map `on_response(outcome)` (and a session's `s.last`)
/// receives.
fn outcome_map(o: &Outcome) -> Dynamic {
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
    m.insert("cancelled".into(), Dynamic::from_bool(o.cancelled));
    m.insert(
        "ttfa_ms".into(),
        o.ttfa_ms.map(Dynamic::from_float).unwrap_or(Dynamic::UNIT),
    );
    m.insert(
        "reasoning_tokens".into(),
        Dynamic::from_int(o.reasoning_tokens as INT),
    );
    let calls: Array = o
        .tool_calls
        .iter()
        .map(|c| {
            let mut call = Map::new();
            call.insert("id".into(), Dynamic::from(c.id.clone()));
            call.insert("name".into(), Dynamic::from(c.name.clone()));
            call.insert("arguments".into(), Dynamic::from(c.arguments.clone()));
            HostRecord::dynamic("tool call", call)
        })
        .collect();
    m.insert("tool_calls".into(), Dynamic::from_array(calls));
    HostRecord::dynamic("outcome", m)
}

/// A finished phase as the map `next_phase(history)` receives; latencies in ms, with
/// `ttft`, `tpot`, `itl`, `e2el` each a map of `mean`, `p50`, `p90`, `p99`.
fn phase_report_map(r: &PhaseReport) -> Dynamic {
    let optional_float = |v: Option<f64>| v.map(Dynamic::from_float).unwrap_or(Dynamic::UNIT);
    let latency = |l: &LatencySummary| {
        let mut m = Map::new();
        for (k, v) in [
            ("mean", l.mean),
            ("p50", l.p50),
            ("p90", l.p90),
            ("p99", l.p99),
        ] {
            m.insert(k.into(), Dynamic::from_float(v));
        }
        HostRecord::dynamic("latency summary", m)
    };
    let mut m = Map::new();
    m.insert("index".into(), Dynamic::from_int(r.index as INT));
    m.insert("name".into(), Dynamic::from(r.name.clone()));
    m.insert("warmup".into(), Dynamic::from_bool(r.warmup));
    m.insert("rate".into(), optional_float(r.request_rate));
    m.insert(
        "concurrency".into(),
        r.max_concurrency
            .map(|c| Dynamic::from_int(c as INT))
            .unwrap_or(Dynamic::UNIT),
    );
    m.insert("duration".into(), Dynamic::from_float(r.duration_s));
    m.insert("completed".into(), Dynamic::from_int(r.completed as INT));
    m.insert("failed".into(), Dynamic::from_int(r.failed as INT));
    m.insert(
        "request_throughput".into(),
        Dynamic::from_float(r.request_throughput),
    );
    m.insert(
        "output_throughput".into(),
        Dynamic::from_float(r.output_throughput),
    );
    m.insert("goodput".into(), optional_float(r.goodput));
    m.insert("ttft".into(), latency(&r.ttft));
    m.insert("tpot".into(), latency(&r.tpot));
    m.insert("itl".into(), latency(&r.itl));
    m.insert("e2el".into(), latency(&r.e2el));
    m.insert("server".into(), server_stats_map(&r.server));
    HostRecord::dynamic("phase", m)
}

/// The server's metrics at the latest scrape, as the snapshot's `server`: a plain map of
/// metric name to value, since which metrics a server exports is not known in advance
/// (`snapshot.server["vllm:num_requests_waiting"] ?? 0.0` reads one that may be missing).
fn server_values_map(values: &ServerValues) -> Dynamic {
    let map: Map = values
        .iter()
        .map(|(name, value)| (name.as_str().into(), Dynamic::from_float(*value)))
        .collect();
    Dynamic::from_map(map)
}

/// The server's metrics over a phase, as a history entry's `server`: metric name to a
/// record of `last`, `mean` and `max`.
fn server_stats_map(stats: &[ServerStat]) -> Dynamic {
    let map: Map = stats
        .iter()
        .map(|s| {
            let mut m = Map::new();
            for (k, v) in [("last", s.last), ("mean", s.mean), ("max", s.max)] {
                m.insert(k.into(), Dynamic::from_float(v));
            }
            (
                s.name.as_str().into(),
                HostRecord::dynamic("server metric", m),
            )
        })
        .collect();
    Dynamic::from_map(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::scenario::files::FileAccess;
    use crate::workloads::scenario::spec::{Cancel, Prompt};
    use crate::workloads::tokenizer::Tokenizer;

    /// A script that reads every field the 0.3 contract added: it sends them, and notes
    /// what it was given.
    const SCRIPT: &str = r#"
        fn describe() { #{ name: "fields" } }
        fn phases() { [#{ name: "p", max_requests: 1 }] }
        fn next_request(phase, index) {
            #{ inputs: ["a", "b"], max_tokens: 1, headers: #{ "x-tenant": "t1" },
               cancel_after_tokens: 5, cancel_after_ms: 250.0, target: 1 }
        }
        fn on_response(o) {
            note("outcome", `${o.cancelled} ${o.ttfa_ms} ${o.reasoning_tokens}`);
        }
        fn stop(s) { (s.server["vllm:num_requests_waiting"] ?? 0.0) > 3.0 }
        fn next_phase(history) {
            let kv = history[0].server["vllm:kv_cache_usage_perc"];
            note("kv", `${kv.last} ${kv.mean} ${kv.max}`);
            ()
        }
    "#;

    fn load(source: &str) -> (tempfile::TempDir, RhaiScenario) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("fields.rhai");
        std::fs::write(&path, source).expect("write the script");
        let tokenizer = Arc::new(Tokenizer::load("o200k_base").expect("built-in tokenizer"));
        let host = HostContext::new(tokenizer, FileAccess::none(), true);
        let scenario = RhaiScenario::load(&path, host).expect("the script loads");
        (dir, scenario)
    }

    fn note(s: &RhaiScenario, key: &str) -> String {
        let notes = s.notes();
        let (_, v) = notes.iter().find(|(k, _)| k == key).expect("noted");
        v.to_string()
    }

    #[test]
    fn a_script_sends_the_new_request_fields() {
        let (_dir, mut s) = load(SCRIPT);
        let Next::Request(r) = s.next_request(0, 0).unwrap() else {
            panic!("expected a request");
        };
        assert_eq!(r.prompt, Prompt::Inputs(vec!["a".into(), "b".into()]));
        assert_eq!(r.headers, [("x-tenant".to_string(), "t1".to_string())]);
        assert_eq!(
            r.cancel,
            Some(Cancel {
                after_tokens: Some(5),
                after_ms: Some(250.0)
            })
        );
        assert_eq!(r.target, Some(1));
    }

    #[test]
    fn a_script_reads_the_new_outcome_snapshot_and_history_fields() {
        let (_dir, mut s) = load(SCRIPT);
        let o = Outcome {
            cancelled: true,
            ttfa_ms: Some(42.5),
            reasoning_tokens: 7,
            ..Outcome::default()
        };
        s.on_response(&o).unwrap();
        assert_eq!(note(&s, "outcome"), "true 42.5 7");
        s.on_response(&Outcome::default()).unwrap();
        assert_eq!(note(&s, "outcome"), "false  0");

        let snapshot = |waiting: f64| Snapshot {
            server: vec![("vllm:num_requests_waiting".into(), waiting)],
            ..Snapshot::default()
        };
        assert!(!s.stop(&snapshot(3.0)).unwrap());
        assert!(s.stop(&snapshot(4.0)).unwrap());
        assert!(!s.stop(&Snapshot::default()).unwrap());

        let phase = PhaseReport {
            server: vec![ServerStat {
                name: "vllm:kv_cache_usage_perc".into(),
                last: 0.5,
                mean: 0.25,
                max: 0.75,
            }],
            ..PhaseReport::default()
        };
        assert_eq!(s.next_phase(&[phase]).unwrap(), None);
        assert_eq!(note(&s, "kv"), "0.5 0.25 0.75");
    }

    #[test]
    fn the_new_request_fields_are_checked() {
        let with = |fields: &str| {
            SCRIPT.replace(
                r#"inputs: ["a", "b"], max_tokens: 1, headers: #{ "x-tenant": "t1" },
               cancel_after_tokens: 5, cancel_after_ms: 250.0, target: 1"#,
                fields,
            )
        };
        let cases = [
            (
                r#"prompt: "x", inputs: ["a"], max_tokens: 1"#,
                "give one of `prompt`, `messages` and `inputs`, not `prompt` and `inputs`",
            ),
            ("max_tokens: 1", "none of `prompt`, `messages` and `inputs`"),
            ("inputs: [], max_tokens: 1", "`inputs` is empty"),
            (
                "inputs: [1], max_tokens: 1",
                "`inputs` must be an array of strings",
            ),
            (
                r#"prompt: "x", max_tokens: 1, headers: #{ "bad name": "v" }"#,
                "not an HTTP token",
            ),
            (
                r#"prompt: "x", max_tokens: 1, headers: #{ "x-a": 1 }"#,
                "must be a string",
            ),
            (
                r#"prompt: "x", max_tokens: 1, headers: ["x"]"#,
                "`headers` must be a map",
            ),
            (
                r#"prompt: "x", max_tokens: 1, cancel_after_tokens: 0"#,
                "`cancel_after_tokens` must be a number above 0, got 0",
            ),
            (
                r#"prompt: "x", max_tokens: 1, cancel_after_ms: -2.0"#,
                "`cancel_after_ms` must be a number above 0",
            ),
            (
                r#"prompt: "x", max_tokens: 1, target: -1"#,
                "`target` must be a non-negative integer",
            ),
        ];
        for (fields, expected) in cases {
            let (_dir, mut s) = load(&with(fields));
            let e = s.next_request(0, 0).unwrap_err().to_string();
            assert!(e.contains(expected), "{fields}: {e}");
        }
    }
}
