//! The `host` interface of the WIT package: what a component may call. Each function is
//! the same host service a Rhai script gets, so twins written in either language draw
//! the same random numbers and texts in the same order. The interface is the same in every
//! version the host runs (wit/scenario.wit, wit/compat/0.3.0 and wit/compat/0.2.0), so one
//! macro implements it for the bindings of each.
//!
//! Host functions run outside the guest's memory cap and between its epoch checks, so
//! the costly ones check the call's deadline before starting and refuse a request over
//! its budget (see [`crate::workloads::scenario::budget`]) by trapping: the call ends with one
//! error naming the function and the limit.

use std::time::Duration;

use super::sandbox::GuestState;
use crate::workloads::scenario::budget::{self, OverBudget};
use crate::workloads::scenario::host::HostError;
use crate::workloads::scenario::params::ParamValue;
use crate::workloads::scenario::NoteValue;

/// Why a host function stopped the guest.
#[derive(Debug, thiserror::Error)]
pub enum HostTrap {
    #[error("{0}")]
    OverBudget(OverBudget),
    #[error("ran longer than {:.1} s and was stopped (in host function `{function}`)", limit.as_secs_f64())]
    Late {
        function: &'static str,
        limit: Duration,
    },
}

impl From<OverBudget> for HostTrap {
    fn from(e: OverBudget) -> HostTrap {
        HostTrap::OverBudget(e.in_wit())
    }
}

/// Refuses to start the host function `function` once the guest call in progress is past
/// its time limit (host time counts toward it).
fn check_deadline(state: &GuestState, function: &'static str) -> wasmtime::Result<()> {
    match state.deadline.passed() {
        Some(limit) => Err(trap(HostTrap::Late { function, limit })),
        None => Ok(()),
    }
}

fn trap(e: impl Into<HostTrap>) -> wasmtime::Error {
    wasmtime::Error::new(e.into())
}

/// The host functions, for the bindings whose `host` and `types` modules are in scope.
macro_rules! host_functions {
    () => {
        impl types::Host for GuestState {}

        impl host::Host for GuestState {
            fn param(&mut self, name: String) -> wasmtime::Result<Option<types::Value>> {
                Ok(self.params.get(&name).map(|v| match v {
                    ParamValue::Int(v) => types::Value::Integer(*v),
                    ParamValue::Float(v) => types::Value::Number(*v),
                    ParamValue::Bool(v) => types::Value::Boolean(*v),
                    ParamValue::Str(v) => types::Value::Text(v.clone()),
                }))
            }

            fn random(&mut self) -> wasmtime::Result<f64> {
                Ok(self.host.random())
            }

            fn rand_int(&mut self, lo: i64, hi: i64) -> wasmtime::Result<Result<i64, String>> {
                Ok(self.host.rand_int(lo, hi))
            }

            fn uniform(&mut self, lo: f64, hi: f64) -> wasmtime::Result<Result<f64, String>> {
                Ok(self.host.uniform(lo, hi))
            }

            fn normal(&mut self, mean: f64, std_dev: f64) -> wasmtime::Result<Result<f64, String>> {
                Ok(self.host.normal(mean, std_dev))
            }

            fn exponential(&mut self, rate: f64) -> wasmtime::Result<Result<f64, String>> {
                Ok(self.host.exponential(rate))
            }

            fn gamma(&mut self, shape: f64, scale: f64) -> wasmtime::Result<Result<f64, String>> {
                Ok(self.host.gamma(shape, scale))
            }

            fn synthetic_text(&mut self, n: u32) -> wasmtime::Result<String> {
                check_deadline(self, "synthetic-text")?;
                self.host.synthetic_text(u64::from(n)).map_err(trap)
            }

            fn random_token_text(&mut self, n: u32) -> wasmtime::Result<String> {
                check_deadline(self, "random-token-text")?;
                self.host.random_token_text(u64::from(n)).map_err(trap)
            }

            fn count_tokens(&mut self, text: String) -> wasmtime::Result<u32> {
                check_deadline(self, "count-tokens")?;
                let n = self.host.count_tokens(&text).map_err(trap)?;
                Ok(u32::try_from(n).unwrap_or(u32::MAX))
            }

            fn encode(&mut self, text: String) -> wasmtime::Result<Vec<u32>> {
                check_deadline(self, "encode")?;
                let ids = self.host.encode(&text).map_err(trap)?;
                budget::check_tokens("encode", "<text>", ids.len() as u64).map_err(trap)?;
                Ok(ids)
            }

            fn decode(&mut self, ids: Vec<u32>) -> wasmtime::Result<Result<String, String>> {
                check_deadline(self, "decode")?;
                match self.host.decode(&ids) {
                    Ok(text) => Ok(Ok(text)),
                    Err(HostError::Failed(message)) => Ok(Err(message)),
                    Err(HostError::OverBudget(e)) => Err(trap(e)),
                }
            }

            fn read_file(&mut self, path: String) -> wasmtime::Result<Result<String, String>> {
                check_deadline(self, "read-file")?;
                Ok(self.host.read_file(&path))
            }

            fn log(&mut self, message: String) -> wasmtime::Result<()> {
                self.host.log(&message);
                Ok(())
            }

            fn note(
                &mut self,
                key: String,
                value: types::Value,
            ) -> wasmtime::Result<Result<(), String>> {
                let value = match value {
                    types::Value::Integer(v) => NoteValue::Int(v),
                    types::Value::Number(v) => NoteValue::Float(v),
                    types::Value::Boolean(v) => NoteValue::Bool(v),
                    types::Value::Text(v) => NoteValue::Text(v),
                };
                Ok(self.host.note(&key, value))
            }
        }
    };
}

mod current {
    use super::super::bindings::bench::scenario::{host, types};
    use super::*;

    host_functions!();
}

mod v0_3 {
    use super::super::v0_3::bench::scenario::{host, types};
    use super::*;

    host_functions!();
}

mod v0_2 {
    use super::super::v0_2::bench::scenario::{host, types};
    use super::*;

    host_functions!();
}
