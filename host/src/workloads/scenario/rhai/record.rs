//! The values the host hands to a script (the `stop` snapshot, the `on_response` outcome,
//! the phases of `next_phase`'s history): read like object maps, but a field that does not
//! exist is an error naming it and listing those that do. With a plain map, a misspelled
//! `snapshot.complted` reads as `()`, compares false, and a stop condition never fires.

use rhai::{Dynamic, Engine, EvalAltResult, Map};

/// A read-only record of named fields.
#[derive(Clone)]
pub struct HostRecord {
    /// What the script knows it as, for messages: "snapshot", "outcome", "phase", ….
    kind: &'static str,
    fields: Map,
}

impl HostRecord {
    pub fn dynamic(kind: &'static str, fields: Map) -> Dynamic {
        Dynamic::from(HostRecord { kind, fields })
    }

    fn get(&self, name: &str) -> Result<Dynamic, Box<EvalAltResult>> {
        match self.fields.get(name) {
            Some(v) => Ok(v.clone()),
            None => {
                let known: Vec<&str> = self.fields.keys().map(|k| k.as_str()).collect();
                Err(format!(
                    "the {} has no field `{name}`; its fields are: {}",
                    self.kind,
                    known.join(", ")
                )
                .into())
            }
        }
    }

    fn render(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k}: {v:?}"))
            .collect();
        format!("#{{{}}}", fields.join(", "))
    }
}

/// Field `name` of a record or a plain map a script passed back to a host function; an
/// error names the field when there is none.
pub fn field(value: &Dynamic, name: &str) -> Result<Dynamic, Box<EvalAltResult>> {
    if let Some(r) = value.read_lock::<HostRecord>() {
        return r.get(name);
    }
    if let Some(m) = value.read_lock::<Map>() {
        return m
            .get(name)
            .cloned()
            .ok_or_else(|| format!("the map has no field `{name}`").into());
    }
    Err(format!(
        "expected a record or a map with `{name}`, got {}",
        value.type_name()
    )
    .into())
}

/// Teaches `engine` the record: `r.field` and `r["field"]` (the property falls back to the
/// indexer), `"field" in r`, `r.keys()`, `r.to_map()` for a script that wants a plain map,
/// and printing.
pub fn register(engine: &mut Engine) {
    engine
        .register_type_with_name::<HostRecord>("record")
        .register_indexer_get(|r: &mut HostRecord, name: &str| r.get(name))
        .register_fn("contains", |r: &mut HostRecord, name: &str| {
            r.fields.contains_key(name)
        })
        .register_fn("keys", |r: &mut HostRecord| -> rhai::Array {
            r.fields
                .keys()
                .map(|k| Dynamic::from(k.to_string()))
                .collect()
        })
        .register_fn("to_map", |r: &mut HostRecord| r.fields.clone())
        .register_fn("to_string", |r: &mut HostRecord| r.render())
        .register_fn("to_debug", |r: &mut HostRecord| r.render());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_with(record: Dynamic) -> (Engine, rhai::Scope<'static>) {
        let mut engine = Engine::new();
        register(&mut engine);
        let mut scope = rhai::Scope::new();
        scope.push("s", record);
        (engine, scope)
    }

    fn snapshot() -> Dynamic {
        let mut m = Map::new();
        m.insert("completed".into(), Dynamic::from_int(3));
        m.insert("failed".into(), Dynamic::from_int(1));
        HostRecord::dynamic("snapshot", m)
    }

    #[test]
    fn fields_read_as_properties_and_by_index() {
        let (engine, mut scope) = engine_with(snapshot());
        let n: i64 = engine
            .eval_with_scope(&mut scope, r#"s.completed + s["failed"]"#)
            .unwrap();
        assert_eq!(n, 4);
        let has: bool = engine
            .eval_with_scope(&mut scope, r#""failed" in s && !("x" in s)"#)
            .unwrap();
        assert!(has);
        let text: String = engine.eval_with_scope(&mut scope, "`${s}`").unwrap();
        assert!(text.contains("completed: 3"), "{text}");
    }

    #[test]
    fn a_misspelled_field_is_an_error_listing_the_fields() {
        let (engine, mut scope) = engine_with(snapshot());
        let err = engine
            .eval_with_scope::<bool>(&mut scope, "s.complted > 2")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the snapshot has no field `complted`"),
            "{err}"
        );
        assert!(err.contains("completed, failed"), "{err}");
    }
}
