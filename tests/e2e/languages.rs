//! Scenarios in Python and JavaScript: the examples of scenarios/python and scenarios/js,
//! built with the helpers of sdk/python and sdk/js and the pinned componentize-py and
//! ComponentizeJS from PyPI and npm, send
//! exactly the request stream of their Rhai twin on the built-in simulator; a hostile
//! Python guest is stopped with the same error as a hostile Rust one; a Python exception
//! or a JavaScript error ends the run with one line naming it and its line; and a
//! compiled component is kept on disk and used by the next run.
//!
//! The packages and the components are made once under cargo's test temp dir, keyed by a
//! hash of what made them, so a second `cargo test` installs and builds nothing. Every run
//! here keeps its compiled components in one cache there too: a debug runner takes minutes
//! to compile an interpreter-sized component, and then no more. Skipped with a printed
//! reason without python3, node or the registries, unless RUNNER_REQUIRE_GUEST_LANGUAGES=1.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::build_steps::{key, once, run};
use crate::support::{exclusive, repo, scenario, stderr, wait_exit};

/// Set (CI sets it) to fail rather than skip when a toolchain or a registry is missing.
const REQUIRE: &str = "RUNNER_REQUIRE_GUEST_LANGUAGES";

/// Where the runner keeps compiled components (host/src/workloads/scenario/wasm/compile_cache.rs).
const CACHE_ENV: &str = "RUNNER_CACHE_DIR";

/// The arguments of the twin runs: small enough for a debug runner, the same as the Rust
/// twin's test in wasm.rs.
const TWIN_ARGS: [&str; 10] = [
    "-p",
    "requests=24",
    "-p",
    "input_tokens=1500",
    "-p",
    "output_tokens=8",
    "-p",
    "rate=400",
    "--seed",
    "1234",
];

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("languages")
}

/// The compile cache every run of these tests shares.
fn shared_cache() -> PathBuf {
    work_dir().join("runner-cache")
}

/// Runs `runner ARGS…` with its compile cache in `cache`, to completion.
fn runner_in(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env(CACHE_ENV, cache)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the runner binary starts")
}

/// The files of a directory with this extension, sorted (a helper package's modules).
fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// The Python components: the examples, the hostile guest and the one that raises.
#[derive(Clone)]
struct PythonGuests {
    example: PathBuf,
    agentic: PathBuf,
    hostile: PathBuf,
    raises: PathBuf,
}

/// The JavaScript components: the examples and the one that throws.
#[derive(Clone)]
struct JsGuests {
    example: PathBuf,
    agentic: PathBuf,
    raises: PathBuf,
}

/// Builds both Python components with sdk/python/build.sh, which installs the
/// pinned componentize-py from PyPI into the venv named here.
fn build_python() -> Result<PythonGuests, String> {
    let python = std::env::var("RUNNER_PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        "checking for Python's venv module",
        Command::new(&python).args(["-c", "import venv, ensurepip"]),
    )
    .map_err(|e| format!("{e}\n(install python3 and python3-venv)"))?;
    let dir = repo().join("sdk/python");
    let example = repo().join("scenarios/python/long_context.py");
    let agentic = repo().join("scenarios/python/agentic_coding.py");
    let hostile = repo().join("tests/guests/python/python_hostile.py");
    let raises = repo().join("tests/guests/python/python_raises.py");
    let requirements = dir.join("requirements.txt");
    let venv = work_dir().join(format!("venv-{}", key(&[&requirements])));
    let mut inputs = vec![
        dir.join("build.sh"),
        requirements,
        example.clone(),
        agentic.clone(),
        hostile.clone(),
        raises.clone(),
        repo().join("wit/scenario.wit"),
    ];
    inputs.extend(files_in(&dir.join("bench_scenario"), "py"));
    let out = work_dir().join(format!("python-{}", key(&inputs)));
    once(&out, |partial| {
        for (app, name) in [
            (example, "long_context"),
            (agentic, "agentic_coding"),
            (hostile, "python_hostile"),
            (raises, "python_raises"),
        ] {
            run(
                &format!("building {name}.wasm with sdk/python/build.sh"),
                Command::new(dir.join("build.sh"))
                    .arg(&app)
                    .arg(partial.join(format!("{name}.wasm")))
                    .env("VENV", &venv)
                    .env("PYTHON", &python),
            )?;
        }
        Ok(())
    })?;
    Ok(PythonGuests {
        example: out.join("long_context.wasm"),
        agentic: out.join("agentic_coding.wasm"),
        hostile: out.join("python_hostile.wasm"),
        raises: out.join("python_raises.wasm"),
    })
}

/// Builds the JavaScript example and the guest that throws with sdk/js/build.mjs,
/// after installing the pinned ComponentizeJS (package-lock.json) into a directory of
/// its own.
fn build_js() -> Result<JsGuests, String> {
    run("checking for node", Command::new("node").arg("--version"))
        .and_then(|()| run("checking for npm", Command::new("npm").arg("--version")))
        .map_err(|e| format!("{e}\n(install nodejs and npm)"))?;
    let dir = repo().join("sdk/js");
    let example = repo().join("scenarios/js/long_context.js");
    let agentic = repo().join("scenarios/js/agentic_coding.js");
    let manifests = vec![dir.join("package.json"), dir.join("package-lock.json")];
    let modules = work_dir().join(format!("npm-{}", key(&manifests)));
    once(&modules, |partial| {
        for m in &manifests {
            std::fs::copy(m, partial.join(m.file_name().unwrap())).map_err(|e| e.to_string())?;
        }
        // `npm install`, not `npm ci`: it installs the versions package-lock.json pins
        // as well, but `npm ci` refuses this lock file as out of sync because some
        // platform packages that jco names as optional were never published.
        run(
            "installing sdk/js/package-lock.json (npm install)",
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund"])
                .current_dir(partial),
        )
    })?;
    let mut inputs = manifests.clone();
    inputs.extend([
        dir.join("build.mjs"),
        example.clone(),
        agentic.clone(),
        repo().join(JS_RAISES),
        repo().join("wit/scenario.wit"),
    ]);
    inputs.extend(files_in(&dir.join("bench_scenario"), "js"));
    let out = work_dir().join(format!("js-{}", key(&inputs)));
    once(&out, |partial| {
        // From the repository's root, so that ComponentizeJS reads the helper each
        // scenario imports from there, and names the scenario's file relative to it.
        run(
            "building long_context.wasm with sdk/js/build.mjs",
            Command::new("node")
                .arg(dir.join("build.mjs"))
                .arg(&example)
                .arg(partial.join("long_context.wasm"))
                .current_dir(repo())
                .env("COMPONENTIZE_JS_MODULES", modules.join("node_modules")),
        )?;
        run(
            "building agentic_coding.wasm with sdk/js/build.mjs",
            Command::new("node")
                .arg(dir.join("build.mjs"))
                .arg(&agentic)
                .arg(partial.join("agentic_coding.wasm"))
                .current_dir(repo())
                .env("COMPONENTIZE_JS_MODULES", modules.join("node_modules")),
        )?;
        run(
            "building js_raises.wasm with sdk/js/build.mjs",
            Command::new("node")
                .arg(dir.join("build.mjs"))
                .arg(JS_RAISES)
                .arg(partial.join("js_raises.wasm"))
                .current_dir(repo())
                .env("COMPONENTIZE_JS_MODULES", modules.join("node_modules")),
        )
    })?;
    Ok(JsGuests {
        example: out.join("long_context.wasm"),
        agentic: out.join("agentic_coding.wasm"),
        raises: out.join("js_raises.wasm"),
    })
}

/// The JavaScript guest that throws, from the repository's root.
const JS_RAISES: &str = "tests/guests/js/js_raises.js";

/// What the tests run, built once per test process.
struct Built {
    python: Result<PythonGuests, String>,
    js: Result<JsGuests, String>,
}

/// Builds every component, then compiles those not yet in the shared cache (`runner
/// info` on each, side by side): minutes of both cores in a debug runner, so the timing
/// tests wait for it.
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let _quiet = exclusive();
        let built = Built {
            python: build_python(),
            js: build_js(),
        };
        let mut components = vec![];
        if let Ok(p) = &built.python {
            components.extend([
                p.example.clone(),
                p.agentic.clone(),
                p.hostile.clone(),
                p.raises.clone(),
            ]);
        }
        if let Ok(js) = &built.js {
            components.extend([js.example.clone(), js.agentic.clone(), js.raises.clone()]);
        }
        std::thread::scope(|s| {
            for c in &components {
                s.spawn(move || {
                    let start = Instant::now();
                    let out = runner_in(&shared_cache(), &["info", &c.display().to_string()]);
                    assert!(out.status.success(), "runner info {}: {}", c.display(), stderr(&out));
                    let _ = writeln!(
                        std::io::stderr(),
                        "{}: first start {:.1} s (compiled now unless cached by an earlier test run)",
                        c.display(),
                        start.elapsed().as_secs_f64()
                    );
                });
            }
        });
        built
    })
}

/// A component, or `None` (after saying why) when it cannot be built and
/// RUNNER_REQUIRE_GUEST_LANGUAGES is not set.
fn available<T: Clone>(what: &str, built: &Result<T, String>) -> Option<T> {
    match built {
        Ok(t) => Some(t.clone()),
        Err(why) if std::env::var(REQUIRE).is_ok_and(|v| v == "1") => {
            panic!("the {what} guests are required ({REQUIRE}=1) but cannot be built: {why}")
        }
        Err(why) => {
            // Straight to stderr: the test harness hides what passing tests print.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: the {what} guests cannot be built ({why}); set {REQUIRE}=1 to fail instead"
            );
            None
        }
    }
}

/// A run with the shared cache that must succeed; its saved result.
fn run_result(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("result.json");
    let p = path.display().to_string();
    let out = runner_in(&shared_cache(), &[args, &["--save-result", &p]].concat());
    assert!(
        out.status.success(),
        "runner {args:?} failed: {}",
        stderr(&out)
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect("result.json")).expect("JSON")
}

fn request_digest(v: &serde_json::Value) -> &str {
    v["runner"]["request_digest"]
        .as_str()
        .expect("result.json has the request digest")
}

/// The component's entry in the cache at `cache`, if there is one.
fn cache_entry(cache: &Path, component: &Path) -> Option<PathBuf> {
    let digest = hex::encode(Sha256::digest(std::fs::read(component).expect("component")));
    std::fs::read_dir(cache.join("compiled"))
        .ok()?
        .flatten()
        .map(|engine| engine.path().join(format!("{digest}.cwasm")))
        .find(|p| p.is_file())
}

/// The component sends the request stream of scenarios/long_context.rhai, and the
/// compiled form it ran from was the one the cache holds.
fn assert_twin_of_long_context(component: &Path) {
    let wasm = component.display().to_string();
    let rhai = scenario("long_context.rhai");
    let a = run_result(&[&[rhai.as_str()][..], &TWIN_ARGS].concat());
    let b = run_result(&[&[wasm.as_str()][..], &TWIN_ARGS].concat());
    assert_eq!(
        request_digest(&a),
        request_digest(&b),
        "the request streams differ"
    );
    assert_eq!(b["completed"], 24);
    assert_eq!(a["total_input_tokens"], b["total_input_tokens"]);
    assert_eq!(b["runner"]["scenario"], "long_context");
    assert_eq!(a["runner"]["params"], b["runner"]["params"]);
    assert!(
        cache_entry(&shared_cache(), component).is_some(),
        "no compiled entry for {wasm} in {}",
        shared_cache().display()
    );
}

#[test]
fn the_python_twin_of_long_context_sends_the_same_requests_as_the_rhai_original() {
    let Some(python) = available("Python", &built().python) else {
        return;
    };
    assert_twin_of_long_context(&python.example);
}

#[test]
fn the_javascript_twin_of_long_context_sends_the_same_requests_as_the_rhai_original() {
    let Some(js) = available("JavaScript", &built().js) else {
        return;
    };
    assert_twin_of_long_context(&js.example);
}

/// The component sends the request stream of scenarios/agentic_coding.rhai: sessions of
/// tool-calling turns answered by the scenario, the same digest as the Rhai run's.
fn assert_twin_of_agentic_coding(component: &Path) {
    let wasm = component.display().to_string();
    let rhai = scenario("agentic_coding.rhai");
    let args = crate::sessions_languages::AGENTIC_ARGS;
    let a = run_result(&[&[rhai.as_str()][..], &args].concat());
    let b = run_result(&[&[wasm.as_str()][..], &args].concat());
    crate::sessions_languages::assert_same_sessions(&a, &b);
}

#[test]
fn the_python_twin_of_agentic_coding_sends_the_same_sessions_as_the_rhai_original() {
    let Some(python) = available("Python", &built().python) else {
        return;
    };
    assert_twin_of_agentic_coding(&python.agentic);
}

#[test]
fn the_javascript_twin_of_agentic_coding_sends_the_same_sessions_as_the_rhai_original() {
    let Some(js) = available("JavaScript", &built().js) else {
        return;
    };
    assert_twin_of_agentic_coding(&js.agentic);
}

/// The one `error:` line of a run that must fail with exit code 1, and nothing of the
/// guest's toolchain or of a terminal's hints besides it; killed, and the test failed,
/// after 2 minutes.
fn one_error_line(component: &Path, args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg(component)
        .args(args)
        .args(["--sim-profile", "zero"])
        .env(CACHE_ENV, shared_cache())
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the runner binary starts");
    let err = child.stderr.take().expect("piped stderr");
    let err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let err = err.join().unwrap();
    assert_eq!(code, Some(1), "{err}");
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "Traceback",
        "unexpected exception",
        "unreachable",
        "mozalloc_abort",
    ] {
        assert!(!err.contains(bad), "`{bad}` in: {err}");
    }
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    errors[0].to_string()
}

/// The one error line of a run of `component` with `-p attack=ATTACK`, from where it
/// names the function on (the file name before it differs).
fn error_after_file(component: &Path, attack: &str) -> String {
    let error = one_error_line(component, &["-p", &format!("attack={attack}")]);
    let at = error
        .find("error in `")
        .expect("the error names the function");
    error[at..].to_string()
}

/// The number (from 1) of the one line of `file` that contains `text`.
fn line_of(file: &str, text: &str) -> usize {
    let source = std::fs::read_to_string(repo().join(file)).expect("the guest's source");
    let lines: Vec<usize> = (source.lines().enumerate())
        .filter(|(_, l)| l.contains(text))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "`{text}` in {file}: {lines:?}");
    lines[0]
}

/// An exception the helper catches (ValueError) comes back as the call's error; one it
/// lets through (a BaseException) traps the component, and the runner reads the
/// traceback componentize-py printed. Both name the type, the message, the file and the
/// line, and nothing of componentize-py's own panic.
#[test]
fn a_python_exception_ends_the_run_with_its_type_message_and_line() {
    let Some(python) = available("Python", &built().python) else {
        return;
    };
    let file = "tests/guests/python/python_raises.py";
    let component = python.raises.display().to_string();
    for (kind, wanted) in [
        (
            "value",
            format!(
                "ValueError: bad rate (at python_raises.py:{}, in rate)",
                line_of(file, "raise ValueError(\"bad rate\")")
            ),
        ),
        (
            "fatal",
            format!(
                "python_raises.Fatal: gave up (at python_raises.py:{}, in next_request)",
                line_of(file, "raise Fatal(\"gave up\")")
            ),
        ),
    ] {
        let error = one_error_line(&python.raises, &["-p", &format!("raise={kind}")]);
        assert_eq!(
            error,
            format!("error: {component}: error in `next-request`: {wanted}"),
            "{kind}"
        );
    }
}

#[test]
fn a_javascript_error_ends_the_run_with_its_message_and_line() {
    let Some(js) = available("JavaScript", &built().js) else {
        return;
    };
    let line = line_of(JS_RAISES, "throw new Error(\"bad rate\")");
    let error = one_error_line(&js.raises, &[]);
    assert_eq!(
        error,
        format!(
            "error: {}: error in `next-request`: Error: bad rate (at {JS_RAISES}:{line}, in rate)",
            js.raises.display()
        )
    );
}

#[test]
fn a_hostile_python_guest_is_stopped_with_the_same_error_as_a_rust_one() {
    let Some(python) = available("Python", &built().python) else {
        return;
    };
    let rust = PathBuf::from(crate::wasm::component("sandbox_probe"));
    for (attack, wanted) in [
        ("loop", "ran longer than 1.0 s and was stopped"),
        (
            "memory",
            "tried to grow its memory past the 1024 MiB cap and was stopped",
        ),
    ] {
        let from_python = error_after_file(&python.hostile, attack);
        assert!(
            from_python.starts_with("error in `next-request`: "),
            "{from_python}"
        );
        assert!(from_python.contains(wanted), "{attack}: {from_python}");
        assert_eq!(from_python, error_after_file(&rust, attack), "{attack}");
    }
}

/// Runs `runner info` on `component` with the cache in `cache`; must succeed.
fn info(cache: &Path, component: &str) -> Output {
    let out = runner_in(cache, &["info", component]);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// The cache on a small component (compiled in a moment, so a cache of its own): the
/// first run writes the entry, the next reads it instead of compiling (the entry is not
/// rewritten, and its time of last use moves), a corrupted entry is replaced, a directory
/// others may write is not used, and a deleted cache is made again.
#[test]
fn a_compiled_component_is_kept_and_used_by_the_next_run() {
    let component = crate::wasm::component("long_context");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    info(&cache, &component);
    let entry = cache_entry(&cache, Path::new(&component)).expect("an entry after the first run");
    let original = std::fs::read(&entry).unwrap();
    assert!(original.starts_with(b"runner-cwasm-v1\n"));

    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let set_last_use = |t| {
        std::fs::File::options()
            .write(true)
            .open(&entry)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    set_last_use(long_ago);
    let inode = std::fs::metadata(&entry).unwrap().ino();
    info(&cache, &component);
    let meta = std::fs::metadata(&entry).unwrap();
    assert_eq!(meta.ino(), inode, "a cache hit does not rewrite the entry");
    assert!(
        meta.modified().unwrap() > long_ago,
        "a cache hit marks the entry used"
    );

    // One flipped byte in the compiled code: refused by its digest, compiled again.
    let mut corrupt = original.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    std::fs::write(&entry, &corrupt).unwrap();
    info(&cache, &component);
    let replaced = std::fs::read(&entry).unwrap();
    assert_ne!(replaced, corrupt);
    assert_ne!(
        std::fs::metadata(&entry).unwrap().ino(),
        inode,
        "rewritten by a rename"
    );

    // Writable by others: not trusted, not written; the run still works and says why.
    std::fs::remove_file(&entry).unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = info(&shared, &component);
    assert!(
        stderr(&out).contains("warning: not using the compile cache"),
        "{}",
        stderr(&out)
    );
    assert!(cache_entry(&shared, Path::new(&component)).is_none());

    std::fs::remove_dir_all(&cache).unwrap();
    info(&cache, &component);
    assert!(cache_entry(&cache, Path::new(&component)).is_some());
}
