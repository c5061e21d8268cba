//! Guest SDK for writing runner scenarios as WebAssembly components.
//!
//! Not written yet: the host runs Rhai scenarios today, and the component interface is a
//! draft in `wit/scenario.wit`. This crate will wrap the wit-bindgen bindings of that
//! interface in ergonomic types and an export macro.
