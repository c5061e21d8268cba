//! Why a `runner bench serve` command line is refused: each one line that names the flag
//! and says what to use instead (exit code 2, as argparse's usage errors).

#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("unknown flag `{0}`: `vllm bench serve` has no such flag (write flags in full; `runner bench serve --help` lists the ones taken)")]
    Unknown(String),
    #[error("`{flag}` is not supported by `runner bench serve`: {reason}")]
    Gap { flag: String, reason: &'static str },
    #[error("`{0}` needs a value")]
    MissingValue(String),
    #[error("`{0}` takes no value")]
    SwitchValue(String),
    #[error("`{flag}` expects {expected}, got `{value}`")]
    BadValue {
        flag: String,
        expected: &'static str,
        value: String,
    },
    #[error("unexpected argument `{0}`: `vllm bench serve` takes only --flags")]
    Positional(String),
    /// A value that parses but that the runner cannot honour, or a combination vLLM
    /// refuses too.
    #[error("`{flag}`: {why}")]
    Value { flag: &'static str, why: String },
}

impl FlagError {
    pub fn value(flag: &'static str, why: impl Into<String>) -> FlagError {
        FlagError::Value {
            flag,
            why: why.into(),
        }
    }
}
