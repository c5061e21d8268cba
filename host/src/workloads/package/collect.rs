//! Reading a package directory for packing (and for running it in place): the manifest,
//! the entry and the data files, nothing else.
//!
//! Links are refused, never followed: a link inside the package could point anywhere
//! (`data/x -> ~/.ssh/id_ed25519`), and storing links would make the archive's content
//! depend on the machine it is unpacked on. FIFOs, sockets and devices are refused before
//! they are opened (opening a FIFO blocks until someone writes to it). Names must be
//! UTF-8 without control characters or backslashes, so every name means the same on every
//! system and shows as it is. The entry count and total size are checked against the
//! archive's limits before each file is read.

use std::fs::Metadata;
use std::path::{Path, PathBuf};

use super::archive::{check_name, Files, MAX_ENTRIES, MAX_UNPACKED_BYTES};
use super::manifest::{Manifest, MANIFEST};
use crate::safeguards::display::escape_control;

/// Reads the files a manifest lists from a package directory: the manifest, the entry
/// and every data file (directories are taken whole).
pub fn collect(dir: &Path, manifest: &Manifest) -> Result<Files, String> {
    let mut c = Collector {
        root: dir,
        files: Files::new(),
        entries: 0,
        bytes: 0,
    };
    for rel in [MANIFEST, manifest.entry.as_str()]
        .into_iter()
        .chain(manifest.data.iter().map(String::as_str))
    {
        c.add(&dir.join(rel))?;
    }
    Ok(c.files)
}

/// The metadata of a path inside a package, refusing links and special files.
pub fn regular_or_dir(root: &Path, path: &Path) -> Result<Metadata, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        format!(
            "{}: cannot read `{}`: {e}",
            root.display(),
            shown(root, path)
        )
    })?;
    let kind = meta.file_type();
    if kind.is_file() || kind.is_dir() {
        return Ok(meta);
    }
    let what = if kind.is_symlink() {
        "a symbolic link; links are refused, not followed, so nothing outside the package is packed"
    } else {
        "not a regular file (a FIFO, socket or device); a package holds regular files only"
    };
    Err(format!(
        "{}: `{}` is {what}",
        root.display(),
        shown(root, path)
    ))
}

/// A path relative to the package root, escaped for display.
fn shown(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    escape_control(&rel.to_string_lossy()).into_owned()
}

struct Collector<'a> {
    root: &'a Path,
    files: Files,
    /// Files and directories visited, against the archive's cap (so the walk is bounded).
    entries: usize,
    bytes: u64,
}

impl Collector<'_> {
    /// Adds a file, or a directory's files (walked with an explicit stack, so a deep tree
    /// cannot exhaust the thread's stack).
    fn add(&mut self, start: &Path) -> Result<(), String> {
        let mut pending: Vec<PathBuf> = vec![start.to_path_buf()];
        while let Some(path) = pending.pop() {
            let meta = regular_or_dir(self.root, &path)?;
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(format!(
                    "{}: more than {MAX_ENTRIES} files and directories; a package holds at most {MAX_ENTRIES}",
                    self.root.display()
                ));
            }
            if meta.is_dir() {
                let entries = std::fs::read_dir(&path)
                    .map_err(|e| format!("cannot list {}: {e}", path.display()))?;
                for entry in entries {
                    let entry =
                        entry.map_err(|e| format!("cannot list {}: {e}", path.display()))?;
                    pending.push(entry.path());
                }
            } else {
                self.add_file(&path, &meta)?;
            }
        }
        Ok(())
    }

    fn add_file(&mut self, path: &Path, meta: &Metadata) -> Result<(), String> {
        let rel = self.name_of(path)?;
        if self.files.contains_key(&rel) {
            // The manifest lists it twice (as a file and inside a listed directory).
            return Ok(());
        }
        self.bytes = self.bytes.saturating_add(meta.len());
        if self.bytes > MAX_UNPACKED_BYTES {
            return Err(format!(
                "{}: `{}` takes the package past {} MiB, the most an archive may hold",
                self.root.display(),
                escape_control(&rel),
                MAX_UNPACKED_BYTES >> 20
            ));
        }
        let bytes = read_regular(path, meta.len()).map_err(|e| {
            format!(
                "{}: cannot read `{}`: {e}",
                self.root.display(),
                escape_control(&rel)
            )
        })?;
        self.files.insert(rel, bytes);
        Ok(())
    }

    /// The `/`-separated name of a path inside the package, checked as archives check
    /// their members.
    fn name_of(&self, path: &Path) -> Result<String, String> {
        let rel = path
            .strip_prefix(self.root)
            .map_err(|_| format!("{} is outside the package", path.display()))?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(p) => parts.push(p.to_str().ok_or_else(|| {
                    format!(
                        "{}: the name `{}` is not UTF-8; rename it",
                        self.root.display(),
                        escape_control(&rel.to_string_lossy())
                    )
                })?),
                std::path::Component::CurDir => {}
                _ => return Err(format!("{} is outside the package", path.display())),
            }
        }
        let name = parts.join("/");
        check_name(&name).map_err(|why| {
            format!(
                "{}: the name `{}` {why}; rename it",
                self.root.display(),
                escape_control(&name)
            )
        })?;
        Ok(name)
    }
}

/// Reads a file that was a regular file when checked, no more than its checked length
/// (it may have grown since) and refusing it if it became something else.
pub fn read_regular(path: &Path, len: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A file swapped for a FIFO or a link after the check neither blocks nor is followed.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is no longer a regular file"));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(data: &str) -> Manifest {
        let text = format!(
            "name = \"t\"\nversion = \"1.0.0\"\nentry = \"s.rhai\"\ninterface = \"bench:scenario@0.3.0\"\ndata = [{data}]\n"
        );
        Manifest::parse(&text, "scenario.toml").unwrap()
    }

    fn package(data: &str) -> (tempfile::TempDir, Manifest) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("scenario.toml"), "x").unwrap();
        std::fs::write(dir.path().join("s.rhai"), "fn describe() {}").unwrap();
        std::fs::create_dir_all(dir.path().join("data/deep")).unwrap();
        std::fs::write(dir.path().join("data/a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("data/deep/b.txt"), "b").unwrap();
        (dir, manifest(data))
    }

    #[test]
    fn directories_are_taken_whole_and_named_with_slashes() {
        let (dir, m) = package("\"data\", \"data/a.txt\"");
        let files = collect(dir.path(), &m).unwrap();
        let names: Vec<_> = files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["data/a.txt", "data/deep/b.txt", "s.rhai", "scenario.toml"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_and_fifos_are_refused_without_being_opened() {
        let (dir, m) = package("\"data\"");
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("data/deep/secret")).unwrap();
        let e = collect(dir.path(), &m).unwrap_err();
        assert!(e.contains("`data/deep/secret` is a symbolic link"), "{e}");

        std::fs::remove_file(dir.path().join("data/deep/secret")).unwrap();
        let fifo =
            std::ffi::CString::new(dir.path().join("data/pipe").to_str().unwrap().as_bytes())
                .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = collect(dir.path(), &m).unwrap_err();
        assert!(e.contains("`data/pipe` is not a regular file"), "{e}");
    }

    #[test]
    fn control_characters_in_names_are_refused_and_shown_escaped() {
        let (dir, m) = package("\"data\"");
        std::fs::write(dir.path().join("data/a\nb"), "x").unwrap();
        let e = collect(dir.path(), &m).unwrap_err();
        assert!(
            e.contains("`data/a\\u{a}b` contains a control character"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
