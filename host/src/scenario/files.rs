//! Which files a scenario may read: exactly those its author shipped or its user granted.
//!
//! - A package reads its own files (the directory it was unpacked or installed in).
//! - A lone `.rhai` or `.wasm` file reads the `data/` folder beside it, nothing else of
//!   its directory: a component downloaded next to other files must not read them.
//! - Either reads the directories given with `--data-dir`.
//!
//! Relative paths resolve against the scenario's own directory (so `data/x.json` works
//! for a lone file); whatever they resolve to, symlinks and `..` included, must lie inside
//! one of the readable roots.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Upper bound on one data file a scenario may read, so a script cannot exhaust memory.
pub const MAX_READ_BYTES: u64 = 256 << 20;

/// The folder beside a lone scenario file that it may read.
pub const DATA_FOLDER: &str = "data";

/// Where a Wasm guest sees its readable files: a package at `/scenario`, a lone file's
/// `data/` folder at `/scenario/data` (so a path is the same in both layouts).
pub const PACKAGE_MOUNT: &str = "/scenario";

#[derive(Debug, Clone, Default)]
pub struct FileAccess {
    /// What relative paths resolve against: the scenario's own directory.
    base: Option<PathBuf>,
    /// Canonical directories whose files may be read.
    roots: Vec<PathBuf>,
    /// The directory a Wasm guest gets mounted read-only, and where.
    mount: Option<(PathBuf, String)>,
}

impl FileAccess {
    /// No files at all.
    pub fn none() -> FileAccess {
        FileAccess::default()
    }

    /// A package: its own directory, then the `--data-dir`s.
    pub fn package(root: &Path, data_dirs: &[PathBuf]) -> FileAccess {
        let root = canonical(root);
        let mut access = FileAccess {
            base: root.clone(),
            roots: root.iter().cloned().collect(),
            mount: root.map(|r| (r, PACKAGE_MOUNT.to_string())),
        };
        access.grant(data_dirs);
        access
    }

    /// A lone scenario file in `dir`: its `data/` folder (when there is one), then the
    /// `--data-dir`s.
    pub fn lone_file(dir: &Path, data_dirs: &[PathBuf]) -> FileAccess {
        let data = canonical(&dir.join(DATA_FOLDER)).filter(|d| d.is_dir());
        let mut access = FileAccess {
            base: canonical(dir),
            roots: data.iter().cloned().collect(),
            mount: data.map(|d| (d, format!("{PACKAGE_MOUNT}/{DATA_FOLDER}"))),
        };
        access.grant(data_dirs);
        access
    }

    fn grant(&mut self, data_dirs: &[PathBuf]) {
        self.roots
            .extend(data_dirs.iter().filter_map(|d| canonical(d)));
    }

    /// The directory to mount read-only in a Wasm guest, and its path there.
    pub fn mount(&self) -> Option<(&Path, &str)> {
        self.mount
            .as_ref()
            .map(|(d, at)| (d.as_path(), at.as_str()))
    }

    /// Reads a text file the scenario may read; the error says why not and what to do.
    pub fn read(&self, path: &str) -> Result<String, String> {
        let real = self.resolve(path)?;
        let meta = std::fs::metadata(&real).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        // A FIFO or a device would block or never end: only plain files are data.
        if meta.is_dir() {
            return Err(format!("cannot read `{path}`: it is a directory"));
        }
        if !meta.is_file() {
            return Err(format!("cannot read `{path}`: not a regular file"));
        }
        if meta.len() > MAX_READ_BYTES {
            return Err(format!(
                "`{path}` is {} bytes, over the {MAX_READ_BYTES}-byte limit for scenario data",
                meta.len()
            ));
        }
        let file = std::fs::File::open(&real).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // The file may have grown since: never read past the limit.
        file.take(MAX_READ_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(format!(
                "`{path}` is over the {MAX_READ_BYTES}-byte limit for scenario data"
            ));
        }
        String::from_utf8(bytes).map_err(|_| format!("cannot read `{path}`: it is not UTF-8 text"))
    }

    /// The canonical path `path` names, if it lies inside a readable root.
    fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        if self.roots.is_empty() {
            return Err(format!(
                "cannot read `{path}`: this scenario may read no files; put its data in a \
                 `{DATA_FOLDER}/` folder beside it or pass --data-dir DIR"
            ));
        }
        let wanted = Path::new(path);
        let joined = match (&self.base, wanted.is_absolute()) {
            (Some(base), false) => base.join(wanted),
            _ => wanted.to_path_buf(),
        };
        let real = joined
            .canonicalize()
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if self.roots.iter().any(|r| real.starts_with(r)) {
            return Ok(real);
        }
        let readable: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        Err(format!(
            "`{path}` is outside what this scenario may read ({}); pass --data-dir DIR to allow reading another directory",
            readable.join(", ")
        ))
    }
}

fn canonical(dir: &Path) -> Option<PathBuf> {
    dir.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/x.txt"), "x").unwrap();
        dir
    }

    #[test]
    fn a_lone_file_reads_its_data_folder_and_nothing_beside_it() {
        let dir = layout();
        let access = FileAccess::lone_file(dir.path(), &[]);
        assert_eq!(access.read("data/x.txt").unwrap(), "x");
        let err = access.read("secret.txt").unwrap_err();
        assert!(err.contains("outside what this scenario may read"), "{err}");
        assert!(access.read("data/../secret.txt").is_err());
        let abs = dir.path().join("secret.txt").display().to_string();
        assert!(access.read(&abs).is_err());
        let (mounted, at) = access.mount().unwrap();
        assert!(mounted.ends_with("data") && at == "/scenario/data");
    }

    #[test]
    fn a_symlink_out_of_the_data_folder_is_refused() {
        let dir = layout();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), dir.path().join("data/link"))
            .unwrap();
        let access = FileAccess::lone_file(dir.path(), &[]);
        assert!(access.read("data/link").is_err());
    }

    #[test]
    fn a_lone_file_without_data_reads_nothing_and_says_how_to_grant() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        let access = FileAccess::lone_file(dir.path(), &[]);
        let err = access.read("secret.txt").unwrap_err();
        assert!(err.contains("--data-dir") && err.contains("data/"), "{err}");
        assert!(access.mount().is_none());
    }

    #[test]
    fn a_data_dir_is_readable_and_a_package_reads_its_own_files() {
        let dir = layout();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("y.txt"), "y").unwrap();
        let access = FileAccess::lone_file(dir.path(), &[other.path().to_path_buf()]);
        let y = other.path().join("y.txt").display().to_string();
        assert_eq!(access.read(&y).unwrap(), "y");
        let pkg = FileAccess::package(dir.path(), &[]);
        assert_eq!(pkg.read("secret.txt").unwrap(), "secret");
    }

    #[test]
    fn a_fifo_is_not_read() {
        let dir = layout();
        let fifo = dir.path().join("data/fifo");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let access = FileAccess::lone_file(dir.path(), &[]);
        let err = access.read("data/fifo").unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
