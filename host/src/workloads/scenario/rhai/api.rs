//! The sandboxed Rhai engine and the host functions scripts may call.

use std::sync::{Arc, Mutex};

use rhai::packages::{
    BasicArrayPackage, BasicMapPackage, BasicMathPackage, BitFieldPackage, CorePackage,
    LogicPackage, MoreStringPackage, Package,
};
use rhai::{Array, Dynamic, Engine, INT};

use super::{limits, lock, RhaiResult, MAX_CALL_LEVELS, MAX_OPERATIONS};
use crate::workloads::scenario::budget;
use crate::workloads::scenario::params::{parse_duration_secs, ParamValue, Params};
use crate::workloads::scenario::{HostContext, NoteValue};

/// Accepts an integer or a float where a number is expected.
pub(super) fn number(d: &Dynamic, what: &str) -> RhaiResult<f64> {
    if let Ok(v) = d.as_float() {
        Ok(v)
    } else if let Ok(v) = d.as_int() {
        Ok(v as f64)
    } else {
        Err(format!("{what}: expected a number, got {}", d.type_name()).into())
    }
}

pub(super) fn sandboxed_engine() -> Engine {
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
    // No `set_max_string_size`, `set_max_array_size` or `set_max_map_size`: Rhai checks
    // them by walking the whole value after each change (see `limits`).
    limits::register_pad(&mut engine);
    engine
}

pub(super) fn register_host(
    engine: &mut Engine,
    host: &Arc<Mutex<HostContext>>,
    params: &Arc<Mutex<Params>>,
) {
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

    register_random(engine, host);
    register_tokenizer(engine, host);
    register_files(engine, host);
    register_log(engine, host);
}

/// The seeded random functions (the seed is the run's: `--seed`).
fn register_random(engine: &mut Engine, host: &Arc<Mutex<HostContext>>) {
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
}

/// The files of the scenario's own package, and durations written with a unit.
fn register_files(engine: &mut Engine, host: &Arc<Mutex<HostContext>>) {
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
}

/// `log`, `print` and `debug` (to the run's stderr), and `note` (a result in the report).
fn register_log(engine: &mut Engine, host: &Arc<Mutex<HostContext>>) {
    let h = host.clone();
    engine.register_fn("log", move |msg: &str| lock(&h).log(msg));
    let h = host.clone();
    engine.register_fn("note", move |key: &str, value: Dynamic| -> RhaiResult<()> {
        let value = if let Ok(v) = value.as_int() {
            NoteValue::Int(v)
        } else if let Ok(v) = value.as_float() {
            NoteValue::Float(v)
        } else if let Ok(v) = value.as_bool() {
            NoteValue::Bool(v)
        } else {
            NoteValue::Text(value.to_string())
        };
        lock(&h).note(key, value).map_err(Into::into)
    });
    let h = host.clone();
    engine.on_print(move |msg| lock(&h).log(msg));
    let h = host.clone();
    engine.on_debug(move |msg, _, _| lock(&h).log(msg));
}

/// The tokenizer's functions; each refuses a request over its budget (see
/// [`crate::workloads::scenario::budget`]) before allocating.
fn register_tokenizer(engine: &mut Engine, host: &Arc<Mutex<HostContext>>) {
    let h = host.clone();
    engine.register_fn("synthetic_text", move |n: INT| -> RhaiResult<String> {
        let n = count("synthetic_text", n)?;
        Ok(lock(&h).synthetic_text(n).map_err(|e| e.to_string())?)
    });
    let h = host.clone();
    engine.register_fn("random_token_text", move |n: INT| -> RhaiResult<String> {
        let n = count("random_token_text", n)?;
        Ok(lock(&h).random_token_text(n).map_err(|e| e.to_string())?)
    });
    let h = host.clone();
    engine.register_fn("count_tokens", move |text: &str| -> RhaiResult<INT> {
        let n = lock(&h).count_tokens(text).map_err(|e| e.to_string())?;
        Ok(n as INT)
    });
    let h = host.clone();
    engine.register_fn("encode", move |text: &str| -> RhaiResult<Array> {
        let ids = lock(&h).encode(text).map_err(|e| e.to_string())?;
        budget::check_tokens("encode", "<text>", ids.len() as u64).map_err(|e| e.to_string())?;
        Ok(ids
            .into_iter()
            .map(|t| Dynamic::from_int(t as INT))
            .collect())
    });
    let h = host.clone();
    engine.register_fn("decode", move |ids: Array| -> RhaiResult<String> {
        let ids = ids
            .iter()
            .map(|d| d.as_int().ok().and_then(|v| u32::try_from(v).ok()))
            .collect::<Option<Vec<u32>>>()
            .ok_or("decode(ids): ids must be non-negative integers")?;
        Ok(lock(&h).decode(&ids).map_err(|e| e.to_string())?)
    });
}

/// A token count from a script: a negative count is a mistake, not a budget matter.
fn count(function: &str, n: INT) -> RhaiResult<u64> {
    u64::try_from(n).map_err(|_| format!("{function}({n}): need a count >= 0").into())
}
