//! The package archive: one reproducible `.scenario.tar.gz` holding the manifest, the
//! entry and the data files, and the digest that names its content.
//!
//! The digest is the sha256 of a canonical listing of the files, sorted by path: a
//! version tag, then for each file its path and its length, each prefixed by its own
//! length as 8 big-endian bytes, and the 32 bytes of the file's own sha256. Every field's
//! extent is explicit, so two different sets of files never give the same listing (a path
//! holding a newline cannot pose as the next field), and the digest depends on content
//! only, not on timestamps, compression or the order of the archive. It is stored in the
//! archive as `package.sha256` (left out of the listing) and checked whenever the archive
//! is opened.
//!
//! Reading is one pass over the members, each checked before anything is allocated for it:
//! regular files only (links, FIFOs, devices are refused), plain relative UTF-8 names
//! without control characters, no name twice, at most [`MAX_ENTRIES`] files and directories and
//! [`MAX_UNPACKED_BYTES`] of content. GNU and PAX extension headers are handled here
//! (the tar crate's raw mode) so a long-name header cannot make it read without bound.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Component, Path};

use sha2::{Digest, Sha256};

/// The member holding the digest.
pub const DIGEST_MEMBER: &str = "package.sha256";
/// Refuse packages whose content would unpack to more than this (a zip bomb).
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// Refuse packages of more files and directories than this together: each costs a file
/// or directory made on disk (0.3 to 0.5 ms each on a busy ext4 disk), and 300,000 empty
/// files fit in a 1.8 MB archive.
pub const MAX_ENTRIES: usize = 10_000;
/// The longest member name `runner pack` can write (PATH_MAX on Linux).
const MAX_NAME_BYTES: u64 = 4096;
/// Tags the listing's layout, so no listing of another layout can collide with it.
const LISTING_VERSION: &[u8] = b"runner-package-digest-v2\0";

/// A package's files by relative path (with `/` separators).
pub type Files = BTreeMap<String, Vec<u8>>;

pub fn digest(files: &Files) -> String {
    let mut listing = Sha256::new();
    listing.update(LISTING_VERSION);
    for (path, bytes) in files {
        listing.update((path.len() as u64).to_be_bytes());
        listing.update(path.as_bytes());
        listing.update((bytes.len() as u64).to_be_bytes());
        listing.update(Sha256::digest(bytes));
    }
    hex::encode(listing.finalize())
}

/// The listing of runners before the length-prefixed one (`path\nlength\nsha256\n`
/// per file), where a name holding newlines could pose as several files: only recognised,
/// to say why such an archive is refused.
fn digest_v1(files: &Files) -> String {
    let mut listing = Sha256::new();
    for (path, bytes) in files {
        let sha = hex::encode(Sha256::digest(bytes));
        listing.update(format!("{path}\n{}\n{sha}\n", bytes.len()));
    }
    hex::encode(listing.finalize())
}

/// Why a member or file name is refused, if it is: names must be plain relative paths
/// (`a/b.txt`: no `..`, no root, no empty or `.` parts), UTF-8 without control characters
/// or backslashes, so they unpack to the same place on every system and show as they are.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    let escapes = Path::new(name)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes {
        return Err("would unpack outside the package");
    }
    if name.chars().any(char::is_control) {
        return Err("contains a control character");
    }
    if name.contains('\\') {
        return Err("contains a backslash");
    }
    if name.is_empty() || name.split('/').any(|p| p.is_empty() || p == ".") {
        return Err("is not a plain relative path");
    }
    Ok(())
}

/// Writes the archive: members in path order with fixed metadata, so packing the same
/// files twice gives the same bytes. It is written beside `out` and renamed into place
/// once complete, so `out` is never a partial archive (a full disk, an interrupted pack),
/// and whatever `out` was (a link, a FIFO) is replaced, not written through.
pub fn write(out: &Path, files: &Files, digest: &str) -> Result<(), String> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", out.display());
    let tmp = tempfile::Builder::new()
        .prefix(".runner-pack-")
        .tempfile_in(dir)
        .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    write_to(tmp.as_file(), files, digest).map_err(fail)?;
    #[cfg(unix)]
    {
        // A file to share: readable by all, as `File::create` under the usual umask makes.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o644);
        tmp.as_file().set_permissions(mode).map_err(fail)?;
    }
    tmp.persist(out).map_err(|e| fail(e.error))?;
    Ok(())
}

fn write_to(file: &std::fs::File, files: &Files, digest: &str) -> std::io::Result<()> {
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let digest_line = format!("{digest}\n");
    let members = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .chain(std::iter::once((DIGEST_MEMBER, digest_line.as_bytes())));
    for (path, bytes) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, path, bytes)?;
    }
    tar.into_inner()?.finish()?.flush()
}

/// Reads an archive into memory, refusing anything `runner pack` would not have written
/// (see the module's notes), and checks the stored digest against the content.
pub fn read(archive: &Path) -> Result<(Files, String), String> {
    let name = archive.display();
    let file = open_regular(archive).map_err(|e| format!("cannot open {name}: {e}"))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut members = Members::default();
    let not_archive = |e: std::io::Error| format!("{name} is not a scenario archive: {e}");
    let mut entries = tar.entries().map_err(not_archive)?;
    // Raw: extension headers come through as members, read here within bounds.
    entries = entries.raw(true);
    for entry in entries {
        members
            .add(entry.map_err(not_archive)?)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    let (files, stored) = members.finish().map_err(|e| format!("{name}{e}"))?;
    let actual = digest(&files);
    if actual != stored && stored == digest_v1(&files) {
        return Err(format!(
            "{name} was packed by an older runner, whose digest did not tell file names apart; pack it again with this one (`runner pack`)"
        ));
    }
    if actual != stored {
        return Err(format!(
            "{name}: the content does not match its digest (stored {stored}, content {actual}); the archive was modified or corrupted"
        ));
    }
    Ok((files, actual))
}

/// Opens a file that must be a regular file, without blocking on a FIFO.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The members read so far, and the budgets they used.
#[derive(Default)]
struct Members {
    files: Files,
    stored: Option<String>,
    /// Files and directories (named or implied by a file's path), and the digest member.
    count: usize,
    dirs: std::collections::HashSet<String>,
    bytes: u64,
    /// The name a GNU long-name header gave the next member.
    long_name: Option<Vec<u8>>,
}

impl Members {
    fn add<R: Read>(&mut self, mut entry: tar::Entry<'_, R>) -> Result<(), String> {
        let kind = entry.header().entry_type();
        let size = entry
            .header()
            .size()
            .map_err(|e| format!("a member header is unreadable: {e}"))?;
        if kind.is_gnu_longname() {
            return self.read_long_name(entry, size);
        }
        let path = self.name(&entry)?;
        let shown = crate::safeguards::display::escape_control(&path).into_owned();
        self.take_entry()?;
        // Every member's declared size counts, a directory's too: reading skips over it.
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > MAX_UNPACKED_BYTES {
            return Err(format!(
                "member `{shown}` takes the content past {} MiB; refusing to unpack it",
                MAX_UNPACKED_BYTES >> 20
            ));
        }
        if !kind.is_file() && !kind.is_dir() {
            return Err(format!(
                "member `{shown}` is a {}; a package holds regular files only",
                kind_name(kind)
            ));
        }
        check_name(&path).map_err(|why| format!("member `{shown}` {why}"))?;
        self.count_dirs(&path)?;
        if kind.is_dir() {
            return Ok(());
        }
        if self.files.contains_key(&path) || (path == DIGEST_MEMBER && self.stored.is_some()) {
            return Err(format!("member `{shown}` appears twice"));
        }
        if path == DIGEST_MEMBER && size > 128 {
            return Err(format!("member `{DIGEST_MEMBER}` is not a digest"));
        }
        let bytes =
            read_member(&mut entry, size).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        if path == DIGEST_MEMBER {
            // Quoted in errors: shown escaped.
            let stored = String::from_utf8_lossy(&bytes);
            self.stored =
                Some(crate::safeguards::display::escape_control(stored.trim()).into_owned());
        } else {
            self.files.insert(path, bytes);
        }
        Ok(())
    }

    /// The member's name: from a GNU long-name header before it, or its own.
    fn name<R: Read>(&mut self, entry: &tar::Entry<'_, R>) -> Result<String, String> {
        let raw = match self.long_name.take() {
            Some(long) => long,
            None => entry.path_bytes().into_owned(),
        };
        match std::str::from_utf8(&raw) {
            Ok(name) => Ok(name.trim_end_matches('/').to_string()),
            Err(_) => Err(format!(
                "member `{}` has a name that is not UTF-8",
                crate::safeguards::display::escape_control(&String::from_utf8_lossy(&raw))
            )),
        }
    }

    fn take_entry(&mut self) -> Result<(), String> {
        self.count += 1;
        // The digest member is not one of the package's files.
        if self.count > MAX_ENTRIES + 1 {
            return Err(format!(
                "more than {MAX_ENTRIES} members; a package holds at most {MAX_ENTRIES} files and directories"
            ));
        }
        Ok(())
    }

    /// Counts the directories `path` lies in that no earlier member needed: unpacking
    /// makes each one, so they spend the same budget as files.
    fn count_dirs(&mut self, path: &str) -> Result<(), String> {
        let mut at = path;
        while let Some((parent, _)) = at.rsplit_once('/') {
            // Its own parents were counted with it.
            if !self.dirs.insert(parent.to_string()) {
                break;
            }
            self.take_entry()?;
            at = parent;
        }
        Ok(())
    }

    fn read_long_name<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        size: u64,
    ) -> Result<(), String> {
        if self.long_name.is_some() || size > MAX_NAME_BYTES {
            return Err("a member has a malformed or over-long name".to_string());
        }
        let mut name = read_member(&mut entry, size)
            .map_err(|e| format!("a member's name is unreadable: {e}"))?;
        // GNU long names end with a NUL.
        while name.last() == Some(&0) {
            name.pop();
        }
        self.long_name = Some(name);
        Ok(())
    }

    /// The files and the stored digest; the error continues the archive's name.
    fn finish(self) -> Result<(Files, String), String> {
        if self.long_name.is_some() {
            return Err(" is not a scenario archive: it ends inside a member".to_string());
        }
        let Some(stored) = self.stored else {
            return Err(format!(
                " has no {DIGEST_MEMBER}: not made by `runner pack`"
            ));
        };
        Ok((self.files, stored))
    }
}

/// A member's content: no more than its header declares, allocated as it arrives (the
/// declared size was checked against the budget; the stream may hold less).
fn read_member<R: Read>(entry: &mut R, size: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    entry.take(size).read_to_end(&mut bytes)?;
    if (bytes.len() as u64) < size {
        return Err(std::io::Error::other("the archive ends inside it"));
    }
    Ok(bytes)
}

fn kind_name(kind: tar::EntryType) -> &'static str {
    if kind.is_symlink() || kind.is_hard_link() {
        "link"
    } else if kind.is_fifo() {
        "FIFO"
    } else if kind.is_character_special() || kind.is_block_special() {
        "device"
    } else {
        "special member (not a file or directory)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        let mut f = Files::new();
        f.insert("scenario.toml".into(), b"name = \"x\"\n".to_vec());
        f.insert("x.rhai".into(), b"fn describe() {}\n".to_vec());
        f.insert("data/a.json".into(), b"[]".to_vec());
        f
    }

    #[test]
    fn packing_is_reproducible_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.tar.gz"), dir.path().join("b.tar.gz"));
        let d = digest(&files());
        write(&a, &files(), &d).unwrap();
        write(&b, &files(), &d).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let (back, digest_back) = read(&a).unwrap();
        assert_eq!(back, files());
        assert_eq!(digest_back, d);
    }

    #[cfg(unix)]
    #[test]
    fn an_archive_replaces_a_link_at_its_path_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.txt");
        std::fs::write(&target, "keep me").unwrap();
        let a = dir.path().join("a.tar.gz");
        std::os::unix::fs::symlink(&target, &a).unwrap();
        write(&a, &files(), &digest(&files())).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert_eq!(read(&a).unwrap().0, files());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }

    #[test]
    fn long_names_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        let mut long = files();
        let name = format!("data/{}/{}.json", "d".repeat(150), "f".repeat(200));
        long.insert(name.clone(), b"{}".to_vec());
        write(&a, &long, &digest(&long)).unwrap();
        let (back, _) = read(&a).unwrap();
        assert_eq!(back[&name], b"{}");
    }

    #[test]
    fn the_digest_follows_content_only() {
        let mut other = files();
        other.insert("data/a.json".into(), b"[1]".to_vec());
        assert_ne!(digest(&files()), digest(&other));
        let mut renamed = files();
        let v = renamed.remove("data/a.json").unwrap();
        renamed.insert("data/b.json".into(), v);
        assert_ne!(digest(&files()), digest(&renamed));
    }

    #[test]
    fn names_cannot_pose_as_other_fields() {
        // Under a newline-separated listing (`path\nlen\nsha\n`) these two were one.
        let sha = hex::encode(Sha256::digest(b""));
        let mut one = Files::new();
        one.insert(format!("a\n0\n{sha}\nb"), vec![]);
        let mut two = Files::new();
        two.insert("a".into(), vec![]);
        two.insert("b".into(), vec![]);
        assert_ne!(digest(&one), digest(&two));
    }

    #[test]
    fn the_digest_of_a_known_package_is_pinned() {
        // Changing the listing changes every package's digest: it must be deliberate.
        // The same listing computed independently (Python's hashlib and struct.pack(">Q")).
        assert_eq!(
            digest(&files()),
            "103097505c6ec43d46790a05642cd7670da05c9d266f26fb61a15771ea32ef0e"
        );
    }

    #[test]
    fn names_are_checked() {
        for (name, why) in [
            ("../x", "would unpack outside the package"),
            ("/etc/passwd", "would unpack outside the package"),
            ("a/../../x", "would unpack outside the package"),
            ("a\nb", "contains a control character"),
            ("a\u{1b}[2J", "contains a control character"),
            ("a\\b", "contains a backslash"),
            ("a//b", "is not a plain relative path"),
            ("./a", "is not a plain relative path"),
            ("", "is not a plain relative path"),
        ] {
            assert_eq!(check_name(name), Err(why), "{name:?}");
        }
        assert_eq!(check_name("data/convs.json"), Ok(()));
    }

    #[test]
    fn directories_count_against_the_cap_as_files_do() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        let mut nested = files();
        // Each file in a directory of its own: twice as many entries as files.
        for i in 0..MAX_ENTRIES / 2 {
            nested.insert(format!("data/{i}/x"), vec![]);
        }
        write(&a, &nested, &digest(&nested)).unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("more than 10000 members"), "{e}");
    }

    #[test]
    fn an_archive_of_an_older_runner_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        write(&a, &files(), &digest_v1(&files())).unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("packed by an older runner"), "{e}");
    }

    #[test]
    fn a_stored_digest_is_quoted_escaped_and_must_be_short() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        write(&a, &files(), "\u{1b}]0;pwned\u{7}").unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("stored \\u{1b}]0;pwned\\u{7}"), "{e}");
        write(&a, &files(), &"0".repeat(1000)).unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("`package.sha256` is not a digest"), "{e}");
    }

    #[test]
    fn a_modified_archive_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tar.gz");
        let mut tampered = files();
        tampered.insert("x.rhai".into(), b"fn describe() { evil }\n".to_vec());
        // The digest of the original files, stored with other content.
        write(&a, &tampered, &digest(&files())).unwrap();
        let e = read(&a).unwrap_err();
        assert!(e.contains("does not match its digest"), "{e}");
    }
}
