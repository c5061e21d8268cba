//! The Python wheel (pyproject.toml: maturin's `bin` bindings), the install with no Rust
//! toolchain: built by maturin from what this test run already compiled (same target
//! directory, same profile), installed with pip into a fresh venv, then run from there:
//! `runner --version`, and the main job on the built-in simulated server from the
//! scenarios the wheel installs under `<venv>/share/bench-scenario-runner/scenarios`.
//!
//! Skipped with a reason when maturin (`RUNNER_MATURIN`, else `maturin` on PATH) or
//! Python's venv module is missing, unless RUNNER_REQUIRE_WHEEL=1.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::support::{exclusive, repo, report_row, stderr, stdout, test_cache_dir};

const REQUIRE: &str = "RUNNER_REQUIRE_WHEEL";

/// Where the wheel puts the bundled scenarios, relative to the venv (its `data` dir,
/// packaging/python/data).
const SCENARIOS_IN_VENV: &str = "share/bench-scenario-runner/scenarios";

/// `cmd`'s output when it ran and succeeded, else why not.
fn run(what: &str, cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(out);
    }
    Err(format!(
        "{what} failed ({}):\n{}\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    ))
}

/// The maturin program and the Python interpreter, or None after saying why (a failure
/// when RUNNER_REQUIRE_WHEEL=1).
fn tools_or_skip() -> Option<(PathBuf, PathBuf)> {
    let maturin: PathBuf = std::env::var_os("RUNNER_MATURIN")
        .unwrap_or_else(|| "maturin".into())
        .into();
    let python: PathBuf = std::env::var_os("RUNNER_PYTHON")
        .unwrap_or_else(|| "python3".into())
        .into();
    let found = run("maturin --version", Command::new(&maturin).arg("--version"))
        .map_err(|e| format!("{e}\n(pip install maturin, or set RUNNER_MATURIN)"))
        .and_then(|_| {
            run(
                "checking for Python's venv module",
                Command::new(&python).args(["-c", "import venv, ensurepip"]),
            )
        });
    match found {
        Ok(_) => Some((maturin, python)),
        Err(why) => {
            assert!(
                std::env::var(REQUIRE).as_deref() != Ok("1"),
                "{REQUIRE}=1 but the wheel cannot be built and installed: {why}"
            );
            // Straight to stderr: the test harness hides what passing tests print.
            let _ = writeln!(std::io::stderr(), "SKIPPED: wheel test: {why}");
            None
        }
    }
}

/// The cargo profile and target directory this test binary was built with, read from
/// where cargo put the runner binary (`<target>/<profile dir>/runner`).
fn build_profile() -> (String, PathBuf) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("the runner binary lies in a profile directory");
    let profile = match bin_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_string(),
        Some(other) => other.to_string(),
    };
    let target = bin_dir.parent().expect("a target directory").to_path_buf();
    (profile, target)
}

/// `cmd` without the variables cargo set for this test process (the package's name and
/// version, its manifest dir, ...). The cargo that maturin starts would see them, and
/// some build scripts ask to be rerun when they change (ring's reads `CARGO_PKG_NAME` and
/// `CARGO_MANIFEST_DIR`, see its `rerun-if-env-changed` lines in target/*/build): ring
/// and all that depends on it were then compiled again, here and by the next `cargo test`.
fn without_the_tests_cargo_env(cmd: &mut Command) -> &mut Command {
    const SET_FOR_CRATES: [&str; 6] = [
        "CARGO_MANIFEST_",
        "CARGO_PKG_",
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_BIN_",
    ];
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text == "OUT_DIR" || SET_FOR_CRATES.iter().any(|p| name_text.starts_with(p)) {
            cmd.env_remove(&name);
        }
    }
    cmd
}

/// A target directory for maturin whose profile directory is this run's, hard-linked
/// file by file: cargo finds every crate compiled (its fingerprints hold), while maturin
/// stages the binary it ships by renaming it out of the profile directory, which in this
/// run's own would take `target/release/runner` away from every test running beside this
/// one (seen under load: "the runner binary starts: No such file or directory").
fn linked_target(target: &Path) -> PathBuf {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("the runner binary lies in a profile directory");
    let linked = target.join("tmp").join("wheel-target");
    let _ = std::fs::remove_dir_all(&linked);
    std::fs::create_dir_all(&linked).expect("the linked target directory");
    run(
        "hard-linking the profile directory for maturin",
        Command::new("cp").arg("-al").arg(bin_dir).arg(&linked),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    linked
}

/// Builds the wheel into `out` and returns its path. The profile is this run's and the
/// target directory a hard-linked copy of its (see [`linked_target`]), so cargo finds
/// every crate compiled and only links the binary again (maturin strips it).
fn build_wheel(maturin: &Path, out: &Path) -> PathBuf {
    let (profile, target) = build_profile();
    let target = linked_target(&target);
    let started = Instant::now();
    run(
        "maturin build",
        without_the_tests_cargo_env(&mut Command::new(maturin))
            .current_dir(repo())
            .args(["build", "--locked", "--profile", profile.as_str()])
            .arg("--target-dir")
            .arg(&target)
            .arg("--out")
            .arg(out),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("maturin's output dir")
        .map(|e| e.expect("a dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(
        wheels.len(),
        1,
        "one wheel in {}: {wheels:?}",
        out.display()
    );
    let size = std::fs::metadata(&wheels[0]).expect("the wheel").len();
    let _ = writeln!(
        std::io::stderr(),
        "wheel: {} ({:.1} MB) built in {:.1} s",
        wheels[0].display(),
        size as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    wheels[0].clone()
}

/// A fresh venv at `venv` with `wheel` installed from the file alone (no index).
fn install(python: &Path, wheel: &Path, venv: &Path) {
    run(
        "creating the venv",
        Command::new(python).arg("-m").arg("venv").arg(venv),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    run(
        "pip install <wheel>",
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--no-index",
                "--disable-pip-version-check",
            ])
            .arg(wheel),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let _ = writeln!(
        std::io::stderr(),
        "wheel: pip install took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The installed `runner` with this test's cache and no credentials from this machine.
fn installed_runner(venv: &Path, cwd: &Path, args: &[&Path]) -> Output {
    Command::new(venv.join("bin/runner"))
        .args(args)
        .current_dir(cwd)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .env("RUNNER_CACHE_DIR", test_cache_dir())
        .output()
        .expect("the installed runner starts")
}

/// Every bundled scenario and sample of the repository is installed, byte for byte: a
/// new scenario without its link in packaging/python/data fails here.
fn assert_scenarios_installed(venv: &Path) {
    let installed = venv.join(SCENARIOS_IN_VENV);
    let bundled = repo().join("scenarios");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&bundled)
        .expect("scenarios/")
        .map(|e| e.expect("a dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rhai"))
        .map(|p| PathBuf::from(p.file_name().expect("a file name")))
        .collect();
    assert!(names.len() > 5, "the bundled scenarios: {names:?}");
    names.extend(["data/sharegpt_sample.json", "data/mooncake_sample.jsonl"].map(PathBuf::from));
    for name in names {
        let expected = std::fs::read(bundled.join(&name)).expect("a bundled file");
        let installed_copy = installed.join(&name);
        let same = std::fs::read(&installed_copy).is_ok_and(|copy| copy == expected);
        assert!(
            same,
            "scenarios/{} is not installed as {}: a bundled scenario needs its link in \
             packaging/python/data/data/{SCENARIOS_IN_VENV}",
            name.display(),
            installed_copy.display()
        );
    }
}

/// The files under `dir` of the repository, relative to it, leaving out what a build or
/// an install put there (node_modules, Python's caches).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(sub) = pending.pop() {
        for entry in std::fs::read_dir(dir.join(&sub)).expect("a repository folder") {
            let entry = entry.expect("a dir entry");
            let name = sub.join(entry.file_name());
            if entry.file_type().expect("a file type").is_dir() {
                if !["node_modules", "__pycache__"]
                    .contains(&entry.file_name().to_str().unwrap_or(""))
                {
                    pending.push(name);
                }
            } else {
                found.push(name);
            }
        }
    }
    found
}

/// The Python and JavaScript helpers and their build scripts, their example scenarios and
/// the WIT they build against are installed in the repository's layout
/// (`share/bench-scenario-runner/sdk/python`, `…/sdk/js`, `…/scenarios/python`,
/// `…/scenarios/js`, `…/wit`), so a wheel user builds a Wasm scenario with
/// `<prefix>/share/bench-scenario-runner/sdk/python/build.sh` and no repository.
fn assert_sdk_helpers_installed(venv: &Path) {
    let share = venv.join(SCENARIOS_IN_VENV).join("..");
    for folder in [
        "sdk/python",
        "sdk/js",
        "scenarios/python",
        "scenarios/js",
        "wit",
    ] {
        let files = files_under(&repo().join(folder));
        assert!(!files.is_empty(), "{folder}: {files:?}");
        for name in files {
            let name = Path::new(folder).join(name);
            let expected = std::fs::read(repo().join(&name)).expect("a repository file");
            let same = std::fs::read(share.join(&name)).is_ok_and(|copy| copy == expected);
            assert!(
                same,
                "{} is not installed: it needs its link under \
                 packaging/python/data/data/share/bench-scenario-runner",
                name.display()
            );
        }
    }
}

#[test]
fn the_wheel_installs_with_pip_and_runs_the_main_job() {
    let Some((maturin, python)) = tools_or_skip() else {
        return;
    };
    // Linking the binary again, then 1000 requests at 1000 req/s: both cores.
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let wheel = build_wheel(&maturin, &dir.path().join("wheels"));
    let venv = dir.path().join("venv");
    install(&python, &wheel, &venv);

    let version = installed_runner(&venv, dir.path(), &[Path::new("--version")]);
    assert!(version.status.success(), "{}", stderr(&version));
    assert_eq!(
        stdout(&version).trim(),
        format!("runner {}", env!("CARGO_PKG_VERSION"))
    );

    assert_scenarios_installed(&venv);
    assert_sdk_helpers_installed(&venv);
    let main_job = venv.join(SCENARIOS_IN_VENV).join("throughput.rhai");
    let out = installed_runner(&venv, dir.path(), &[main_job.as_path()]);
    let report = stdout(&out);
    assert!(
        out.status.success(),
        "the main job from the wheel failed: {}\n{report}",
        stderr(&out)
    );
    assert!(
        report.contains("============ Serving Benchmark Result ============"),
        "{report}"
    );
    assert_eq!(
        report_row(&report, "Successful requests:"),
        Some(1000),
        "{report}"
    );
}
