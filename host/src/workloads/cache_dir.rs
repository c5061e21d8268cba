//! Where the runner keeps what it may rebuild: compiled components (`compiled/`, see
//! scenario/wasm/compile_cache.rs), packages pulled from a registry (`packages/`, see
//! package/oci/store.rs) and the built-in tokenizers' derived tables (`tokenizers/`, see
//! tokenizer/cache.rs). One root, so one variable moves or clears them all.

use std::path::PathBuf;

/// Overrides where the cache lives.
pub const CACHE_DIR_ENV: &str = "RUNNER_CACHE_DIR";

/// The cache directory: `$RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/runner`, else
/// `~/.cache/runner` (the XDG base directory convention), and whether the user named it.
/// `None` when none of them is set to an absolute path.
pub fn root() -> Option<(PathBuf, bool)> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|v| !v.is_empty()) {
        return Some((PathBuf::from(dir), true));
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        return Some((xdg.join("runner"), false));
    }
    let home = std::env::var_os("HOME").and_then(absolute)?;
    Some((home.join(".cache").join("runner"), false))
}
