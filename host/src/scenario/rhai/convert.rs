//! Script values to the contract's types, with errors naming the offending field.

use rhai::{Array, Dynamic, Map};

use super::api::number;
use super::RhaiScenario;
use crate::scenario::params::{duration_of, parse_duration_secs, ParamSpec, ParamValue};
use crate::scenario::spec::{ArrivalSpec, Next, PhaseSpec, Prompt, RequestSpec};
use crate::scenario::{Description, ScenarioError};

impl RhaiScenario {
    pub(super) fn parse_description(&self, d: Dynamic) -> Result<Description, ScenarioError> {
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
        // Optional CI thresholds: an array of strings like "p99_ttft_ms<500".
        let thresholds = match map.get("thresholds") {
            None => vec![],
            Some(v) if v.is_array() => v
                .clone()
                .cast::<Array>()
                .into_iter()
                .map(|t| {
                    t.into_string()
                        .map_err(|_| self.invalid(f, "each entry of `thresholds` must be a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(self.invalid(f, "`thresholds` must be an array of strings")),
        };
        Ok(Description {
            name,
            description: text("description"),
            params,
            thresholds,
        })
    }

    pub(super) fn parse_phase(&self, i: usize, d: Dynamic) -> Result<PhaseSpec, ScenarioError> {
        let f = "phases";
        let map = d
            .try_cast::<Map>()
            .ok_or_else(|| self.invalid(f, format!("phase {i} must be a map")))?;
        let at = |key: &str| format!("phase {i}: `{key}`");
        const KNOWN: [&str; 6] = [
            "name",
            "arrival",
            "max_concurrency",
            "max_requests",
            "max_duration",
            "warmup",
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
                let duration = secs.and_then(duration_of).ok_or_else(|| {
                    self.invalid(
                        f,
                        format!(
                            "{} must be seconds or a duration like \"20m\", got {v}",
                            at("max_duration")
                        ),
                    )
                })?;
                Some(duration)
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
            warmup: match map.get("warmup") {
                None => false,
                Some(v) => v.as_bool().map_err(|_| {
                    self.invalid(
                        f,
                        format!("{} must be true or false, got {v}", at("warmup")),
                    )
                })?,
            },
        })
    }

    pub(super) fn parse_arrival(
        &self,
        i: usize,
        a: &Dynamic,
    ) -> Result<ArrivalSpec, ScenarioError> {
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

    pub(super) fn parse_request(&self, d: Dynamic) -> Result<Next, ScenarioError> {
        let f = "next_request";
        if d.is_unit() {
            return Ok(Next::Done);
        }
        if d.is_string() && d.to_string() == "wait" {
            if !self.has_on_response {
                return Err(self.invalid(
                    f,
                    "returned \"wait\", but only a script with `fn on_response(outcome)` can be woken up",
                ));
            }
            return Ok(Next::Wait);
        }
        let map = d.try_cast::<Map>().ok_or_else(|| {
            self.invalid(
                f,
                "expected a map #{ prompt, max_tokens, … }, \"wait\", or () to end the phase",
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
        Ok(Next::Request(RequestSpec {
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
