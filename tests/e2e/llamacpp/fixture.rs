//! The real-engine fixture: llama.cpp's `llama-server` (PyPI's xllamacpp, in a Python
//! process) serving a small random-weight model that tests/llamacpp/make_model.py writes.
//!
//! The venv and the model are made once and kept under cargo's test temp dir, each keyed
//! by a hash of what made it, so a later run (or a changed script) knows whether to redo
//! it. Each test starts its own server on a free loopback port and stops it by PID when
//! its guard drops, also when the test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::build_steps::{key, once, run};

/// Set (CI sets it) to fail rather than skip when Python or the packages are missing.
const REQUIRE: &str = "RUNNER_REQUIRE_LLAMACPP";

/// What the server runs: the model and its tokenizer.json (for the runner's --tokenizer).
#[derive(Clone, Debug)]
pub struct Engine {
    python: PathBuf,
    model: PathBuf,
    pub tokenizer: PathBuf,
}

fn scripts() -> PathBuf {
    crate::support::repo().join("tests/llamacpp")
}

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("llamacpp")
}

fn prepare() -> Result<Engine, String> {
    let python = std::env::var("RUNNER_PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        "checking for Python's venv module",
        Command::new(&python).args(["-c", "import venv, ensurepip"]),
    )
    .map_err(|e| format!("{e}\n(install python3 and python3-venv)"))?;
    let requirements = scripts().join("requirements.txt");
    // Only the venv's `bin/python` is used, which still works once the dir is renamed.
    let venv = work_dir().join(format!("venv-{}", key(&[&requirements])));
    let venv_python = venv.join("bin/python");
    once(&venv, |dir| {
        run(
            "creating the venv",
            Command::new(&python).arg("-m").arg("venv").arg(dir),
        )?;
        run(
            "installing tests/llamacpp/requirements.txt",
            Command::new(dir.join("bin/python"))
                .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .arg("-r")
                .arg(&requirements),
        )
    })?;
    let make = scripts().join("make_model.py");
    let model_dir = work_dir().join(format!("model-{}", key(&[&make, &requirements])));
    once(&model_dir, |dir| {
        run(
            "writing the model (make_model.py)",
            Command::new(&venv_python).arg(&make).arg(dir),
        )
    })?;
    Ok(Engine {
        python: venv_python,
        model: model_dir.join("model.gguf"),
        tokenizer: model_dir.join("tokenizer.json"),
    })
}

/// The engine, set up once per test process; `None` (after saying why) when it cannot be
/// and RUNNER_REQUIRE_LLAMACPP is not set.
pub fn engine() -> Option<Engine> {
    static ENGINE: Mutex<Option<Result<Engine, String>>> = Mutex::new(None);
    let mut slot = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    let result = slot.get_or_insert_with(prepare).clone();
    match result {
        Ok(engine) => Some(engine),
        Err(why) if std::env::var(REQUIRE).is_ok_and(|v| v == "1") => {
            panic!("the llama.cpp fixture is required ({REQUIRE}=1) but cannot be set up: {why}")
        }
        Err(why) => {
            // Straight to stderr: the test harness hides what passing tests print.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: the llama.cpp fixture cannot be set up ({why}); set {REQUIRE}=1 to fail instead"
            );
            None
        }
    }
}

/// A running llama-server; killed (by PID) and reaped when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// What a test's llama-server allows beyond the defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Slot actions (`POST /slots/ID?action=erase`, the runner's --reset-prefix-cache):
    /// llama-server's `--slot-save-path`, a directory of the server's own. Without it
    /// every slot action is answered 501.
    pub slot_actions: bool,
    /// llama-server's `--cache-ram` in MiB (0: no host-memory prompt cache, which an
    /// erase of the slots leaves full); its default (8192) when `None`.
    pub cache_ram_mib: Option<u32>,
    /// Compute threads (2 when `None`). One thread keeps a loaded machine's noise down:
    /// llama.cpp's threads wait for each other at every operation, so a step with two
    /// lasts as long as the one the busy machine ran last.
    pub threads: Option<u32>,
}

impl Server {
    /// Starts llama-server with 4 slots and 2 threads and waits until /health says ok.
    pub fn start(engine: &Engine) -> Server {
        Server::start_with(engine, Options::default())
    }

    /// [`Server::start`] with `options`.
    pub fn start_with(engine: &Engine, options: Options) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("llama-server.log");
        let port = crate::support::free_port();
        let mut extra: Vec<String> = vec![];
        if options.slot_actions {
            let slots = dir.path().join("slots");
            std::fs::create_dir(&slots).expect("slot save dir");
            extra.extend(["--slot-save-path".into(), slots.display().to_string()]);
        }
        if let Some(mib) = options.cache_ram_mib {
            extra.extend(["--cache-ram".into(), mib.to_string()]);
        }
        let mut child = Command::new(&engine.python)
            .arg(scripts().join("serve.py"))
            .arg(&engine.model)
            .arg(port.to_string())
            .args(["--parallel", "4", "--until-stdin-closes"])
            .args(["--threads", &options.threads.unwrap_or(2).to_string()])
            .args(&extra)
            // serve.py exits when this pipe closes, so it never outlives the test process.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start serve.py");
        let stdout = child.stdout.take().expect("piped stdout");
        let server = Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_default();
        assert!(
            line.starts_with("listening on"),
            "llama-server did not start: {line:?}\n{}",
            server.log_tail()
        );
        let start = Instant::now();
        while !server.healthy() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "llama-server never became healthy\n{}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `GET /health` answers 200.
    fn healthy(&self) -> bool {
        let addr = self.url.trim_start_matches("http://");
        let Ok(mut s) = std::net::TcpStream::connect(addr) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if s.write_all(format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
    }

    /// The end of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
