//! Rhai scripts as scenarios. The script defines functions named after the contract
//! (`describe`, `phases`, `next_request`, optional `arrival`, `on_response`, `stop`); `this`
//! is a map kept across calls for the script's own state. The engine is sandboxed: no
//! file, clock or system access beyond the host functions, and limits on operations,
//! call depth and sizes so a runaway script ends with a clear error.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rhai::packages::{
    BasicArrayPackage, BasicMapPackage, BasicMathPackage, BitFieldPackage, CorePackage,
    LogicPackage, MoreStringPackage, Package,
};
use rhai::{
    Array, CallFnOptions, Dynamic, Engine, EvalAltResult, FuncArgs, Map, Position, Scope, AST, INT,
};

use super::params::{parse_duration_secs, ParamSpec, ParamValue, Params};
use super::spec::{ArrivalSpec, Outcome, PhaseSpec, Prompt, RequestSpec, Snapshot};
use super::{Description, HostContext, Scenario, ScenarioError};

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

/// Accepts an integer or a float where a number is expected.
fn number(d: &Dynamic, what: &str) -> RhaiResult<f64> {
    if let Ok(v) = d.as_float() {
        Ok(v)
    } else if let Ok(v) = d.as_int() {
        Ok(v as f64)
    } else {
        Err(format!("{what}: expected a number, got {}", d.type_name()).into())
    }
}

fn sandboxed_engine() -> Engine {
    let mut engine = Engine::new_raw();
    // The standard packages minus BasicTimePackage: a clock would break reproducibility.
    for module in [
        CorePackage::new().as_shared_module(),
        LogicPackage::new().as_shared_module(),
        BasicMathPackage::new().as_shared_module(),
        BasicArrayPackage::new().as_shared_module(),
        BasicMapPackage::new().as_shared_module(),
        MoreStringPackage::new().as_shared_module(),
        BitFieldPackage::new().as_shared_module(),
    ] {
        engine.register_global_module(module);
    }
    engine.disable_symbol("eval");
    engine.set_max_operations(MAX_OPERATIONS);
    engine.set_max_call_levels(MAX_CALL_LEVELS);
    engine.set_max_expr_depths(256, 256);
    engine.set_max_string_size(MAX_STRING_BYTES);
    engine.set_max_array_size(MAX_ARRAY_LEN);
    engine.set_max_map_size(MAX_MAP_LEN);
    engine
}

fn register_host(engine: &mut Engine, host: &Arc<Mutex<HostContext>>, params: &Arc<Mutex<Params>>) {
    let p = params.clone();
    engine.register_fn("param", move |name: &str| -> RhaiResult<Dynamic> {
        match lock(&p).get(name) {
            Some(ParamValue::Int(v)) => Ok(Dynamic::from_int(*v)),
            Some(ParamValue::Float(v)) => Ok(Dynamic::from_float(*v)),
            Some(ParamValue::Bool(v)) => Ok(Dynamic::from_bool(*v)),
            Some(ParamValue::Str(v)) => Ok(Dynamic::from(v.clone())),
            None => Err(
                format!("param(\"{name}\"): no such parameter; declare it in describe()").into(),
            ),
        }
    });

    let h = host.clone();
    engine.register_fn("rand", move || lock(&h).random());
    let h = host.clone();
    engine.register_fn("rand_int", move |lo: INT, hi: INT| -> RhaiResult<INT> {
        Ok(lock(&h).rand_int(lo, hi)?)
    });
    let h = host.clone();
    engine.register_fn(
        "uniform",
        move |lo: Dynamic, hi: Dynamic| -> RhaiResult<f64> {
            Ok(lock(&h).uniform(number(&lo, "uniform")?, number(&hi, "uniform")?)?)
        },
    );
    let h = host.clone();
    engine.register_fn(
        "normal",
        move |mean: Dynamic, std: Dynamic| -> RhaiResult<f64> {
            Ok(lock(&h).normal(number(&mean, "normal")?, number(&std, "normal")?)?)
        },
    );
    let h = host.clone();
    engine.register_fn("exponential", move |rate: Dynamic| -> RhaiResult<f64> {
        Ok(lock(&h).exponential(number(&rate, "exponential")?)?)
    });
    let h = host.clone();
    engine.register_fn(
        "gamma",
        move |shape: Dynamic, scale: Dynamic| -> RhaiResult<f64> {
            Ok(lock(&h).gamma(number(&shape, "gamma")?, number(&scale, "gamma")?)?)
        },
    );
    let h = host.clone();
    engine.register_fn("choice", move |items: Array| -> RhaiResult<Dynamic> {
        if items.is_empty() {
            return Err("choice([]): the array is empty".into());
        }
        let i = lock(&h).rand_int(0, items.len() as INT - 1)? as usize;
        Ok(items[i].clone())
    });

    let h = host.clone();
    engine.register_fn("synthetic_text", move |n: INT| -> RhaiResult<String> {
        Ok(lock(&h).synthetic_text(n)?)
    });
    let h = host.clone();
    engine.register_fn("random_token_text", move |n: INT| -> RhaiResult<String> {
        Ok(lock(&h).random_token_text(n)?)
    });
    let h = host.clone();
    engine.register_fn("count_tokens", move |text: &str| -> INT {
        lock(&h).tokenizer.count(text) as INT
    });
    let h = host.clone();
    engine.register_fn("encode", move |text: &str| -> Array {
        let tok = lock(&h).tokenizer.clone();
        tok.encode(text)
            .into_iter()
            .map(|t| Dynamic::from_int(t as INT))
            .collect()
    });
    let h = host.clone();
    engine.register_fn("decode", move |ids: Array| -> RhaiResult<String> {
        let ids = ids
            .iter()
            .map(|d| d.as_int().ok().and_then(|v| u32::try_from(v).ok()))
            .collect::<Option<Vec<u32>>>()
            .ok_or("decode(ids): ids must be non-negative integers")?;
        let tok = lock(&h).tokenizer.clone();
        tok.decode(&ids).map_err(|e| e.to_string().into())
    });

    let h = host.clone();
    engine.register_fn("read_text", move |path: &str| -> RhaiResult<String> {
        Ok(lock(&h).read_file(path)?)
    });
    let h = host.clone();
    engine.register_fn("read_json", move |path: &str| -> RhaiResult<Dynamic> {
        let text = lock(&h).read_file(path)?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("read_json(\"{path}\"): not valid JSON: {e}"))?;
        rhai::serde::to_dynamic(value)
    });
    engine.register_fn("seconds", |text: &str| -> RhaiResult<f64> {
        parse_duration_secs(text)
            .ok_or_else(|| format!("seconds(\"{text}\"): expected e.g. 90, 30s, 20m, 1h").into())
    });

    let h = host.clone();
    engine.register_fn("log", move |msg: &str| lock(&h).log(msg));
    let h = host.clone();
    engine.on_print(move |msg| lock(&h).log(msg));
    let h = host.clone();
    engine.on_debug(move |msg, _, _| lock(&h).log(msg));
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

    fn parse_description(&self, d: Dynamic) -> Result<Description, ScenarioError> {
        let f = "describe";
        let map = d.try_cast::<Map>().ok_or_else(|| {
            self.invalid(
                f,
                "expected a map #{ name, description, params: [#{ name, value, help }, …] }",
            )
        })?;
        let text = |key: &str| map.get(key).map(|v| v.to_string()).unwrap_or_default();
        let name = text("name");
        if name.is_empty() {
            return Err(self.invalid(f, "`name` is missing"));
        }
        let mut params = Vec::new();
        // Parameters as an array of #{ name, default, help } keep their order; a map of
        // name → #{ default, help } is accepted too (listed alphabetically).
        let entries: Vec<(String, Map)> = match map.get("params") {
            None => vec![],
            Some(v) if v.is_array() => {
                let mut out = vec![];
                for item in v.clone().cast::<Array>() {
                    let m = item
                        .try_cast::<Map>()
                        .ok_or_else(|| self.invalid(f, "each entry of `params` must be a map"))?;
                    let n = m
                        .get("name")
                        .map(|v| v.to_string())
                        .ok_or_else(|| self.invalid(f, "a parameter has no `name`"))?;
                    out.push((n, m));
                }
                out
            }
            Some(v) if v.is_map() => v
                .clone()
                .cast::<Map>()
                .into_iter()
                .map(|(k, v)| {
                    let m = v.try_cast::<Map>().unwrap_or_default();
                    (k.to_string(), m)
                })
                .collect(),
            Some(_) => return Err(self.invalid(f, "`params` must be an array of maps")),
        };
        for (pname, m) in entries {
            // `default` is a reserved word in Rhai, so the field is `value` (a quoted
            // "default" key is accepted too).
            let default = match m.get("value").or_else(|| m.get("default")) {
                Some(v) if v.is_int() => ParamValue::Int(v.as_int().unwrap_or(0)),
                Some(v) if v.is_float() => ParamValue::Float(v.as_float().unwrap_or(0.0)),
                Some(v) if v.is_bool() => ParamValue::Bool(v.as_bool().unwrap_or(false)),
                Some(v) if v.is_string() => ParamValue::Str(v.to_string()),
                _ => return Err(self.invalid(f, format!("parameter `{pname}` needs a default `value` (integer, number, boolean or string)"))),
            };
            let help = m.get("help").map(|v| v.to_string()).unwrap_or_default();
            params.push(ParamSpec {
                name: pname,
                default,
                help,
            });
        }
        Ok(Description {
            name,
            description: text("description"),
            params,
        })
    }

    fn parse_phase(&self, i: usize, d: Dynamic) -> Result<PhaseSpec, ScenarioError> {
        let f = "phases";
        let map = d
            .try_cast::<Map>()
            .ok_or_else(|| self.invalid(f, format!("phase {i} must be a map")))?;
        let at = |key: &str| format!("phase {i}: `{key}`");
        const KNOWN: [&str; 5] = [
            "name",
            "arrival",
            "max_concurrency",
            "max_requests",
            "max_duration",
        ];
        if let Some(k) = map.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(self.invalid(
                f,
                format!(
                    "phase {i}: unknown field `{k}`; known: {}",
                    KNOWN.join(", ")
                ),
            ));
        }
        let count = |key: &str| -> Result<Option<u64>, ScenarioError> {
            match map.get(key) {
                None => Ok(None),
                Some(v) => match v.as_int() {
                    Ok(n) if n >= 0 => Ok(Some(n as u64)),
                    _ => Err(self.invalid(
                        f,
                        format!("{} must be a non-negative integer, got {v}", at(key)),
                    )),
                },
            }
        };
        let max_duration = match map.get("max_duration") {
            None => None,
            Some(v) => {
                let secs = if v.is_string() {
                    parse_duration_secs(&v.to_string())
                } else {
                    number(v, "").ok().filter(|s| s.is_finite() && *s >= 0.0)
                };
                let secs = secs.ok_or_else(|| {
                    self.invalid(
                        f,
                        format!(
                            "{} must be seconds or a duration like \"20m\", got {v}",
                            at("max_duration")
                        ),
                    )
                })?;
                Some(Duration::from_secs_f64(secs))
            }
        };
        let arrival = match map.get("arrival") {
            None => ArrivalSpec::Burst,
            Some(a) => self.parse_arrival(i, a)?,
        };
        let max_concurrency = count("max_concurrency")?;
        if max_concurrency == Some(0) {
            return Err(self.invalid(f, format!("{} must be at least 1", at("max_concurrency"))));
        }
        Ok(PhaseSpec {
            name: map
                .get("name")
                .map(|v| v.to_string())
                .unwrap_or_else(|| format!("phase {}", i + 1)),
            arrival,
            max_concurrency,
            max_requests: count("max_requests")?,
            max_duration,
        })
    }

    fn parse_arrival(&self, i: usize, a: &Dynamic) -> Result<ArrivalSpec, ScenarioError> {
        let f = "phases";
        let map = a
            .clone()
            .try_cast::<Map>()
            .ok_or_else(|| self.invalid(f, format!("phase {i}: `arrival` must be a map like #{{ process: \"poisson\", rate: 4.0 }}")))?;
        let process = map
            .get("process")
            .map(|v| v.to_string())
            .unwrap_or_else(|| "burst".into());
        let positive = |key: &str| -> Result<f64, ScenarioError> {
            let v = map.get(key).ok_or_else(|| {
                self.invalid(f, format!("phase {i}: arrival `{process}` needs `{key}`"))
            })?;
            match number(v, key) {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(self.invalid(
                    f,
                    format!("phase {i}: arrival `{key}` must be a positive number, got {v}"),
                )),
            }
        };
        Ok(match process.as_str() {
            "burst" => ArrivalSpec::Burst,
            "poisson" => ArrivalSpec::Poisson { rate: positive("rate")? },
            "gamma" => ArrivalSpec::Gamma {
                rate: positive("rate")?,
                burstiness: if map.contains_key("burstiness") { positive("burstiness")? } else { 1.0 },
            },
            "constant" => ArrivalSpec::Constant { rate: positive("rate")? },
            "closed" => ArrivalSpec::Closed { concurrency: positive("concurrency")?.round().max(1.0) as u64 },
            "custom" => {
                if !self.has_arrival {
                    return Err(self.invalid(f, format!("phase {i}: arrival `custom` needs `fn arrival(phase, index)` in the script")));
                }
                ArrivalSpec::Custom
            }
            other => {
                return Err(self.invalid(
                    f,
                    format!("phase {i}: unknown arrival process `{other}`; use burst, poisson, gamma, constant, closed or custom"),
                ))
            }
        })
    }

    fn parse_request(&self, d: Dynamic) -> Result<Option<RequestSpec>, ScenarioError> {
        let f = "next_request";
        if d.is_unit() {
            return Ok(None);
        }
        let map = d.try_cast::<Map>().ok_or_else(|| {
            self.invalid(
                f,
                "expected a map #{ prompt, max_tokens, … } or () to end the phase",
            )
        })?;
        const KNOWN: [&str; 11] = [
            "prompt",
            "messages",
            "max_tokens",
            "ignore_eos",
            "stream",
            "extra",
            "tag",
            "session",
            "at",
            "delay",
            "input_tokens",
        ];
        if let Some(k) = map.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(self.invalid(
                f,
                format!("unknown field `{k}`; known: {}", KNOWN.join(", ")),
            ));
        }
        let prompt = match (map.get("prompt"), map.get("messages")) {
            (Some(_), Some(_)) => {
                return Err(self.invalid(f, "give either `prompt` or `messages`, not both"))
            }
            (None, None) => {
                return Err(self.invalid(f, "the request has neither `prompt` nor `messages`"))
            }
            (Some(p), None) if p.is_string() => Prompt::Text(p.to_string()),
            (Some(p), None) if p.is_array() => {
                let ids = p
                    .clone()
                    .cast::<Array>()
                    .iter()
                    .map(|d| d.as_int().ok().and_then(|v| u32::try_from(v).ok()))
                    .collect::<Option<Vec<u32>>>()
                    .ok_or_else(|| {
                        self.invalid(
                            f,
                            "`prompt` as an array must hold token ids (non-negative integers)",
                        )
                    })?;
                Prompt::Tokens(ids)
            }
            (Some(p), None) => {
                return Err(self.invalid(
                    f,
                    format!(
                        "`prompt` must be a string or an array of token ids, got {}",
                        p.type_name()
                    ),
                ))
            }
            (None, Some(m)) => {
                let value: serde_json::Value = rhai::serde::from_dynamic(m).map_err(|e| {
                    self.invalid(f, format!("`messages` cannot be sent as JSON: {e}"))
                })?;
                let list = match value {
                    serde_json::Value::Array(items)
                        if !items.is_empty() && items.iter().all(|m| m.is_object()) =>
                    {
                        items
                    }
                    _ => {
                        return Err(self.invalid(
                            f,
                            "`messages` must be a non-empty array of #{ role, content } maps",
                        ))
                    }
                };
                Prompt::Messages(list)
            }
        };
        let max_tokens = match map.get("max_tokens") {
            None => return Err(self.invalid(f, "`max_tokens` is missing")),
            Some(v) => match v.as_int() {
                Ok(n) if n >= 1 => n as u64,
                _ => {
                    return Err(self.invalid(
                        f,
                        format!("`max_tokens` must be a positive integer, got {v}"),
                    ))
                }
            },
        };
        let flag = |key: &str, default: bool| -> Result<bool, ScenarioError> {
            match map.get(key) {
                None => Ok(default),
                Some(v) => v.as_bool().map_err(|_| {
                    self.invalid(f, format!("`{key}` must be true or false, got {v}"))
                }),
            }
        };
        let secs = |key: &str| -> Result<Option<f64>, ScenarioError> {
            match map.get(key) {
                None => Ok(None),
                Some(v) => match number(v, key) {
                    Ok(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                    _ => Err(self.invalid(
                        f,
                        format!("`{key}` must be a number of seconds >= 0, got {v}"),
                    )),
                },
            }
        };
        let extra = match map.get("extra") {
            None => serde_json::Map::new(),
            Some(v) => match rhai::serde::from_dynamic::<serde_json::Value>(v) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => return Err(self.invalid(f, "`extra` must be a map of JSON body fields")),
            },
        };
        let input_tokens = match map.get("input_tokens") {
            None => None,
            Some(v) => match v.as_int() {
                Ok(n) if n >= 0 => Some(n as u64),
                _ => {
                    return Err(self.invalid(
                        f,
                        format!("`input_tokens` must be a non-negative integer, got {v}"),
                    ))
                }
            },
        };
        let text = |key: &str| map.get(key).filter(|v| !v.is_unit()).map(|v| v.to_string());
        Ok(Some(RequestSpec {
            prompt,
            max_tokens,
            ignore_eos: flag("ignore_eos", false)?,
            stream: flag("stream", true)?,
            extra,
            tag: text("tag"),
            session: text("session"),
            at: secs("at")?,
            delay: secs("delay")?,
            input_tokens,
        }))
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

    fn next_request(
        &mut self,
        phase: usize,
        index: u64,
    ) -> Result<Option<RequestSpec>, ScenarioError> {
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
