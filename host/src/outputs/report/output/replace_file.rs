//! Writing an output file whole or not at all: a run that fails to write result.json (a
//! full disk) must not leave a truncated or empty one that reads as a result.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file beside it, renamed over `path` once
/// every byte is written; on failure the temporary file is removed and `path` is left as
/// it was. A path that exists and is no regular file (`/dev/stdout`, a FIFO, a device, a
/// link) is written in place: renaming over it would replace the device or the link.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return std::fs::write(path, bytes),
        _ => {}
    }
    let temp = temp_beside(path);
    let written = std::fs::File::create(&temp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// `.NAME.PID.tmp` in `path`'s directory: on the same file system, so the rename is atomic,
/// and hidden from a listing of the outputs.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        std::fs::write(&path, "old").unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    /// /dev/full fails every write with ENOSPC, as a full disk does; it is written in
    /// place (never renamed over) and stays the device it was.
    #[test]
    fn a_device_is_written_in_place_and_its_error_returned() {
        let err = write(Path::new("/dev/full"), b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
        let m = std::fs::symlink_metadata("/dev/full").unwrap();
        assert!(!m.file_type().is_file());
    }

    #[test]
    fn a_write_that_cannot_start_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("result.json");
        assert!(write(&missing, b"x").is_err());
        assert!(!missing.exists());
    }
}
