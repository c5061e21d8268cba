//! The JSON Schema of result.json, derived from the types of `result_file` (the metric
//! maps' properties from the metric catalogue), and the check that the committed copy in
//! `schema/result.schema.json` is this one. After changing a type or the catalogue, write
//! it again with `RUNNER_WRITE_SCHEMA=1 cargo test -p runner --lib result_schema`.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::{DistributionResult, ResultFile, RunnerMetrics, VllmMetrics};
use crate::measuring::metrics::catalogue::{InResult, LATENCIES, SCALARS};

/// Where the schema is committed, from the repository root.
const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../schema/result.schema.json");

/// A percentile's value: `p99_ms`, `p99.9_ms`.
pub struct PercentileMs;

const PERCENTILE: &str = "p[0-9]+(\\.[0-9]+)?";

fn object(properties: Map<String, Value>, pattern: Option<(String, Value)>) -> Schema {
    let required: Vec<&String> = properties.keys().collect();
    let mut schema = json!({ "type": "object", "properties": properties, "required": required });
    if let Some((pattern, value)) = pattern {
        schema["patternProperties"] = json!({ pattern: value });
    }
    Schema::try_from(schema).expect("an object schema")
}

fn scalar_schemas(place: InResult) -> Map<String, Value> {
    SCALARS
        .iter()
        .filter(|m| m.in_result == place)
        .map(|m| {
            let kind = if m.unit.is_count() {
                "integer"
            } else {
                "number"
            };
            let types = if m.nullable {
                json!([kind, "null"])
            } else {
                json!(kind)
            };
            (
                m.key.to_string(),
                json!({ "type": types, "description": m.label }),
            )
        })
        .collect()
}

impl JsonSchema for PercentileMs {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "PercentileMs".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let pattern = format!("^{PERCENTILE}_ms$");
        object(Map::new(), Some((pattern, json!({ "type": "number" }))))
    }
}

impl JsonSchema for VllmMetrics {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "VllmMetrics".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut properties = scalar_schemas(InResult::Vllm);
        let vllm: Vec<&str> = LATENCIES
            .iter()
            .filter(|m| m.in_result == InResult::Vllm)
            .map(|m| m.key)
            .collect();
        for key in &vllm {
            for stat in ["mean", "median", "std"] {
                properties.insert(format!("{stat}_{key}_ms"), json!({ "type": "number" }));
            }
        }
        let pattern = format!("^{PERCENTILE}_({})_ms$", vllm.join("|"));
        object(properties, Some((pattern, json!({ "type": "number" }))))
    }
}

impl JsonSchema for RunnerMetrics {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "RunnerMetrics".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = scalar_schemas(InResult::Runner);
        let distribution = generator.subschema_for::<DistributionResult>().to_value();
        for m in LATENCIES.iter().filter(|m| m.in_result == InResult::Runner) {
            properties.insert(m.key.to_string(), distribution.clone());
        }
        object(properties, None)
    }
}

/// The schema as committed: pretty JSON with a final newline.
pub fn schema_text() -> String {
    let schema = schemars::schema_for!(ResultFile);
    serde_json::to_string_pretty(&schema).expect("a schema serialises") + "\n"
}

#[test]
fn the_committed_result_schema_is_the_generated_one() {
    let generated = schema_text();
    if std::env::var_os("RUNNER_WRITE_SCHEMA").is_some() {
        std::fs::write(SCHEMA_PATH, &generated).expect("write the schema");
    }
    let committed = std::fs::read_to_string(SCHEMA_PATH).unwrap_or_default();
    assert!(
        committed == generated,
        "{SCHEMA_PATH} differs from the schema of report/result_file.rs: write it again with RUNNER_WRITE_SCHEMA=1 cargo test -p runner --lib result_schema"
    );
}
