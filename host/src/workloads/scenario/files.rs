//! Which files a scenario may read: exactly those its author shipped or its user granted.
//!
//! - A package reads its own files (the directory it was unpacked or installed in).
//! - A lone `.rhai` or `.wasm` file reads the `data/` folder beside it, nothing else of
//!   its directory: a component downloaded next to other files must not read them.
//! - Either reads the directories given with `--data-dir`.
//!
//! Relative paths resolve against the scenario's own directory (so `data/x.json` works
//! for a lone file), then under each `--data-dir` in the order given (so
//! `-p trace=my.jsonl --data-dir DIR` reads `DIR/my.jsonl`): the first that exists inside
//! the readable roots wins. Whatever a path resolves to, symlinks and `..` included, must
//! lie inside one of the readable roots, and never under `/proc` (a process's environment
//! holds its keys).
//!
//! A lone file's `data/` must be a real folder: a link (`ln -s / data`, `ln -s . data`)
//! would make any directory readable. A Wasm guest reads its mounted folder through WASI,
//! which the host cannot check file by file, so that folder is checked once before the
//! guest starts: no FIFO, socket or device in it (opening one would block past every
//! call limit). WASI itself never follows a link out of the mounted folder.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Upper bound on one data file a scenario may read, so a script cannot exhaust memory.
pub const MAX_READ_BYTES: u64 = 256 << 20;

/// The folder beside a lone scenario file that it may read.
pub const DATA_FOLDER: &str = "data";

/// The kernel's view of every process, environments included: never readable.
const PROC: &str = "/proc";

/// Why a scenario's readable folder is refused; each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "`{data}` is a link ({target}); a lone scenario reads only a real `{DATA_FOLDER}/` \
         folder beside it: replace the link with a folder holding the data, or grant the \
         target with --data-dir DIR"
    )]
    DataLink { data: String, target: String },
    #[error(
        "`{data}` resolves to `{real}`, outside the scenario's folder; a lone scenario reads \
         only a real `{DATA_FOLDER}/` folder beside it: move the data into one"
    )]
    DataOutside { data: String, real: String },
    #[error(
        "`{path}` is {kind}, not a file; a Wasm scenario's readable folder may hold only \
         files and folders (reading it would block): remove it or move it elsewhere"
    )]
    NotAFile { path: String, kind: &'static str },
    #[error(
        "`{dir}` holds or lies in {PROC}, which a scenario may never read: use another folder"
    )]
    Proc { dir: String },
}

/// Where a Wasm guest sees its readable files: a package at `/scenario`, a lone file's
/// `data/` folder at `/scenario/data` (so a path is the same in both layouts).
pub const PACKAGE_MOUNT: &str = "/scenario";

#[derive(Debug, Clone, Default)]
pub struct FileAccess {
    /// What relative paths resolve against: the scenario's own directory.
    base: Option<PathBuf>,
    /// Canonical directories whose files may be read.
    roots: Vec<PathBuf>,
    /// The canonical `--data-dir`s, where a relative path is looked for after `base`.
    granted: Vec<PathBuf>,
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
            granted: Vec::new(),
            mount: root.map(|r| (r, PACKAGE_MOUNT.to_string())),
        };
        access.grant(data_dirs);
        access
    }

    /// A lone scenario file in `dir`: its `data/` folder (when there is one), then the
    /// `--data-dir`s. A `data` that is a link, or that resolves anywhere but inside `dir`,
    /// is refused.
    pub fn lone_file(dir: &Path, data_dirs: &[PathBuf]) -> Result<FileAccess, AccessError> {
        let base = canonical(dir);
        let data = data_folder(dir, base.as_deref())?;
        let mut access = FileAccess {
            base,
            roots: data.iter().cloned().collect(),
            granted: Vec::new(),
            mount: data.map(|d| (d, format!("{PACKAGE_MOUNT}/{DATA_FOLDER}"))),
        };
        access.grant(data_dirs);
        Ok(access)
    }

    fn grant(&mut self, data_dirs: &[PathBuf]) {
        self.granted = data_dirs.iter().filter_map(|d| canonical(d)).collect();
        self.roots.extend(self.granted.iter().cloned());
    }

    /// The directory to mount read-only in a Wasm guest, and its path there.
    pub fn mount(&self) -> Option<(&Path, &str)> {
        self.mount
            .as_ref()
            .map(|(d, at)| (d.as_path(), at.as_str()))
    }

    /// Checks the mounted folder before a Wasm guest gets it: not `/proc` nor above it,
    /// and nothing in it that is neither a file, a folder nor a link.
    pub fn check_mount(&self) -> Result<(), AccessError> {
        match &self.mount {
            Some((dir, _)) => check_mountable(dir),
            None => Ok(()),
        }
    }

    /// Reads a text file the scenario may read; the error says why not and what to do.
    pub fn read(&self, path: &str) -> Result<String, String> {
        let real = self.resolve(path)?;
        // Opened without blocking and without following a link swapped in since the path
        // was resolved; then the open file itself is checked, so a FIFO put there in the
        // meantime is refused too.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&real)
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
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

    /// The canonical path `path` names, if it lies inside a readable root: an absolute
    /// path as it is, a relative one beside the scenario, then under each `--data-dir`.
    fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        if self.roots.is_empty() {
            return Err(format!(
                "cannot read `{path}`: this scenario may read no files; put its data in a \
                 `{DATA_FOLDER}/` folder beside it or pass --data-dir DIR"
            ));
        }
        let mut tried = Vec::new();
        let mut outside = false;
        for candidate in self.candidates(Path::new(path)) {
            let real = match candidate.canonicalize() {
                Ok(real) => real,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tried.push(candidate.display().to_string());
                    continue;
                }
                Err(e) => return Err(format!("cannot read `{path}`: {e}")),
            };
            if real.starts_with(PROC) {
                return Err(format!(
                    "cannot read `{path}`: it lies in {PROC}, which a scenario may never read"
                ));
            }
            if self.roots.iter().any(|r| real.starts_with(r)) {
                return Ok(real);
            }
            // A name that exists but escapes the grant (`..`, a link) is never read; a later
            // candidate inside the grant may still be.
            outside = true;
        }
        if outside {
            return Err(self.outside_error(path));
        }
        Err(format!(
            "cannot read `{path}`: no such file (tried {})",
            tried.join(", ")
        ))
    }

    /// Where a path may be: itself when absolute, else beside the scenario, then under
    /// each `--data-dir`.
    fn candidates(&self, wanted: &Path) -> Vec<PathBuf> {
        if wanted.is_absolute() {
            return vec![wanted.to_path_buf()];
        }
        let dirs = self.base.iter().chain(self.granted.iter());
        let mut all: Vec<PathBuf> = dirs.map(|d| d.join(wanted)).collect();
        all.dedup();
        if all.is_empty() {
            all.push(wanted.to_path_buf());
        }
        all
    }

    fn outside_error(&self, path: &str) -> String {
        let readable: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        format!(
            "`{path}` is outside what this scenario may read ({}); pass --data-dir DIR to allow reading another directory",
            readable.join(", ")
        )
    }
}

fn canonical(dir: &Path) -> Option<PathBuf> {
    dir.canonicalize().ok()
}

/// The canonical `data/` folder of a lone scenario in `dir` (canonical: `base`), if
/// there is one: a real folder strictly inside `dir`, never a link.
fn data_folder(dir: &Path, base: Option<&Path>) -> Result<Option<PathBuf>, AccessError> {
    let data = dir.join(DATA_FOLDER);
    let Ok(meta) = std::fs::symlink_metadata(&data) else {
        return Ok(None);
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&data)
            .map_or_else(|e| e.to_string(), |t| format!("to {}", t.display()));
        return Err(AccessError::DataLink {
            data: data.display().to_string(),
            target,
        });
    }
    let Some(real) = canonical(&data).filter(|d| d.is_dir()) else {
        return Ok(None);
    };
    // Without a link, a bind mount or a path that changed since could still point away.
    match base {
        Some(base) if real.starts_with(base) && real != base => Ok(Some(real)),
        _ => Err(AccessError::DataOutside {
            data: data.display().to_string(),
            real: real.display().to_string(),
        }),
    }
}

/// Walks `dir` without following links (a link out of it is not followed by WASI
/// either) and refuses the first entry that is not a file, folder or link.
fn check_mountable(dir: &Path) -> Result<(), AccessError> {
    let proc = Path::new(PROC);
    if dir.starts_with(proc) || proc.starts_with(dir) {
        return Err(AccessError::Proc {
            dir: dir.display().to_string(),
        });
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        // A folder the runner may not list is skipped, as it is for anything unreadable.
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if !kind.is_file() && !kind.is_symlink() {
                return Err(AccessError::NotAFile {
                    path: entry.path().display().to_string(),
                    kind: kind_name(kind),
                });
            }
        }
    }
    Ok(())
}

fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "a special file"
    }
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
        let access = FileAccess::lone_file(dir.path(), &[]).unwrap();
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
        let access = FileAccess::lone_file(dir.path(), &[]).unwrap();
        assert!(access.read("data/link").is_err());
    }

    #[test]
    fn a_lone_file_without_data_reads_nothing_and_says_how_to_grant() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        let access = FileAccess::lone_file(dir.path(), &[]).unwrap();
        let err = access.read("secret.txt").unwrap_err();
        assert!(err.contains("--data-dir") && err.contains("data/"), "{err}");
        assert!(access.mount().is_none());
    }

    #[test]
    fn a_data_dir_is_readable_and_a_package_reads_its_own_files() {
        let dir = layout();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("y.txt"), "y").unwrap();
        let access = FileAccess::lone_file(dir.path(), &[other.path().to_path_buf()]).unwrap();
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
        let access = FileAccess::lone_file(dir.path(), &[]).unwrap();
        let err = access.read("data/fifo").unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_data_link_is_refused_wherever_it_points() {
        for target in ["/", ".", "inner"] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("inner")).unwrap();
            std::os::unix::fs::symlink(target, dir.path().join("data")).unwrap();
            let err = FileAccess::lone_file(dir.path(), &[]).unwrap_err();
            assert!(
                matches!(err, AccessError::DataLink { .. }),
                "{target}: {err}"
            );
            assert!(err.to_string().contains(&format!("to {target}")), "{err}");
        }
    }

    #[test]
    fn proc_is_never_read_even_when_granted() {
        let dir = tempfile::tempdir().unwrap();
        let access = FileAccess::lone_file(dir.path(), &[PathBuf::from("/")]).unwrap();
        let err = access.read("/proc/self/environ").unwrap_err();
        assert!(err.contains("/proc"), "{err}");
        let root = FileAccess::package(Path::new("/"), &[]);
        assert!(matches!(root.check_mount(), Err(AccessError::Proc { .. })));
    }

    #[test]
    fn a_mounted_folder_with_a_fifo_deep_inside_is_refused() {
        let dir = layout();
        let access = FileAccess::lone_file(dir.path(), &[]).unwrap();
        access.check_mount().unwrap();
        std::fs::create_dir_all(dir.path().join("data/a/b")).unwrap();
        // Links are left to WASI, which never follows one out of the folder.
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("data/a/zero")).unwrap();
        access.check_mount().unwrap();
        let fifo = dir.path().join("data/a/b/fifo");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = access.check_mount().unwrap_err().to_string();
        assert!(
            err.contains("data/a/b/fifo") && err.contains("FIFO"),
            "{err}"
        );
    }
}
