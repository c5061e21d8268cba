//! What a run sends: the scenario contract (Rhai and Wasm), the packages teams share, the tokenizer, the request traces teams publish and the cache of what can be rebuilt.

pub mod cache_dir;
pub mod package;
pub mod scenario;
pub mod tokenizer;
pub mod trace;
