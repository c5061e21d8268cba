//! What a lone Rhai scenario may read: its `data/` folder and the `--data-dir`s, never
//! the files beside it (a script downloaded into a folder of other files must not read
//! them). The Wasm twin of these checks is in wasm.rs (the sandbox probe).

use std::path::Path;

use crate::support::{runner, stderr};

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
