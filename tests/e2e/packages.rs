//! Scenario packages: `runner pack`, running straight from the archive, `info`, `verify`,
//! the digest in result.json, interface versions and the search path.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::support::{repo, run_ok, runner, stderr, stdout};

const MANIFEST: &str = r#"name = "team-a/long-ctx"
version = "VERSION"
description = "Long prompts, short answers, as our product sends them."
authors = ["Team A <a@example.com>"]
entry = "ENTRY"
interface = "bench:scenario@0.2.0"
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
        "Interface:  bench:scenario@0.2.0",
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

    let (_, from_archive) = run_ok(&[&a, "-p", "rate=500"]);
    let r = &from_archive["runner"];
    assert_eq!(r["package"]["name"], "team-a/long-ctx");
    assert_eq!(r["package"]["version"], "1.2.0");
    assert_eq!(r["scenario_digest"], digest.as_str());
    assert_eq!(r["wit_version"], "0.2.0");
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
        .replace("bench:scenario@0.2.0", "bench:scenario@1.0.0");
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
            err.contains("bench:scenario@1.0.0") && err.contains("bench:scenario@0.2.0"),
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
            let d = runner::package::archive::digest(&files);
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
