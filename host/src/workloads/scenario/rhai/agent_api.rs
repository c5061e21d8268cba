//! Helpers for agentic scripts: a tool's schema, a wait drawn from a named distribution,
//! and the chat turns that carry tool calls and their results in a session's history.
//! Each is what a script could write itself; they exist so a session scenario reads as
//! what it does. The Rust, Python and JavaScript SDKs offer the same helpers, drawing
//! from the host in the same order, so a twin sends the same request stream.

use std::sync::{Arc, Mutex};

use rhai::{Array, Dynamic, Engine, Map};

use super::api::number;
use super::{lock, RhaiResult};
use crate::workloads::scenario::HostContext;

pub(super) fn register(engine: &mut Engine, host: &Arc<Mutex<HostContext>>) {
    engine.register_fn("tool", tool);
    let h = host.clone();
    engine.register_fn("draw", move |dist: Map| -> RhaiResult<f64> {
        draw(&mut lock(&h), &dist)
    });
    engine.register_fn("assistant_turn", assistant_turn);
    engine.register_fn("tool_result", tool_result);
}

/// `tool(name, description, #{ arg: "string", other: "integer" })`: a tool whose
/// arguments are an object of those properties (a type name, or a JSON Schema map), all
/// required.
fn tool(name: &str, description: &str, properties: Map) -> Dynamic {
    let mut props = Map::new();
    let mut required = Array::new();
    for (key, value) in properties {
        let schema = if value.is_map() {
            value
        } else {
            let mut m = Map::new();
            m.insert("type".into(), value);
            Dynamic::from_map(m)
        };
        required.push(Dynamic::from(key.to_string()));
        props.insert(key, schema);
    }
    let mut parameters = Map::new();
    parameters.insert("type".into(), Dynamic::from("object".to_string()));
    parameters.insert("properties".into(), Dynamic::from_map(props));
    parameters.insert("required".into(), Dynamic::from_array(required));
    let mut t = Map::new();
    t.insert("name".into(), Dynamic::from(name.to_string()));
    t.insert("description".into(), Dynamic::from(description.to_string()));
    t.insert("parameters".into(), Dynamic::from_map(parameters));
    Dynamic::from_map(t)
}

/// `draw(#{ dist: "uniform", lo: 0.5, hi: 30.0 })`: seconds (or any quantity) drawn from
/// the host's seeded generator: `constant` (value, no draw), `uniform` (lo, hi: one
/// `uniform` call), `exponential` (mean: one `exponential(1/mean)` call), `lognormal`
/// (median, sigma: `exp` of one `normal(ln median, sigma)` call).
fn draw(host: &mut HostContext, dist: &Map) -> RhaiResult<f64> {
    let field = |key: &str| -> RhaiResult<f64> {
        let v = dist
            .get(key)
            .ok_or_else(|| format!("draw: the distribution needs `{key}`"))?;
        number(v, &format!("draw: `{key}`"))
    };
    let kind = dist
        .get("dist")
        .and_then(|d| d.clone().into_string().ok())
        .ok_or("draw: give `dist`: constant, uniform, exponential or lognormal")?;
    let value = match kind.as_str() {
        "constant" => field("value")?,
        "uniform" => host.uniform(field("lo")?, field("hi")?)?,
        "exponential" => {
            let mean = field("mean")?;
            if !(mean.is_finite() && mean > 0.0) {
                return Err(format!("draw: exponential `mean` must be above 0, got {mean}").into());
            }
            host.exponential(1.0 / mean)?
        }
        "lognormal" => {
            let median = field("median")?;
            if !(median.is_finite() && median > 0.0) {
                return Err(
                    format!("draw: lognormal `median` must be above 0, got {median}").into(),
                );
            }
            host.normal(median.ln(), field("sigma")?)?.exp()
        }
        other => {
            return Err(format!(
            "draw: unknown distribution `{other}`; use constant, uniform, exponential or lognormal"
        )
            .into())
        }
    };
    Ok(value)
}

/// `assistant_turn(outcome)`: the answer as the chat message that continues a history:
/// its text, and its tool calls in OpenAI's shape when it made any.
fn assistant_turn(outcome: Dynamic) -> RhaiResult<Dynamic> {
    let field = |name: &str| super::record::field(&outcome, name);
    let mut m = Map::new();
    m.insert("role".into(), Dynamic::from("assistant".to_string()));
    m.insert("content".into(), field("text")?);
    let calls = field("tool_calls")?.try_cast::<Array>().unwrap_or_default();
    if !calls.is_empty() {
        let calls: Array = calls
            .into_iter()
            .map(|c| {
                let get = |k: &str| super::record::field(&c, k);
                let mut function = Map::new();
                function.insert("name".into(), get("name")?);
                function.insert("arguments".into(), get("arguments")?);
                let mut call = Map::new();
                call.insert("id".into(), get("id")?);
                call.insert("type".into(), Dynamic::from("function".to_string()));
                call.insert("function".into(), Dynamic::from_map(function));
                Ok(Dynamic::from_map(call))
            })
            .collect::<RhaiResult<_>>()?;
        m.insert("tool_calls".into(), Dynamic::from_array(calls));
    }
    Ok(Dynamic::from_map(m))
}

/// `tool_result(call, text)`: the `tool` message answering one of the calls of
/// `outcome.tool_calls`.
fn tool_result(call: Dynamic, text: &str) -> RhaiResult<Dynamic> {
    let mut m = Map::new();
    m.insert("role".into(), Dynamic::from("tool".to_string()));
    m.insert("tool_call_id".into(), super::record::field(&call, "id")?);
    m.insert("content".into(), Dynamic::from(text.to_string()));
    Ok(Dynamic::from_map(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_requires_every_property_it_names() {
        let mut props = Map::new();
        props.insert("path".into(), Dynamic::from("string".to_string()));
        let t = tool("read_file", "Reads a file", props).cast::<Map>();
        let json: serde_json::Value = rhai::serde::from_dynamic(&Dynamic::from_map(t)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "read_file",
                "description": "Reads a file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }
            })
        );
    }
}
