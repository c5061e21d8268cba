//! What a run sends: the scenario contract (Rhai and Wasm), the packages teams share, the tokenizer and the cache of what can be rebuilt.

pub mod cache_dir;
pub mod package;
pub mod scenario;
pub mod tokenizer;
