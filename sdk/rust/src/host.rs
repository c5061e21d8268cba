//! The runner's services: parameters, seeded randomness, the run's tokenizer, the
//! package's files and the log. Thin wrappers over the `host` imports of the WIT package.

use crate::bindings::bench::scenario::host as imports;
use crate::Value;

/// This run's value of a parameter declared in `describe`, or `None` for an unknown name.
pub fn param(name: &str) -> Option<Value> {
    imports::param(name)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) => "an integer",
        Value::Number(_) => "a number",
        Value::Boolean(_) => "a boolean",
        Value::Text(_) => "a string",
    }
}

fn wrong(name: &str, v: Option<Value>, want: &str) -> String {
    match v {
        None => format!("no parameter `{name}`; declare it in describe()"),
        Some(v) => format!("parameter `{name}` is {}, not {want}", kind(&v)),
    }
}

/// An integer parameter.
pub fn param_i64(name: &str) -> Result<i64, String> {
    match param(name) {
        Some(Value::Integer(v)) => Ok(v),
        other => Err(wrong(name, other, "an integer")),
    }
}

/// A non-negative integer parameter.
pub fn param_u64(name: &str) -> Result<u64, String> {
    let v = param_i64(name)?;
    u64::try_from(v).map_err(|_| format!("parameter `{name}` must be >= 0, got {v}"))
}

/// A non-negative integer parameter that fits 32 bits (token counts).
pub fn param_u32(name: &str) -> Result<u32, String> {
    let v = param_i64(name)?;
    u32::try_from(v).map_err(|_| format!("parameter `{name}` must be in 0..=4294967295, got {v}"))
}

/// A number parameter (an integer parameter is accepted too).
pub fn param_f64(name: &str) -> Result<f64, String> {
    match param(name) {
        Some(Value::Number(v)) => Ok(v),
        Some(Value::Integer(v)) => Ok(v as f64),
        other => Err(wrong(name, other, "a number")),
    }
}

pub fn param_bool(name: &str) -> Result<bool, String> {
    match param(name) {
        Some(Value::Boolean(v)) => Ok(v),
        other => Err(wrong(name, other, "a boolean")),
    }
}

pub fn param_str(name: &str) -> Result<String, String> {
    match param(name) {
        Some(Value::Text(v)) => Ok(v),
        other => Err(wrong(name, other, "a string")),
    }
}

/// Uniform in [0, 1) from the run's seeded generator.
pub fn random() -> f64 {
    imports::random()
}

/// Uniform integer in [lo, hi].
pub fn rand_int(lo: i64, hi: i64) -> Result<i64, String> {
    imports::rand_int(lo, hi)
}

/// Uniform in [lo, hi).
pub fn uniform(lo: f64, hi: f64) -> Result<f64, String> {
    imports::uniform(lo, hi)
}

pub fn normal(mean: f64, std_dev: f64) -> Result<f64, String> {
    imports::normal(mean, std_dev)
}

/// Exponential with this rate: the gap of a Poisson process, mean 1/rate.
pub fn exponential(rate: f64) -> Result<f64, String> {
    imports::exponential(rate)
}

pub fn gamma(shape: f64, scale: f64) -> Result<f64, String> {
    imports::gamma(shape, scale)
}

/// Readable text of exactly `n` tokens under the run's tokenizer.
pub fn synthetic_text(n: u32) -> String {
    imports::synthetic_text(n)
}

/// The text of `n` random token ids (vLLM's "random" dataset).
pub fn random_token_text(n: u32) -> String {
    imports::random_token_text(n)
}

pub fn count_tokens(text: &str) -> u32 {
    imports::count_tokens(text)
}

pub fn encode(text: &str) -> Vec<u32> {
    imports::encode(text)
}

pub fn decode(ids: &[u32]) -> Result<String, String> {
    imports::decode(ids)
}

/// A file of the scenario's own directory, by a path relative to it.
pub fn read_file(path: &str) -> Result<String, String> {
    imports::read_file(path)
}

/// A line on the runner's stderr, as `[scenario-name] message`.
pub fn log(message: &str) {
    imports::log(message)
}

/// Reports a result of the run (the rate a search found): the runner shows it in the
/// report's "Scenario Result" block and stores it in result.json under
/// `scenario_result`. Reporting a key again replaces its value. An error for an empty key.
pub fn note(key: &str, value: impl Into<Value>) -> Result<(), String> {
    imports::note(key, &value.into())
}
