//! Errors of the simulated server: bad profile flags and start-up failures.

/// Why a simulated server could not be configured or started.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("unknown simulator profile `{name}`; known profiles: {known}, or a twin file FILE.toml from `runner calibrate`")]
    UnknownProfile { name: String, known: String },

    #[error("--sim-{flag} does not apply to the `{profile}` profile ({hint})")]
    NotApplicable {
        flag: &'static str,
        profile: String,
        hint: &'static str,
    },

    #[error("--sim-{flag} {value} is invalid: {reason}")]
    InvalidValue {
        flag: &'static str,
        value: String,
        reason: String,
    },

    /// `item` is the `--sim` item as given (`KEY=VALUE`).
    #[error("--sim {item}: {reason}")]
    Override { item: String, reason: String },

    #[error("--sim-{flag} needs --sim-{other}: give both or neither")]
    MissingPair {
        flag: &'static str,
        other: &'static str,
    },

    /// A twin file's engine value that the matching `--sim-*` flag would refuse.
    #[error("{path} [engine] {key} = {value} is invalid: {reason}")]
    TwinValue {
        path: String,
        key: String,
        value: String,
        reason: String,
    },

    #[error("--sim-profile {path}: cannot read the twin: {reason}")]
    TwinFile { path: String, reason: String },

    #[error("the simulated server could not listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },

    #[error("the simulated server could not start its runtime: {0}")]
    Runtime(#[source] std::io::Error),

    #[error("the simulated server thread stopped before it was ready")]
    Stopped,
}
