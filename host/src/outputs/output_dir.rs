//! An `--output` directory, claimed by one command at a time: created, locked for the
//! life of the process, and cleared of the files an earlier run wrote there. Two runs
//! writing into one directory destroyed each other's records; a multi-phase run's
//! `phases.md` stayed beside a later single-phase run's files as if it were its own.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The lock file, left in the directory (empty): its lock is what is held, not its
/// presence, so a run killed with -9 never leaves the directory locked.
pub const LOCK_FILE: &str = ".runner.lock";

/// Every file a run or a merge writes into its `--output` directory. Other files there
/// (the user's own) are left alone.
pub const WRITTEN: [&str; 11] = [
    "result.json",
    "report.txt",
    "report.md",
    "report.html",
    "phases.md",
    "phases.csv",
    "requests.jsonl",
    "requests.csv",
    "shard.json",
    "stream.jsonl",
    "server_metrics.jsonl",
];

#[derive(Debug, thiserror::Error)]
pub enum OutputDirError {
    #[error("cannot create output directory {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "output directory {0} is in use by another runner (it holds {LOCK_FILE}): give this run another --output"
    )]
    InUse(PathBuf),
    #[error("cannot lock output directory {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot remove {path} of an earlier run: {source}")]
    Clear {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A claimed directory; the claim ends when this is dropped (or the process ends).
#[derive(Debug)]
pub struct OutputDir {
    _lock: File,
}

/// Creates `dir` if needed, takes its lock (refusing a directory another runner holds)
/// and removes what an earlier run wrote there.
pub fn claim(dir: &Path) -> Result<OutputDir, OutputDirError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputDirError::Create {
        path: dir.to_path_buf(),
        source,
    })?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OutputDirError::Lock {
            path: lock_path.clone(),
            source,
        })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(OutputDirError::InUse(dir.to_path_buf())),
        Err(TryLockError::Error(source)) => {
            return Err(OutputDirError::Lock {
                path: lock_path,
                source,
            })
        }
    }
    for name in WRITTEN {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(OutputDirError::Clear { path, source: e })
            }
            _ => {}
        }
    }
    Ok(OutputDir { _lock: lock })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_directory_is_refused_until_its_claim_ends() {
        let dir = tempfile::tempdir().unwrap();
        let first = claim(dir.path()).unwrap();
        let again = claim(dir.path()).unwrap_err();
        assert!(matches!(again, OutputDirError::InUse(_)), "{again}");
        assert!(again.to_string().contains("another --output"), "{again}");
        drop(first);
        claim(dir.path()).expect("free again once the first claim ended");
    }

    #[test]
    fn an_earlier_runs_files_are_removed_and_the_users_kept() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["phases.md", "phases.csv", "result.json", "notes.txt"] {
            std::fs::write(dir.path().join(name), "earlier").unwrap();
        }
        let _claim = claim(&dir.path().join(".")).unwrap();
        assert!(!dir.path().join("phases.md").exists());
        assert!(!dir.path().join("phases.csv").exists());
        assert!(!dir.path().join("result.json").exists());
        assert!(dir.path().join("notes.txt").exists(), "not ours: kept");
    }
}
