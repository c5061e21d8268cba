//! Scenario packages: `runner pack`, running straight from the archive, `info`, `verify`,
//! the digest in result.json, interface versions and the search path.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    lines_in, repo, run_ok, runner, stderr, stdout, wait_exit, wait_until, Pipes,
};

const MANIFEST: &str = r#"name = "team-a/long-ctx"
version = "VERSION"
description = "Long prompts, short answers, as our product sends them."
authors = ["Team A <a@example.com>"]
entry = "ENTRY"
interface = "bench:scenario@0.3.0"
data = ["data"]

[params.requests]
default = 6
help = "requests per run (the package's default)"

[params.input_tokens]
default = 300

[target]
server-flags = "--max-num-seqs 256 --enable-prefix-caching"
"#;

/// A package directory around `entry` (copied in), with a data directory.
fn package_dir(root: &Path, version: &str, entry: &Path) -> PathBuf {
    let dir = root.join(format!("src-{version}"));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let entry_name = entry.file_name().unwrap().to_string_lossy().to_string();
    std::fs::copy(entry, dir.join(&entry_name)).unwrap();
    std::fs::write(dir.join("data/notes.txt"), "shipped with the package").unwrap();
    let manifest = MANIFEST
        .replace("VERSION", version)
        .replace("ENTRY", &entry_name);
    std::fs::write(dir.join("scenario.toml"), manifest).unwrap();
    dir
}

fn rhai_entry() -> PathBuf {
    repo().join("scenarios/long_context.rhai")
}

/// Packs `dir` into `out`; returns the archive path and the printed digest.
fn pack(dir: &Path, out: &Path) -> (PathBuf, String) {
    let o = runner(&[
        "pack",
        &dir.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .unwrap_or_else(|| panic!("no digest in {text}"))
        .to_string();
    let archive = text
        .lines()
        .find_map(|l| l.split(" into ").nth(1))
        .unwrap()
        .trim()
        .into();
    (archive, digest)
}

#[test]
fn a_packed_scenario_runs_from_its_archive_and_records_what_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.2.0", &rhai_entry());
    let (archive, digest) = pack(&dir, tmp.path());
    assert!(archive.ends_with("team-a-long-ctx-1.2.0.scenario.tar.gz"));
    assert_eq!(digest.len(), 64);
    // Packing again gives the same bytes.
    let bytes = std::fs::read(&archive).unwrap();
    let (again, digest_again) = pack(&dir, tmp.path());
    assert_eq!(std::fs::read(again).unwrap(), bytes);
    assert_eq!(digest, digest_again);

    let a = archive.display().to_string();
    let info = runner(&["info", &a]);
    assert!(info.status.success(), "{}", stderr(&info));
    let text = stdout(&info);
    for needle in [
        "Package:    team-a/long-ctx 1.2.0",
        "Interface:  bench:scenario@0.3.0",
        &format!("Digest:     sha256 {digest}"),
        "Recommended Server flags: --max-num-seqs 256",
        "requests       6        requests per run (the package's default)",
        "input_tokens   300",
    ] {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }

    let verify = runner(&["verify", &a]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(stdout(&verify).contains(&format!("digest {digest} matches")));
    assert!(
        stdout(&verify).ends_with(" parameters, 1 phase\n"),
        "{}",
        stdout(&verify)
    );

    let (_, from_archive) = run_ok(&[&a, "-p", "rate=500"]);
    let r = &from_archive["runner"];
    assert_eq!(r["package"]["name"], "team-a/long-ctx");
    assert_eq!(r["package"]["version"], "1.2.0");
    assert_eq!(r["scenario_digest"], digest.as_str());
    assert_eq!(r["wit_version"], "0.4.0");
    assert_eq!(r["params"]["requests"], "6", "{r}");
    assert_eq!(from_archive["completed"], 6);
    assert_eq!(from_archive["total_input_tokens"], 6 * 300);

    // The directory and its archive are the same workload.
    let (_, from_dir) = run_ok(&[&dir.display().to_string(), "-p", "rate=500"]);
    assert_eq!(from_dir["runner"]["scenario_digest"], digest.as_str());
    assert_eq!(
        from_dir["runner"]["request_digest"],
        from_archive["runner"]["request_digest"]
    );
}

/// The phase count `verify` prints is the number of phases the scenario plans (it once
/// printed the length of the number's text: "2 phases" for 12).
#[test]
fn verify_counts_the_phases_a_scenario_plans() {
    for (scenario, expect) in [
        ("sweep.rhai", "; 6 parameters, 12 phases\n"),
        ("long_context.rhai", ", 1 phase\n"),
        ("slo_search.rhai", ", 1 phase, then adaptive\n"),
    ] {
        let path = repo().join("scenarios").join(scenario);
        let out = runner(&["verify", &path.display().to_string()]);
        assert!(out.status.success(), "{scenario}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.ends_with(expect),
            "{scenario}: no `{expect}` in {text}"
        );
    }
}

#[test]
fn a_modified_archive_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    let (archive, digest) = pack(&dir, tmp.path());
    // Rewrite the archive with one file changed and the old digest kept.
    let mut members = vec![];
    let file = std::fs::File::open(&archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().to_string_lossy().to_string();
        let mut bytes = vec![];
        e.read_to_end(&mut bytes).unwrap();
        if path == "data/notes.txt" {
            bytes = b"changed after packing".to_vec();
        }
        members.push((path, bytes));
    }
    let tampered = tmp.path().join("tampered.scenario.tar.gz");
    let mut out = tar::Builder::new(flate2::write::GzEncoder::new(
        std::fs::File::create(&tampered).unwrap(),
        flate2::Compression::default(),
    ));
    for (path, bytes) in &members {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        out.append_data(&mut h, path, bytes.as_slice()).unwrap();
    }
    out.into_inner().unwrap().finish().unwrap();

    for cmd in [&["verify"][..], &[]] {
        let t = tampered.display().to_string();
        let o = runner(&[cmd, &[t.as_str()]].concat());
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(
            err.contains("does not match its digest") && err.contains(&digest),
            "{err}"
        );
    }
}

#[test]
fn a_package_needing_another_interface_version_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    let manifest = dir.join("scenario.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("bench:scenario@0.3.0", "bench:scenario@1.0.0");
    std::fs::write(&manifest, text).unwrap();
    for args in [
        vec!["pack".to_string(), dir.display().to_string()],
        vec![dir.display().to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = runner(&args);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(
            err.contains("bench:scenario@1.0.0") && err.contains("bench:scenario@0.3.0"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn installed_packages_are_found_by_name_highest_version_first() {
    let tmp = tempfile::tempdir().unwrap();
    let installed = tmp.path().join("installed");
    std::fs::create_dir(&installed).unwrap();
    let (_, d1) = pack(&package_dir(tmp.path(), "1.0.0", &rhai_entry()), &installed);
    let newer = package_dir(tmp.path(), "1.10.0", &rhai_entry());
    // The newer version sends fewer requests by default, so the runs tell them apart.
    let manifest = newer.join("scenario.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("default = 6", "default = 4");
    std::fs::write(&manifest, text).unwrap();
    let (_, d2) = pack(&newer, &installed);
    assert_ne!(d1, d2);
    let path = installed.display().to_string();

    let (_, latest) = run_ok(&[
        "team-a/long-ctx",
        "--scenario-path",
        &path,
        "-p",
        "rate=500",
    ]);
    assert_eq!(latest["runner"]["package"]["version"], "1.10.0");
    assert_eq!(latest["completed"], 4);
    let (_, pinned) = run_ok(&[
        "team-a/long-ctx@1.0.0",
        "--scenario-path",
        &path,
        "-p",
        "rate=500",
    ]);
    assert_eq!(pinned["runner"]["scenario_digest"], d1.as_str());

    // The environment variable works the same, for `info` too.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["info", "team-a/long-ctx"])
        .env("RUNNER_SCENARIO_PATH", &path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("team-a/long-ctx 1.10.0"));

    let o = runner(&["team-a/nothing", "--scenario-path", &path]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no scenario package `team-a/nothing`"));
}

#[test]
fn a_wasm_package_is_the_same_workload_as_its_rhai_twin() {
    let tmp = tempfile::tempdir().unwrap();
    let wasm = PathBuf::from(crate::wasm::component("long_context"));
    let (rhai_archive, _) = pack(&package_dir(tmp.path(), "1.0.0", &rhai_entry()), tmp.path());
    let wasm_root = tmp.path().join("wasm");
    std::fs::create_dir(&wasm_root).unwrap();
    let (wasm_archive, _) = pack(&package_dir(&wasm_root, "1.0.0", &wasm), &wasm_root);
    let (_, a) = run_ok(&[&rhai_archive.display().to_string(), "-p", "rate=500"]);
    let (_, b) = run_ok(&[&wasm_archive.display().to_string(), "-p", "rate=500"]);
    assert_eq!(a["runner"]["request_digest"], b["runner"]["request_digest"]);
    assert_ne!(
        a["runner"]["scenario_digest"],
        b["runner"]["scenario_digest"]
    );
}

/// An archive member given raw: name, kind, bytes, and the size its header declares.
type Member<'a> = (&'a str, tar::EntryType, &'a [u8], Option<u64>);

/// Writes a gzip tar of raw members.
fn raw_archive(path: &Path, members: &[Member]) {
    let mut out = tar::Builder::new(flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    ));
    for (name, kind, bytes, declared) in members {
        let mut h = tar::Header::new_gnu();
        // Raw name bytes: `set_path` itself refuses `..`, and a hostile archive would not.
        let raw = &mut h.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*kind);
        if kind.is_symlink() {
            h.set_link_name("/etc/passwd").unwrap();
        }
        h.set_size(declared.unwrap_or(bytes.len() as u64));
        h.set_mode(0o644);
        h.set_cksum();
        out.append(&h, *bytes).unwrap();
    }
    out.into_inner().unwrap().finish().unwrap();
}

#[test]
fn malicious_archives_are_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    let manifest = std::fs::read(dir.join("scenario.toml")).unwrap();
    let script = std::fs::read(rhai_entry()).unwrap();
    let notes = b"shipped with the package".to_vec();
    // The digest of a well-formed package, to make the other faults the only fault.
    let (_, digest) = pack(&dir, tmp.path());
    let digest_line = format!("{digest}\n");
    let file = tar::EntryType::Regular;
    let evil_dir = tmp.path().join("evil");
    std::fs::create_dir(&evil_dir).unwrap();
    let cases: Vec<(&str, Vec<Member>, &str)> = vec![
        (
            "escape",
            vec![
                ("scenario.toml", file, &manifest, None),
                ("long_context.rhai", file, &script, None),
                ("../escaped.txt", file, b"x", None),
                ("package.sha256", file, digest_line.as_bytes(), None),
            ],
            "would unpack outside the package",
        ),
        (
            "link",
            vec![
                ("scenario.toml", file, &manifest, None),
                ("long_context.rhai", file, &script, None),
                ("data/notes.txt", tar::EntryType::Symlink, b"", None),
                ("package.sha256", file, digest_line.as_bytes(), None),
            ],
            "is a link; a package holds regular files only",
        ),
        (
            "oversized",
            vec![
                ("scenario.toml", file, &manifest, None),
                ("long_context.rhai", file, &script, Some(3 << 30)),
            ],
            "takes the content past 1024 MiB",
        ),
        (
            "wrong-digest",
            vec![
                ("scenario.toml", file, &manifest, None),
                ("long_context.rhai", file, &script, None),
                ("data/notes.txt", file, &notes, None),
                ("package.sha256", file, b"0000\n", None),
            ],
            "does not match its digest",
        ),
        (
            "missing-entry",
            vec![
                ("scenario.toml", file, &manifest, None),
                ("data/notes.txt", file, &notes, None),
            ],
            "lists `long_context.rhai`, which the archive does not hold",
        ),
    ];
    for (name, members, expect) in cases {
        let mut members = members;
        if name == "missing-entry" {
            // Its digest must be right for the content it does hold.
            let mut files = std::collections::BTreeMap::new();
            for (p, _, b, _) in &members {
                files.insert(p.to_string(), b.to_vec());
            }
            let d = runner::workloads::package::archive::digest(&files);
            let line: &'static str = Box::leak(format!("{d}\n").into_boxed_str());
            members.push(("package.sha256", file, line.as_bytes(), None));
        }
        let archive = evil_dir.join(format!("{name}.scenario.tar.gz"));
        raw_archive(&archive, &members);
        let before: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        for cmd in [&["verify"][..], &["info"][..], &[]] {
            let a = archive.display().to_string();
            let o = runner(&[cmd, &[a.as_str()]].concat());
            assert_eq!(o.status.code(), Some(1), "{name} {cmd:?}");
            let err = stderr(&o);
            assert!(err.contains(expect), "{name}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        }
        let after: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(before, after, "{name} wrote next to the archive");
        // Unpacking happens in a fresh directory under the system temp dir, and only
        // after every member passed: the escape would have landed next to it.
        assert!(!tmp.path().join("escaped.txt").exists());
        assert!(!std::env::temp_dir().join("escaped.txt").exists());
    }
}

#[test]
fn archives_run_from_a_fresh_directory_as_from_their_source() {
    let tmp = tempfile::tempdir().unwrap();
    let wasm = PathBuf::from(crate::wasm::component("long_context"));
    let wasm_root = tmp.path().join("wasm");
    std::fs::create_dir(&wasm_root).unwrap();
    for (root, entry) in [(tmp.path().to_path_buf(), rhai_entry()), (wasm_root, wasm)] {
        let dir = package_dir(&root, "2.0.0", &entry);
        let (archive, _) = pack(&dir, &root);
        let fresh = tempfile::tempdir().unwrap();
        let copy = fresh.path().join(archive.file_name().unwrap());
        std::fs::copy(&archive, &copy).unwrap();
        let save = fresh.path().join("result.json");
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
            .current_dir(fresh.path())
            .args([
                copy.file_name().unwrap().to_str().unwrap(),
                "-p",
                "rate=500",
                "--save-result",
                "result.json",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let from_archive: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(save).unwrap()).unwrap();
        let (_, from_source) = run_ok(&[&dir.display().to_string(), "-p", "rate=500"]);
        let r = |v: &serde_json::Value, k: &str| v["runner"][k].clone();
        assert_eq!(
            r(&from_archive, "request_digest"),
            r(&from_source, "request_digest")
        );
        assert_eq!(
            r(&from_archive, "workload_id"),
            r(&from_source, "workload_id")
        );
    }
}

#[test]
fn the_workload_id_follows_code_parameters_and_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, _) = pack(&package_dir(tmp.path(), "1.0.0", &rhai_entry()), tmp.path());
    let a = archive.display().to_string();
    let id = |extra: &[&str]| {
        let (_, v) = run_ok(&[&[a.as_str(), "-p", "rate=500"][..], extra].concat());
        v["runner"]["workload_id"].as_str().unwrap().to_string()
    };
    let base = id(&["--seed", "5"]);
    assert_eq!(base.len(), 64);
    assert_eq!(
        id(&["--seed", "5"]),
        base,
        "same package, seed and parameters"
    );
    assert_ne!(id(&["--seed", "6"]), base, "another seed");
    assert_ne!(
        id(&["--seed", "5", "-p", "input_tokens=301"]),
        base,
        "another parameter"
    );
}

/// Runs `runner ARGS…` (with `TMPDIR` pointed at `tmpdir`, where archives are unpacked)
/// within a time limit, so a hang fails the test instead of stalling it.
fn runner_within(args: &[&str], tmpdir: &Path) -> (Option<i32>, String, String) {
    let mut child = spawn_in(args, tmpdir);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let (out, err) = pipes.join();
    (code, out, err)
}

fn spawn_in(args: &[&str], tmpdir: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .env("TMPDIR", tmpdir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the runner binary starts")
}

/// Asserts a refusal: exit 1, and one `error:` line holding `expect`.
fn assert_refused(what: &str, (code, _, err): &(Option<i32>, String, String), expect: &str) {
    assert_eq!(*code, Some(1), "{what}: {err}");
    assert!(err.contains(expect), "{what}: no `{expect}` in {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
    assert!(err.starts_with("error: "), "{what}: {err}");
}

/// What is left in an unpack directory: it must be nothing once the runner has exited.
fn unpacked_in(tmpdir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmpdir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("runner-scenario-")
        })
        .collect()
}

#[cfg(unix)]
#[test]
fn links_are_refused_not_followed_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let secret_dir = tmp.path().join("elsewhere");
    std::fs::create_dir(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("secret.txt"), "TOP SECRET").unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let cases = [
        // A file inside a data directory, linked to a secret outside the package.
        ("data/leak.txt", secret_dir.join("secret.txt")),
        // The data directory itself, linked to a directory outside.
        ("data", secret_dir.clone()),
    ];
    for (i, (link, target)) in cases.iter().enumerate() {
        let dir = package_dir(&tmp.path().join(format!("case{i}")), "1.0.0", &rhai_entry());
        let at = dir.join(link);
        if at.is_dir() {
            std::fs::remove_dir_all(&at).unwrap();
        }
        std::os::unix::fs::symlink(target, &at).unwrap();
        let d = dir.display().to_string();
        let o = out.display().to_string();
        let expect = format!("`{link}` is a symbolic link; links are refused, not followed");
        for args in [vec!["pack", &d, "--out", &o], vec!["info", &d], vec![&d]] {
            let r = runner_within(&args, tmp.path());
            assert_refused(&format!("{link} {args:?}"), &r, &expect);
            assert!(!r.2.contains("TOP SECRET"));
        }
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "an archive was written"
        );
    }
}

/// Makes a FIFO at `path`.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

#[cfg(unix)]
#[test]
fn fifos_and_devices_are_refused_at_pack_and_unpack_without_hanging() {
    let tmp = tempfile::tempdir().unwrap();
    // In the package directory: a data file, or the manifest itself, that is a FIFO (no
    // one ever writes to it: opening it to read would block forever).
    for (i, fifo) in ["data/pipe", "scenario.toml"].iter().enumerate() {
        let dir = package_dir(&tmp.path().join(format!("case{i}")), "1.0.0", &rhai_entry());
        let _ = std::fs::remove_file(dir.join(fifo));
        mkfifo(&dir.join(fifo));
        let d = dir.display().to_string();
        let o = tmp.path().display().to_string();
        let expect = format!("`{fifo}` is not a regular file (a FIFO, socket or device)");
        for args in [
            vec!["pack", &d, "--out", &o],
            vec!["info", &d],
            vec!["verify", &d],
            vec![&d],
        ] {
            let r = runner_within(&args, tmp.path());
            assert_refused(&format!("{fifo} {args:?}"), &r, &expect);
        }
    }

    // In an archive: a FIFO or device member, with the digest of the regular members.
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    let manifest = std::fs::read(dir.join("scenario.toml")).unwrap();
    let script = std::fs::read(rhai_entry()).unwrap();
    let notes = b"shipped with the package".to_vec();
    let (_, digest) = pack(&dir, tmp.path());
    let digest_line = format!("{digest}\n");
    let file = tar::EntryType::Regular;
    let unpack_dir = tmp.path().join("unpack");
    std::fs::create_dir(&unpack_dir).unwrap();
    for (kind, expect) in [
        (
            tar::EntryType::Fifo,
            "member `data/pipe` is a FIFO; a package holds regular files only",
        ),
        (
            tar::EntryType::Char,
            "member `data/pipe` is a device; a package holds regular files only",
        ),
        (
            tar::EntryType::Block,
            "member `data/pipe` is a device; a package holds regular files only",
        ),
    ] {
        let archive = tmp.path().join("special.scenario.tar.gz");
        raw_archive(
            &archive,
            &[
                ("scenario.toml", file, &manifest, None),
                ("long_context.rhai", file, &script, None),
                ("data/notes.txt", file, &notes, None),
                ("data/pipe", kind, b"", None),
                ("package.sha256", file, digest_line.as_bytes(), None),
            ],
        );
        let a = archive.display().to_string();
        for cmd in [&["verify"][..], &["info"][..], &[]] {
            let r = runner_within(&[cmd, &[a.as_str()]].concat(), &unpack_dir);
            assert_refused(&format!("{kind:?} {cmd:?}"), &r, expect);
        }
        assert_eq!(unpacked_in(&unpack_dir), Vec::<PathBuf>::new());
    }
}

#[test]
fn names_with_newlines_cannot_share_a_digest() {
    let tmp = tempfile::tempdir().unwrap();
    // Packing refuses a name with a control character, showing it escaped.
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    std::fs::write(dir.join("data/two\nlines"), "x").unwrap();
    let d = dir.display().to_string();
    let o = tmp.path().display().to_string();
    let r = runner_within(&["pack", &d, "--out", &o], tmp.path());
    assert_refused(
        "pack",
        &r,
        "the name `data/two\\u{a}lines` contains a control character",
    );

    // Two packages that the old newline-separated listing could not tell apart: two empty
    // files `data/x` and `data/y`, and one empty file whose name spells out the listing of
    // `data/x` followed by `data/y`.
    let manifest = std::fs::read(dir.join("scenario.toml")).unwrap();
    let script = std::fs::read(rhai_entry()).unwrap();
    let empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let forged = format!("data/x\n0\n{empty_sha}\ndata/y");
    let two: &[&str] = &["data/x", "data/y"];
    let one: &[&str] = &[&forged];
    let v1 = |names: &[&str]| {
        use sha2::Digest;
        let mut all: Vec<(String, Vec<u8>)> = vec![
            ("long_context.rhai".into(), script.clone()),
            ("scenario.toml".into(), manifest.clone()),
        ];
        all.extend(names.iter().map(|n| (n.to_string(), vec![])));
        all.sort();
        let mut listing = sha2::Sha256::new();
        for (p, b) in &all {
            let sha = hex::encode(sha2::Sha256::digest(b));
            listing.update(format!("{p}\n{}\n{sha}\n", b.len()));
        }
        hex::encode(listing.finalize())
    };
    assert_eq!(v1(two), v1(one), "the collision the old listing allowed");
    let files = |names: &[&str]| {
        let mut f = runner::workloads::package::archive::Files::new();
        f.insert("scenario.toml".into(), manifest.clone());
        f.insert("long_context.rhai".into(), script.clone());
        for n in names {
            f.insert(n.to_string(), vec![]);
        }
        f
    };
    let (d_two, d_one) = (
        runner::workloads::package::archive::digest(&files(two)),
        runner::workloads::package::archive::digest(&files(one)),
    );
    assert_ne!(d_two, d_one);

    let file = tar::EntryType::Regular;
    let unpack_dir = tmp.path().join("unpack");
    std::fs::create_dir(&unpack_dir).unwrap();
    for (names, digest) in [(two, &d_two), (one, &d_one)] {
        let line = format!("{digest}\n");
        let mut members: Vec<Member> = vec![
            ("scenario.toml", file, &manifest, None),
            ("long_context.rhai", file, &script, None),
        ];
        members.extend(names.iter().map(|n| (*n, file, &b""[..], None)));
        members.push(("package.sha256", file, line.as_bytes(), None));
        let archive = tmp.path().join("names.scenario.tar.gz");
        raw_archive(&archive, &members);
        let a = archive.display().to_string();
        let r = runner_within(&["verify", &a], &unpack_dir);
        if names.len() == 2 {
            assert_eq!(r.0, Some(0), "{}", r.2);
            assert!(r.1.contains(&format!("digest {d_two} matches")), "{}", r.1);
        } else {
            assert_refused(
                "forged name",
                &r,
                &format!("member `data/x\\u{{a}}0\\u{{a}}{empty_sha}\\u{{a}}data/y` contains a control character"),
            );
        }
    }
}

/// An archive of the package's manifest and entry and `n` empty data files, its digest
/// right, written by the tar crate as a hostile tool would.
fn archive_of_empty_files(path: &Path, n: usize) {
    let mut files = runner::workloads::package::archive::Files::new();
    files.insert(
        "scenario.toml".into(),
        MANIFEST
            .replace("VERSION", "1.0.0")
            .replace("ENTRY", "long_context.rhai")
            .into_bytes(),
    );
    files.insert(
        "long_context.rhai".into(),
        std::fs::read(rhai_entry()).unwrap(),
    );
    for i in 0..n {
        files.insert(format!("data/f{i:06}"), vec![]);
    }
    let digest = runner::workloads::package::archive::digest(&files);
    runner::workloads::package::archive::write(path, &files, &digest).unwrap();
}

#[test]
fn many_small_files_verify_in_linear_time_and_too_many_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = runner::workloads::package::archive::MAX_ENTRIES;
    // Under the cap: verified (the 300,000-file case took minutes when this was quadratic;
    // the bound here is generous, for a busy machine).
    let fine = tmp.path().join("fine.scenario.tar.gz");
    archive_of_empty_files(&fine, 3_000);
    let started = std::time::Instant::now();
    let r = runner_within(&["verify", &fine.display().to_string()], tmp.path());
    assert_eq!(r.0, Some(0), "{}", r.2);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // Over it: refused before anything is unpacked.
    let many = tmp.path().join("many.scenario.tar.gz");
    archive_of_empty_files(&many, cap);
    let started = std::time::Instant::now();
    let r = runner_within(&["verify", &many.display().to_string()], tmp.path());
    assert_refused("too many", &r, &format!("more than {cap} members"));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(unpacked_in(tmp.path()), Vec::<PathBuf>::new());
}

#[cfg(unix)]
fn send(child: &std::process::Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill failed");
}

#[cfg(unix)]
#[test]
fn a_signal_while_unpacking_leaves_no_directory_behind() {
    let tmp = tempfile::tempdir().unwrap();
    // Enough files that unpacking takes a while, so the signal lands in the middle of it.
    let archive = tmp.path().join("big.scenario.tar.gz");
    archive_of_empty_files(
        &archive,
        runner::workloads::package::archive::MAX_ENTRIES - 10,
    );
    let a = archive.display().to_string();
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let unpack_dir = tmp.path().join(format!("unpack-{name}"));
        std::fs::create_dir(&unpack_dir).unwrap();
        let mut child = spawn_in(&["verify", &a], &unpack_dir);
        let pipes = Pipes::take(&mut child);
        wait_until("the unpack directory", Duration::from_secs(60), || {
            !unpacked_in(&unpack_dir).is_empty()
        });
        send(&child, signal);
        let code = wait_exit(&mut child, Duration::from_secs(30));
        let (_, err) = pipes.join();
        assert_eq!(code, Some(130), "{name}: {err}");
        assert_eq!(
            err.trim(),
            format!("error: interrupted ({name}); the unpacked package was removed")
        );
        assert_eq!(unpacked_in(&unpack_dir), Vec::<PathBuf>::new(), "{name}");
    }
}

#[cfg(unix)]
#[test]
fn a_run_from_an_archive_cleans_up_however_it_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, _) = pack(&package_dir(tmp.path(), "1.0.0", &rhai_entry()), tmp.path());
    let a = archive.display().to_string();
    // Before the run: a server that accepts and never answers holds the pre-run checks.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}", silent.local_addr().unwrap());
    // During the run: a slow run against the simulator, stopped by one signal (it drains
    // and reports) or by two (it exits at once).
    let out = tmp.path().join("out");
    let o = out.display().to_string();
    let slow = ["-p", "rate=2", "-p", "requests=200", "--output", &o];
    let cases: Vec<(&str, Vec<&str>, usize)> = vec![
        ("pre-run", vec![&a, "--target", &target], 1),
        ("run, one signal", [&[a.as_str()][..], &slow].concat(), 1),
        ("run, two signals", [&[a.as_str()][..], &slow].concat(), 2),
    ];
    for (what, args, signals) in cases {
        let _ = std::fs::remove_dir_all(&out);
        let unpack_dir = tmp
            .path()
            .join(format!("unpack-{}", what.replace([' ', ','], "")));
        std::fs::create_dir(&unpack_dir).unwrap();
        let mut child = spawn_in(&args, &unpack_dir);
        let pipes = Pipes::take(&mut child);
        wait_until("the unpack directory", Duration::from_secs(60), || {
            !unpacked_in(&unpack_dir).is_empty()
        });
        if what.starts_with("run") {
            wait_until("a record", Duration::from_secs(60), || {
                lines_in(&out.join("requests.jsonl")) >= 1
            });
        } else {
            // The pre-run checks have connected (the directory exists before they start).
            std::thread::sleep(Duration::from_millis(300));
        }
        for _ in 0..signals {
            send(&child, libc::SIGTERM);
            std::thread::sleep(Duration::from_millis(100));
        }
        let code = wait_exit(&mut child, Duration::from_secs(30));
        let (_, err) = pipes.join();
        assert_eq!(code, Some(130), "{what}: {err}");
        assert_eq!(unpacked_in(&unpack_dir), Vec::<PathBuf>::new(), "{what}");
    }
}

#[test]
fn info_shows_control_characters_from_the_manifest_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    let manifest = dir.join("scenario.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace(
            "as our product sends them.",
            r"as our product \u001b[2J\u001b]0;pwned\u0007sends them.",
        )
        .replace(
            "Team A <a@example.com>",
            r"Team A \u001b[31m<a@example.com>\r",
        )
        .replace(
            "requests per run (the package's default)",
            r"requests\u001b[8m per run",
        )
        .replace(
            "--max-num-seqs 256 --enable-prefix-caching",
            "--max-num-seqs 256\"\nnotes = \"line one\\nline two\\u009b31m",
        );
    std::fs::write(&manifest, text).unwrap();
    let (archive, _) = pack(&dir, tmp.path());
    for source in [dir, archive] {
        let (code, out, err) = runner_within(&["info", &source.display().to_string()], tmp.path());
        assert_eq!(code, Some(0), "{err}");
        for c in ['\u{1b}', '\u{7}', '\r', '\u{9b}'] {
            assert!(!out.contains(c), "{c:?} reached the terminal:\n{out}");
        }
        for shown in [
            r"as our product \u{1b}[2J\u{1b}]0;pwned\u{7}sends them.",
            r"Authors:    Team A \u{1b}[31m<a@example.com>\u{d}",
            r"requests\u{1b}[8m per run",
            // Notes may span lines; their other control characters are escaped.
            "Recommended Notes: line one\nline two\\u{9b}31m",
        ] {
            assert!(out.contains(shown), "no `{shown}` in:\n{out}");
        }
    }
}

#[test]
fn pack_refuses_a_listed_directory_its_archive_could_not_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = package_dir(tmp.path(), "1.0.0", &rhai_entry());
    std::fs::remove_file(dir.join("data/notes.txt")).unwrap();
    let d = dir.display().to_string();
    let o = tmp.path().display().to_string();
    let r = runner_within(&["pack", &d, "--out", &o], tmp.path());
    assert_refused("empty data", &r, "lists `data`, which holds no files");
}
