//! Reading a whole file that must fit in memory: its size (from its metadata) is checked
//! against a limit before a byte is read, so a huge or hostile file is one error line,
//! never an exhausted memory.

use std::fmt;
use std::path::{Path, PathBuf};

/// A size in bytes, shown with its binary multiple: `268435456 bytes (256 MiB)`.
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = self.0 as f64 / (1024.0 * 1024.0);
        if mib >= 1.0 {
            write!(f, "{} bytes ({mib:.0} MiB)", self.0)
        } else {
            write!(f, "{} bytes", self.0)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is {size}: {what} may be at most {limit}")]
    TooLarge {
        path: PathBuf,
        size: Bytes,
        limit: Bytes,
        what: &'static str,
    },
}

/// The text of `path`, refused unread when its size is over `limit`; `what` names the
/// kind of file in the refusal (`a shard.json`).
pub fn read_to_string(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, BoundedReadError> {
    let read = |source| BoundedReadError::Read {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > limit {
        return Err(BoundedReadError::TooLarge {
            path: path.to_path_buf(),
            size: Bytes(size),
            limit: Bytes(limit),
            what,
        });
    }
    std::fs::read_to_string(path).map_err(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        let file = std::fs::File::create(&path).unwrap();
        // Sparse: 3 MiB on the file system's word, nothing written.
        file.set_len(3 << 20).unwrap();
        let e = read_to_string(&path, 2 << 20, "a test file").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is 3145728 bytes (3 MiB): a test file may be at most 2097152 bytes (2 MiB)",
                path.display()
            )
        );
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(read_to_string(&path, 2, "a test file").unwrap(), "{}");
        let e = read_to_string(&dir.path().join("none"), 2, "x").unwrap_err();
        assert!(e.to_string().starts_with("cannot read "), "{e}");
    }
}
