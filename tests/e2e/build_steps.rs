//! The steps the fixtures that install or build something share (the guest languages'
//! toolchains, the llama.cpp venv and model): a key of what made a result, a command run
//! to completion with its output's tail on failure, and a directory made once.

use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

/// First 16 hex digits of the sha256 of these files' contents.
pub fn key<P: AsRef<Path>>(files: &[P]) -> String {
    let mut h = Sha256::new();
    for f in files {
        let f = f.as_ref();
        h.update(std::fs::read(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display())));
    }
    hex::encode(&h.finalize()[..8])
}

/// Runs `cmd` to completion: on failure, what failed and the last 15 lines of its
/// stdout and stderr.
pub fn run(what: &str, cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start {cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    Err(format!(
        "{what} failed ({}):\n{}\n{}",
        out.status,
        tail(&out.stdout),
        tail(&out.stderr)
    ))
}

/// Makes `dir` by `make` in a sibling temp dir (created empty), then renames it into
/// place: a dir that exists is complete, and two test processes racing both end with a
/// complete one.
pub fn once(dir: &Path, make: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    if dir.exists() {
        return Ok(());
    }
    let partial = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| e.to_string())?;
    make(&partial)?;
    if std::fs::rename(&partial, dir).is_err() && !dir.exists() {
        return Err(format!("cannot move {} into place", partial.display()));
    }
    let _ = std::fs::remove_dir_all(&partial);
    Ok(())
}
