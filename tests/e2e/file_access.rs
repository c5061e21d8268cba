//! What a lone Rhai scenario may read: its `data/` folder and the `--data-dir`s, never
//! the files beside it (a script downloaded into a folder of other files must not read
//! them). A `data` link, a link out of `data/` and a FIFO in it are checked here for a
//! lone Rhai script and a lone Wasm component (the sandbox probe); the other Wasm checks
//! are in wasm.rs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{runner, spawn_runner, stderr, wait_exit, Pipes};
use crate::wasm::component;

const READER: &str = r#"
fn describe() {
    #{ name: "reader", description: "Reads one file and logs it.",
       params: [ #{ name: "file", value: "data/x.txt", help: "file to read" } ] }
}
fn phases() {
    let text = read_text(param("file"));
    log(`read: ${text}`);
    [#{ name: "main", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 1 }]
}
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 2 } }
"#;

/// A folder holding the reader, `secret.txt` beside it and `data/x.txt`.
fn layout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reader.rhai"), READER).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/x.txt"), "inside data").unwrap();
    dir
}

fn read(dir: &Path, file: &str, extra: &[&str]) -> std::process::Output {
    let script = dir.join("reader.rhai").display().to_string();
    let param = format!("file={file}");
    let mut args = vec![script.as_str(), "-p", param.as_str()];
    args.extend_from_slice(extra);
    runner(&args)
}

#[test]
fn a_lone_script_cannot_read_a_file_beside_it() {
    let dir = layout();
    for file in [
        "secret.txt".to_string(),
        "data/../secret.txt".to_string(),
        dir.path().join("secret.txt").display().to_string(),
    ] {
        let out = read(dir.path(), &file, &[]);
        assert_eq!(out.status.code(), Some(1), "{file}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(!err.contains("top secret"), "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].contains("outside what this scenario may read"),
            "{err}"
        );
        assert!(lines[0].contains("--data-dir"), "{err}");
    }
}

#[test]
fn a_lone_script_reads_its_data_folder_and_a_granted_directory() {
    let dir = layout();
    let out = read(dir.path(), "data/x.txt", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("read: inside data"),
        "{}",
        stderr(&out)
    );

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("y.txt"), "granted").unwrap();
    let y = other.path().join("y.txt").display().to_string();
    let granted = other.path().display().to_string();
    let out = read(dir.path(), &y, &["--data-dir", &granted]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("read: granted"), "{}", stderr(&out));
    // Without the grant, the same file is refused.
    let out = read(dir.path(), &y, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn a_scenario_that_is_a_fifo_is_refused_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("blocked.rhai");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let path = fifo.display().to_string();
    for args in [vec![path.as_str()], vec!["info", path.as_str()]] {
        let out = runner(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("not a regular file"),
            "{}",
            stderr(&out)
        );
    }
}

pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.display().to_string()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The reader and the sandbox probe side by side in one folder, `secret.txt` beside
/// them; `data` is left to each test.
fn lone_pair() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reader.rhai"), READER).unwrap();
    std::fs::copy(component("sandbox_probe"), dir.path().join("probe.wasm")).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    dir
}

/// Runs the reader or the probe on `path` (relative to their folder), bounded in time:
/// the exit code, stderr, and how long it took.
fn read_with(dir: &Path, wasm: bool, path: &str) -> (Option<i32>, String, Duration) {
    let (file, args) = if wasm {
        (
            "probe.wasm",
            vec![
                "-p".to_string(),
                "attack=read".into(),
                "-p".into(),
                "requests=1".into(),
            ],
        )
    } else {
        ("reader.rhai", vec![])
    };
    let entry = dir.join(file).display().to_string();
    let param = format!("{}={path}", if wasm { "path" } else { "file" });
    let mut all: Vec<&str> = vec![&entry];
    all.extend(args.iter().map(String::as_str));
    all.extend(["-p", &param]);
    let start = Instant::now();
    let mut child = spawn_runner(&all);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let took = start.elapsed();
    (code, pipes.join().1, took)
}

/// The one `error:` line of a refused run, with nothing else on stderr.
fn one_error_line(err: &str) -> &str {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    lines[0]
}

#[test]
fn a_data_link_beside_a_lone_scenario_is_refused_with_one_line() {
    for target in ["/", "."] {
        let dir = lone_pair();
        std::os::unix::fs::symlink(target, dir.path().join("data")).unwrap();
        let inside = if target == "/" {
            "data/proc/self/environ"
        } else {
            "data/secret.txt"
        };
        for wasm in [false, true] {
            let (code, err, _) = read_with(dir.path(), wasm, inside);
            assert_eq!(code, Some(1), "{target} {wasm}: {err}");
            let line = one_error_line(&err);
            let file = if wasm { "probe.wasm" } else { "reader.rhai" };
            assert!(
                line.contains(file) && line.contains("is a link") && line.contains("--data-dir"),
                "{line}"
            );
            assert!(
                !err.contains("top secret") && !err.contains("LEAKED"),
                "{err}"
            );
        }
    }
}

#[test]
fn a_link_inside_data_that_leaves_it_is_not_followed() {
    let dir = lone_pair();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", dir.path().join("data/up")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("data/abs")).unwrap();
    for link in ["data/up", "data/abs"] {
        let (code, err, _) = read_with(dir.path(), false, link);
        assert_eq!(code, Some(1), "{link}: {err}");
        let line = one_error_line(&err);
        assert!(
            line.contains("outside what this scenario may read"),
            "{line}"
        );
        // The probe reports both attempts and goes on: neither is followed.
        let (code, err, _) = read_with(dir.path(), true, link);
        assert_eq!(code, Some(0), "{link}: {err}");
        assert!(
            err.contains(&format!("std /scenario/{link}: refused")),
            "{err}"
        );
        assert!(err.contains(&format!("host {link}: refused")), "{err}");
        assert!(
            !err.contains("LEAKED") && !err.contains("top secret"),
            "{err}"
        );
    }
}

#[test]
fn a_fifo_in_data_ends_the_run_within_the_call_limit_with_one_line() {
    let dir = lone_pair();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    mkfifo(&dir.path().join("data/f"));
    for wasm in [false, true] {
        let (code, err, took) = read_with(dir.path(), wasm, "data/f");
        assert_eq!(code, Some(1), "{wasm}: {err}");
        let line = one_error_line(&err);
        assert!(line.contains("data/f"), "{line}");
        assert!(
            line.contains("not a regular file") || line.contains("FIFO"),
            "{line}"
        );
        // The per-call limit is 10 s; the refusal comes long before it.
        assert!(took < Duration::from_secs(10), "{wasm}: took {took:?}");
    }
}

/// Issue 58 item 4: a relative name is looked for beside the script, then under each
/// `--data-dir`, and the error names every path tried.
#[test]
fn a_relative_name_resolves_under_a_data_dir_and_names_what_it_tried() {
    let dir = layout();
    let granted = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("y.txt"), "granted by name").unwrap();
    let g = granted.path().display().to_string();
    let out = read(dir.path(), "y.txt", &["--data-dir", &g]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("read: granted by name"),
        "{}",
        stderr(&out)
    );

    let out = read(dir.path(), "missing.txt", &["--data-dir", &g]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let line = one_error_line(&err);
    let beside = dir.path().canonicalize().unwrap().join("missing.txt");
    let under = granted.path().canonicalize().unwrap().join("missing.txt");
    for tried in [beside, under] {
        assert!(line.contains(&tried.display().to_string()), "{err}");
    }
}

/// A relative name under a `--data-dir` stays inside the grant: neither `..` nor a link
/// out of it reads the file it points at.
#[test]
fn a_relative_name_under_a_data_dir_cannot_leave_it() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret.txt"), "top secret").unwrap();
    let granted = outer.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), granted.join("link")).unwrap();
    let dir = layout();
    let g = granted.display().to_string();
    for file in ["../secret.txt", "link"] {
        let out = read(dir.path(), file, &["--data-dir", &g]);
        assert_eq!(out.status.code(), Some(1), "{file}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(!err.contains("top secret"), "{err}");
        assert!(
            one_error_line(&err).contains("outside what this scenario may read"),
            "{file}: {err}"
        );
    }
}

/// The bundled trace replay reads a trace named relative to a `--data-dir`, as its help
/// says.
#[test]
fn the_trace_replay_reads_a_trace_named_under_a_data_dir() {
    let granted = tempfile::tempdir().unwrap();
    let sample = crate::support::repo().join("scenarios/data/mooncake_sample.jsonl");
    std::fs::copy(sample, granted.path().join("my_trace.jsonl")).unwrap();
    let g = granted.path().display().to_string();
    let script = crate::support::scenario("trace_replay.rhai");
    let out = runner(&[
        &script,
        "--data-dir",
        &g,
        "-p",
        "trace=my_trace.jsonl",
        "-p",
        "requests=2",
        "-p",
        "time_scale=0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}
