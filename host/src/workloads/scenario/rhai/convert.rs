//! Script values to the contract's types, with errors naming the offending field. What is
//! checked here is the shape of a Rhai value (a map with known keys, an integer where a
//! count belongs); the rules on the converted values (a closed loop of at least one
//! request, a positive `max_tokens`) are `scenario::validate`'s, shared with Wasm guests.

use std::time::Duration;

use rhai::{Array, Dynamic, Map};

use super::api::number;
use super::RhaiScenario;
use crate::workloads::scenario::params::{parse_duration_secs, ParamSpec, ParamValue};
use crate::workloads::scenario::spec::{
    ArrivalSpec, Cancel, NamedWindow, Next, PhaseControl, PhaseSpec, Prompt, RequestSpec, Step,
    ToolSpec,
};
use crate::workloads::scenario::{validate, Description, ScenarioError};

impl RhaiScenario {
    pub(super) fn parse_description(&self, d: Dynamic) -> Result<Description, ScenarioError> {
        description(d).map_err(|m| self.invalid("describe", m))
    }

    pub(super) fn parse_phase(&self, i: usize, d: Dynamic) -> Result<PhaseSpec, ScenarioError> {
        phase(i, d, self.has_arrival).map_err(|m| self.invalid("phases", m))
    }

    pub(super) fn parse_request(&self, d: Dynamic) -> Result<Next, ScenarioError> {
        next(d)
            .and_then(|n| validate::next(n, self.has_on_response))
            .map_err(|m| self.invalid("next_request", m))
    }
}

/// The fields of a script map, read with errors that name the field. `at` prefixes each
/// error ("phase 2: ") where the map is one of several.
struct Fields<'a> {
    map: &'a Map,
    at: String,
}

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Dynamic> {
        self.map.get(key)
    }

    /// Refuses a key outside `known`, listing them.
    fn only(&self, known: &[&str]) -> Result<(), String> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(format!(
                "{}unknown field `{k}`; known: {}",
                self.at,
                known.join(", ")
            )),
            None => Ok(()),
        }
    }

    /// A non-negative integer, if present.
    fn count(&self, key: &str) -> Result<Option<u64>, String> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.as_int() {
            Ok(n) if n >= 0 => Ok(Some(n as u64)),
            _ => Err(format!(
                "{}`{key}` must be a non-negative integer, got {}",
                self.at,
                shown(v)
            )),
        }
    }

    /// true or false, `default` when absent.
    fn flag(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .map_err(|_| format!("{}`{key}` must be true or false, got {}", self.at, shown(v))),
        }
    }

    /// A text field; `()` counts as absent.
    fn text(&self, key: &str) -> Option<String> {
        self.get(key)
            .filter(|v| !v.is_unit())
            .map(|v| v.to_string())
    }
}

fn description(d: Dynamic) -> Result<Description, String> {
    let map = d
        .try_cast::<Map>()
        .ok_or("expected a map #{ name, description, params: [#{ name, value, help }, …] }")?;
    let fields = Fields {
        map: &map,
        at: String::new(),
    };
    let description = Description {
        name: fields.text("name").unwrap_or_default(),
        description: fields.text("description").unwrap_or_default(),
        params: params(fields.get("params"))?,
        thresholds: thresholds(fields.get("thresholds"))?,
    };
    validate::description(&description).map(|()| description)
}

/// Parameters as an array of #{ name, value, help } keep their order; a map of
/// name → #{ value, help } is accepted too (listed alphabetically).
fn params(list: Option<&Dynamic>) -> Result<Vec<ParamSpec>, String> {
    let entries: Vec<(String, Map)> = match list {
        None => vec![],
        Some(v) if v.is_array() => {
            let mut out = vec![];
            for item in v.clone().cast::<Array>() {
                let m = item
                    .try_cast::<Map>()
                    .ok_or("each entry of `params` must be a map")?;
                let n = m
                    .get("name")
                    .map(|v| v.to_string())
                    .ok_or("a parameter has no `name`")?;
                out.push((n, m));
            }
            out
        }
        Some(v) if v.is_map() => v
            .clone()
            .cast::<Map>()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.try_cast::<Map>().unwrap_or_default()))
            .collect(),
        Some(_) => return Err("`params` must be an array of maps".into()),
    };
    entries
        .into_iter()
        .map(|(name, m)| {
            Ok(ParamSpec {
                default: param_default(&name, &m)?,
                help: m.get("help").map(|v| v.to_string()).unwrap_or_default(),
                name,
            })
        })
        .collect()
}

/// `default` is a reserved word in Rhai, so the field is `value` (a quoted "default" key
/// is accepted too).
fn param_default(name: &str, m: &Map) -> Result<ParamValue, String> {
    match m.get("value").or_else(|| m.get("default")) {
        Some(v) if v.is_int() => Ok(ParamValue::Int(v.as_int().unwrap_or(0))),
        Some(v) if v.is_float() => Ok(ParamValue::Float(v.as_float().unwrap_or(0.0))),
        Some(v) if v.is_bool() => Ok(ParamValue::Bool(v.as_bool().unwrap_or(false))),
        Some(v) if v.is_string() => Ok(ParamValue::Str(v.to_string())),
        _ => Err(format!(
            "parameter `{name}` needs a default `value` (integer, number, boolean or string)"
        )),
    }
}

/// Optional CI thresholds: an array of strings like "p99_ttft_ms<500".
fn thresholds(list: Option<&Dynamic>) -> Result<Vec<String>, String> {
    match list {
        None => Ok(vec![]),
        Some(v) if v.is_array() => v
            .clone()
            .cast::<Array>()
            .into_iter()
            .map(|t| {
                t.into_string()
                    .map_err(|_| "each entry of `thresholds` must be a string".to_string())
            })
            .collect(),
        Some(_) => Err("`thresholds` must be an array of strings".into()),
    }
}

fn phase(i: usize, d: Dynamic, has_arrival: bool) -> Result<PhaseSpec, String> {
    let map = d
        .try_cast::<Map>()
        .ok_or_else(|| format!("phase {i} must be a map"))?;
    let fields = Fields {
        map: &map,
        at: format!("phase {i}: "),
    };
    fields.only(&[
        "name",
        "arrival",
        "max_concurrency",
        "max_requests",
        "max_duration",
        "warmup",
        "sessions",
        "reset_prefix_cache",
        "profile",
        "steady_window",
    ])?;
    let spec = PhaseSpec {
        name: fields.text("name").unwrap_or_default(),
        arrival: match fields.get("arrival") {
            None => ArrivalSpec::Burst,
            Some(a) => arrival(i, a, has_arrival)?,
        },
        max_concurrency: fields.count("max_concurrency")?,
        max_requests: fields.count("max_requests")?,
        max_duration: match fields.get("max_duration") {
            None => None,
            Some(v) => Some(max_duration(i, v)?),
        },
        warmup: fields.flag("warmup", false)?,
        sessions: fields.count("sessions")?,
        control: PhaseControl {
            reset_prefix_cache: fields.flag("reset_prefix_cache", false)?,
            profile: fields.flag("profile", false)?,
        },
        steady_window: match fields.get("steady_window") {
            None => None,
            Some(w) => Some(steady_window(i, w)?),
        },
    };
    validate::phase(i, spec)
}

/// `steady_window: #{ from_s: 10.0, to_s: 50.0 }`; its bounds are checked with the phase
/// (`validate::steady_window`).
fn steady_window(i: usize, w: &Dynamic) -> Result<NamedWindow, String> {
    let shape = || {
        format!("phase {i}: `steady_window` must be a map like #{{ from_s: 10.0, to_s: 50.0 }}, got {w}")
    };
    let map = w.clone().try_cast::<Map>().ok_or_else(shape)?;
    if map.len() != 2 {
        return Err(shape());
    }
    let bound = |key: &str| {
        map.get(key)
            .and_then(|v| number(v, key).ok())
            .ok_or_else(shape)
    };
    Ok(NamedWindow {
        from_s: bound("from_s")?,
        to_s: bound("to_s")?,
    })
}

/// Seconds as a number, or a duration with a unit ("20m").
fn max_duration(i: usize, v: &Dynamic) -> Result<Duration, String> {
    let secs = if v.is_string() {
        parse_duration_secs(&v.to_string())
    } else {
        number(v, "").ok()
    };
    match secs {
        Some(secs) => validate::max_duration(i, secs),
        None => Err(format!(
            "phase {i}: `max_duration` must be seconds or a duration like \"20m\", got {v}"
        )),
    }
}

fn arrival(i: usize, a: &Dynamic, has_arrival: bool) -> Result<ArrivalSpec, String> {
    let map = a.clone().try_cast::<Map>().ok_or_else(|| {
        format!("phase {i}: `arrival` must be a map like #{{ process: \"poisson\", rate: 4.0 }}")
    })?;
    let process = map
        .get("process")
        .map(|v| v.to_string())
        .unwrap_or_else(|| "burst".into());
    // A number; its range is checked with the phase (`validate::phase`).
    let number_of = |key: &str| -> Result<f64, String> {
        let v = map
            .get(key)
            .ok_or_else(|| format!("phase {i}: arrival `{process}` needs `{key}`"))?;
        number(v, key).map_err(|_| validate::not_positive(i, key, v))
    };
    Ok(match process.as_str() {
        "burst" => ArrivalSpec::Burst,
        "poisson" => ArrivalSpec::Poisson {
            rate: number_of("rate")?,
        },
        "gamma" => ArrivalSpec::Gamma {
            rate: number_of("rate")?,
            burstiness: match map.contains_key("burstiness") {
                true => number_of("burstiness")?,
                false => 1.0,
            },
        },
        "constant" => ArrivalSpec::Constant {
            rate: number_of("rate")?,
        },
        "closed" => ArrivalSpec::Closed {
            concurrency: validate::closed_width(i, number_of("concurrency")?)?,
        },
        "custom" if !has_arrival => {
            return Err(format!(
                "phase {i}: arrival `custom` needs `fn arrival(phase, index)` in the script"
            ))
        }
        "custom" => ArrivalSpec::Custom,
        other => {
            return Err(format!(
                "phase {i}: unknown arrival process `{other}`; use burst, poisson, gamma, constant, closed or custom"
            ))
        }
    })
}

/// What `next_request` returned: a request map, "wait", or `()` at the end of the phase.
fn next(d: Dynamic) -> Result<Next, String> {
    if d.is_unit() {
        return Ok(Next::Done);
    }
    if d.is_string() && d.to_string() == "wait" {
        return Ok(Next::Wait);
    }
    let map = d
        .try_cast::<Map>()
        .ok_or("expected a map #{ prompt, max_tokens, … }, \"wait\", or () to end the phase")?;
    request(&map).map(|r| Next::Request(Box::new(r)))
}

/// What `session_step` returned: `#{ request: #{…}, after: seconds }` to send (after 0
/// s when `after` is left out), `#{ fan_out: ["name", …] }` to open children, or `()` to
/// end the session.
pub(super) fn step(d: Dynamic) -> Result<Step, String> {
    const SHAPE: &str = "expected #{ request: #{ … }, after: seconds }, #{ fan_out: [names] }, or () to end the session";
    if d.is_unit() {
        return Ok(Step::End);
    }
    let map = d.try_cast::<Map>().ok_or(SHAPE)?;
    let fields = Fields {
        map: &map,
        at: String::new(),
    };
    fields.only(&["request", "after", "fan_out"])?;
    match (fields.get("request"), fields.get("fan_out")) {
        (Some(r), None) => {
            let r = r
                .clone()
                .try_cast::<Map>()
                .ok_or("`request` must be a request map #{ messages, max_tokens, … }")?;
            let after = match fields.get("after") {
                None => 0.0,
                Some(v) => number(v, "after").map_err(|_| validate::not_seconds("after", v))?,
            };
            Ok(Step::Send {
                request: Box::new(request(&r)?),
                after,
            })
        }
        (None, Some(names)) => {
            let names = names
                .clone()
                .try_cast::<Array>()
                .ok_or("`fan_out` must be an array of child names")?;
            names
                .into_iter()
                .map(|n| {
                    n.into_string()
                        .map_err(|got| format!("a child name must be a string, got {got}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Step::FanOut)
        }
        _ => Err(SHAPE.into()),
    }
}

fn request(map: &Map) -> Result<RequestSpec, String> {
    let fields = Fields {
        map,
        at: String::new(),
    };
    fields.only(&[
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
        "inputs",
        "headers",
        "cancel_after_tokens",
        "cancel_after_ms",
        "target",
        "tools",
    ])?;
    let max_tokens = match fields.get("max_tokens") {
        None => return Err("`max_tokens` is missing".into()),
        Some(v) => match v.as_int() {
            Ok(n) if n >= 0 => n as u64,
            _ => return Err(validate::max_tokens_not_positive(shown(v))),
        },
    };
    let extra = match fields.get("extra") {
        None => serde_json::Map::new(),
        Some(v) => match rhai::serde::from_dynamic::<serde_json::Value>(v) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err("`extra` must be a map of JSON body fields".into()),
        },
    };
    let secs = |key: &str| -> Result<Option<f64>, String> {
        match fields.get(key) {
            None => Ok(None),
            Some(v) => number(v, key)
                .map(Some)
                .map_err(|_| validate::not_seconds(key, shown(v))),
        }
    };
    Ok(RequestSpec {
        prompt: prompt(&fields)?,
        max_tokens,
        ignore_eos: fields.flag("ignore_eos", false)?,
        stream: fields.flag("stream", true)?,
        extra,
        tag: fields.text("tag"),
        session: fields.text("session"),
        at: secs("at")?,
        delay: secs("delay")?,
        input_tokens: fields.count("input_tokens")?,
        headers: headers(fields.get("headers"))?,
        cancel: cancel(&fields)?,
        // Out of range only on a 32-bit host; saturating keeps it out of range.
        target: fields
            .count("target")?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        tools: tools(fields.get("tools"))?,
    })
}

/// `headers`: a map of header name to text. Which names and values an HTTP server takes
/// is `validate::request`'s rule.
fn headers(map: Option<&Dynamic>) -> Result<Vec<(String, String)>, String> {
    let Some(map) = map else {
        return Ok(vec![]);
    };
    let map = map
        .clone()
        .try_cast::<Map>()
        .ok_or("`headers` must be a map of header name to text, like #{ \"x-tenant\": \"a\" }")?;
    map.into_iter()
        .map(|(name, value)| match value.into_string() {
            Ok(value) => Ok((name.to_string(), value)),
            Err(got) => Err(format!(
                "the value of header `{name}` must be a string, got {got}"
            )),
        })
        .collect()
}

/// `tools`: an array of `#{ name, description, parameters }` (parameters: a JSON
/// Schema object as a map; `tool(...)` builds one). Names and sizes are
/// `validate::request`'s rule.
fn tools(list: Option<&Dynamic>) -> Result<Vec<ToolSpec>, String> {
    let Some(list) = list else {
        return Ok(vec![]);
    };
    let list = list
        .clone()
        .try_cast::<Array>()
        .ok_or("`tools` must be an array of #{ name, description, parameters }")?;
    list.into_iter()
        .enumerate()
        .map(|(i, t)| {
            let map = t.try_cast::<Map>().ok_or(format!(
                "tools[{i}] must be a map #{{ name, description, parameters }}"
            ))?;
            let fields = Fields {
                map: &map,
                at: format!("tools[{i}]: "),
            };
            fields.only(&["name", "description", "parameters"])?;
            let name = fields
                .text("name")
                .ok_or(format!("tools[{i}] has no `name`"))?;
            let parameters = match fields.get("parameters") {
                None => serde_json::json!({"type": "object", "properties": {}}),
                Some(v) => match rhai::serde::from_dynamic::<serde_json::Value>(v) {
                    Ok(v @ serde_json::Value::Object(_)) => v,
                    _ => {
                        return Err(format!(
                            "tools[{i}].parameters must be a map (a JSON Schema object)"
                        ))
                    }
                },
            };
            Ok(ToolSpec {
                name,
                description: fields.text("description").unwrap_or_default(),
                parameters,
            })
        })
        .collect()
}

/// `cancel_after_tokens` and `cancel_after_ms`, when either is given; their ranges are
/// `validate::request`'s rule.
fn cancel(fields: &Fields) -> Result<Option<Cancel>, String> {
    let after_tokens = match fields.get("cancel_after_tokens") {
        None => None,
        Some(v) => match v.as_int() {
            Ok(n) if n >= 0 => Some(n as u64),
            _ => return Err(validate::cancel_not_positive("cancel_after_tokens", v)),
        },
    };
    let after_ms = match fields.get("cancel_after_ms") {
        None => None,
        Some(v) => Some(
            number(v, "cancel_after_ms")
                .map_err(|_| validate::cancel_not_positive("cancel_after_ms", v))?,
        ),
    };
    Ok(
        (after_tokens.is_some() || after_ms.is_some()).then_some(Cancel {
            after_tokens,
            after_ms,
        }),
    )
}

/// `prompt` (text or token ids), `messages` (chat) or `inputs` (embeddings), exactly one
/// of them.
fn prompt(fields: &Fields) -> Result<Prompt, String> {
    let given: Vec<&str> = ["prompt", "messages", "inputs"]
        .into_iter()
        .filter(|k| fields.get(k).is_some())
        .collect();
    match given.as_slice() {
        [] => Err("the request has none of `prompt`, `messages` and `inputs`".into()),
        ["prompt"] => text_or_tokens(&fields.map["prompt"]),
        ["messages"] => messages(&fields.map["messages"]),
        ["inputs"] => inputs(&fields.map["inputs"]),
        several => Err(format!(
            "give one of `prompt`, `messages` and `inputs`, not {}",
            several
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        )),
    }
}

/// A value as an error shows it: a string quoted and named as one, so `"16"` where a
/// number belongs reads `got the string "16"`, not `got 16`.
fn shown(v: &Dynamic) -> String {
    match v.read_lock::<rhai::ImmutableString>() {
        Some(text) => format!("the string {:?}", text.as_str()),
        None => v.to_string(),
    }
}

fn text_or_tokens(p: &Dynamic) -> Result<Prompt, String> {
    if p.is_string() {
        return Ok(Prompt::Text(p.to_string()));
    }
    if !p.is_array() {
        return Err(format!(
            "`prompt` must be a string or an array of token ids, got {}",
            p.type_name()
        ));
    }
    p.clone()
        .cast::<Array>()
        .iter()
        .map(|d| d.as_int().ok().and_then(|v| u32::try_from(v).ok()))
        .collect::<Option<Vec<u32>>>()
        .map(Prompt::Tokens)
        .ok_or_else(|| "`prompt` as an array must hold token ids (non-negative integers)".into())
}

fn messages(m: &Dynamic) -> Result<Prompt, String> {
    let value: serde_json::Value = rhai::serde::from_dynamic(m)
        .map_err(|e| format!("`messages` cannot be sent as JSON: {e}"))?;
    match value {
        serde_json::Value::Array(items) if items.iter().all(|m| m.is_object()) => {
            Ok(Prompt::Messages(items))
        }
        _ => Err("`messages` must be an array of #{ role, content } maps".into()),
    }
}

/// `inputs`: an array of texts to embed; its size is `validate::request`'s rule.
fn inputs(list: &Dynamic) -> Result<Prompt, String> {
    let not_texts = || "`inputs` must be an array of strings".to_string();
    let array = list.clone().try_cast::<Array>().ok_or_else(not_texts)?;
    array
        .into_iter()
        .map(|d| d.into_string().map_err(|_| not_texts()))
        .collect::<Result<Vec<String>, String>>()
        .map(Prompt::Inputs)
}
