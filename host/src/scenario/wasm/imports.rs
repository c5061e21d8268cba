//! The `host` interface of the WIT package: what a component may call. Each function is
//! the same host service a Rhai script gets, so twins written in either language draw
//! the same random numbers and texts in the same order.

use super::bindings::bench::scenario::{host, types};
use super::sandbox::GuestState;
use crate::scenario::params::ParamValue;
use crate::scenario::NoteValue;

impl types::Host for GuestState {}

impl host::Host for GuestState {
    fn param(&mut self, name: String) -> Option<types::Value> {
        self.params.get(&name).map(|v| match v {
            ParamValue::Int(v) => types::Value::Integer(*v),
            ParamValue::Float(v) => types::Value::Number(*v),
            ParamValue::Bool(v) => types::Value::Boolean(*v),
            ParamValue::Str(v) => types::Value::Text(v.clone()),
        })
    }

    fn random(&mut self) -> f64 {
        self.host.random()
    }

    fn rand_int(&mut self, lo: i64, hi: i64) -> Result<i64, String> {
        self.host.rand_int(lo, hi)
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> Result<f64, String> {
        self.host.uniform(lo, hi)
    }

    fn normal(&mut self, mean: f64, std_dev: f64) -> Result<f64, String> {
        self.host.normal(mean, std_dev)
    }

    fn exponential(&mut self, rate: f64) -> Result<f64, String> {
        self.host.exponential(rate)
    }

    fn gamma(&mut self, shape: f64, scale: f64) -> Result<f64, String> {
        self.host.gamma(shape, scale)
    }

    fn synthetic_text(&mut self, n: u32) -> String {
        // A u32 count is always a valid count, so this cannot fail.
        self.host.synthetic_text(i64::from(n)).unwrap_or_default()
    }

    fn random_token_text(&mut self, n: u32) -> String {
        self.host
            .random_token_text(i64::from(n))
            .unwrap_or_default()
    }

    fn count_tokens(&mut self, text: String) -> u32 {
        u32::try_from(self.host.tokenizer.count(&text)).unwrap_or(u32::MAX)
    }

    fn encode(&mut self, text: String) -> Vec<u32> {
        self.host.tokenizer.encode(&text)
    }

    fn decode(&mut self, ids: Vec<u32>) -> Result<String, String> {
        self.host.tokenizer.decode(&ids).map_err(|e| e.to_string())
    }

    fn read_file(&mut self, path: String) -> Result<String, String> {
        self.host.read_file(&path)
    }

    fn log(&mut self, message: String) {
        self.host.log(&message);
    }

    fn note(&mut self, key: String, value: types::Value) -> Result<(), String> {
        let value = match value {
            types::Value::Integer(v) => NoteValue::Int(v),
            types::Value::Number(v) => NoteValue::Float(v),
            types::Value::Boolean(v) => NoteValue::Bool(v),
            types::Value::Text(v) => NoteValue::Text(v),
        };
        self.host.note(&key, value)
    }
}
