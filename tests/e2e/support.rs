//! Running the binary and reading what it wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

pub fn scenario(name: &str) -> String {
    repo().join("scenarios").join(name).display().to_string()
}

pub fn fixture(name: &str) -> String {
    repo()
        .join("tests/fixtures/scenarios")
        .join(name)
        .display()
        .to_string()
}

/// Where the runs of these tests keep compiled components and pulled packages: under
/// target/, not in the user's own cache.
pub fn test_cache_dir() -> PathBuf {
    repo().join("target/tmp/runner-cache")
}

/// Runs `runner ARGS…` to completion (every run in these tests is bounded in requests).
pub fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .env("RUNNER_CACHE_DIR", test_cache_dir())
        .output()
        .expect("the runner binary starts")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a successful run and returns its saved result JSON.
pub fn run_ok(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("result.json");
    let mut all: Vec<&str> = args.to_vec();
    let p = path.display().to_string();
    all.extend(["--save-result", &p]);
    let out = runner(&all);
    assert!(
        out.status.success(),
        "runner {args:?} failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    let text = std::fs::read_to_string(&path).expect("result file written");
    (
        stdout(&out),
        serde_json::from_str(&text).expect("result is JSON"),
    )
}

/// The records of `requests.jsonl` in `dir`, in the order they were written.
pub fn records_in(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

/// Runs a scenario with `--output` into a temp dir; returns its stdout, the result and the
/// records, sorted by index.
pub fn run_records(args: &[&str]) -> (String, serde_json::Value, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let mut all = args.to_vec();
    all.extend(["--output", &out]);
    let (stdout, result) = run_ok(&all);
    let mut records = records_in(dir.path());
    records.sort_by_key(|r| r["index"].as_u64().unwrap());
    (stdout, result, records)
}

/// The cells after `label` of the text table row that starts with it, split on spaces.
pub fn table_row(text: &str, label: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row `{label}`:\n{text}"));
    line[label.len()..]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

pub fn num(v: &serde_json::Value, key: &str) -> f64 {
    v.get(key)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("no numeric `{key}` in {v}"))
}

/// Serialises the tests whose timing assertions are tight, and the heavy runs that would
/// disturb them, so a 2-core machine measures the runner rather than its neighbours.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `line` to the test binary's own stderr, past libtest's capture (which takes
/// only `print!` and `eprint!`), so that a CI log shows it for a test that passed: the
/// line that says a privileged check ran.
pub fn tell(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A check that cannot run on this machine (`why`): a failure when `require` is `1`
/// (`.ci/run` sets every such variable), else `SKIPPED: …` told and the test passes
/// without it.
pub fn skip_unless_required(require: &str, why: &str) {
    assert!(
        std::env::var(require).as_deref() != Ok("1"),
        "{require}=1 but {why}"
    );
    tell(&format!("SKIPPED: {why}; set {require}=1 to fail instead"));
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Starts `runner ARGS…` with its output piped, for tests that act on it while it runs.
pub fn spawn_runner(args: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .env("RUNNER_CACHE_DIR", test_cache_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the runner binary starts")
}

/// Polls `cond` every 10 ms until it holds; panics with `what` after `limit`.
pub fn wait_until(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Complete lines of a file being written (0 while it does not exist).
pub fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| l.ends_with('}')).count())
        .unwrap_or(0)
}

/// Collects a child's stdout and stderr on threads, so its pipes never fill up while the
/// test waits on it; `join` gives them back once it has exited.
pub struct Pipes {
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
    pub err_lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Pipes {
    pub fn take(child: &mut std::process::Child) -> Pipes {
        use std::io::{BufRead, Read};
        let mut stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let err_lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = err_lines.clone();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let err = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                all += &line;
                all.push('\n');
                lines.lock().unwrap().push(line);
            }
            all
        });
        Pipes {
            out,
            err,
            err_lines,
        }
    }

    pub fn join(self) -> (String, String) {
        (self.out.join().unwrap(), self.err.join().unwrap())
    }
}

/// Waits for a child to exit, killing it (and failing) after `limit`.
pub fn wait_exit(child: &mut std::process::Child, limit: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the runner did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The value of a `Label: value` row of the text report.
pub fn report_row(text: &str, label: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(label))
        .and_then(|l| l[label.len()..].trim().parse().ok())
}

/// A `runner sim` on a free loopback port (writing its send log if asked); killed when
/// dropped.
pub struct SimProcess {
    child: std::process::Child,
    pub url: String,
    log: Option<PathBuf>,
}

impl SimProcess {
    /// A simulator with the `runner sim` options `extra`.
    pub fn start(extra: &[&str]) -> SimProcess {
        SimProcess::spawn(extra, None)
    }

    /// A simulator that writes its send log to `dir/<name>.jsonl`.
    pub fn logging(dir: &Path, name: &str, extra: &[&str]) -> SimProcess {
        SimProcess::spawn(extra, Some(dir.join(format!("{name}.jsonl"))))
    }

    fn spawn(extra: &[&str], log: Option<PathBuf>) -> SimProcess {
        let port = free_port().to_string();
        let path = log.as_ref().map(|l| l.display().to_string());
        let mut args = vec!["sim", "--port", &port];
        if let Some(path) = &path {
            args.extend(["--sim-send-log", path]);
        }
        args.extend(extra);
        let child = spawn_runner(&args);
        let addr = format!("127.0.0.1:{port}");
        wait_until(
            "the simulator to listen",
            std::time::Duration::from_secs(30),
            || std::net::TcpStream::connect(&addr).is_ok(),
        );
        SimProcess {
            child,
            url: format!("http://{addr}"),
            log,
        }
    }

    /// The send log's lines, but the pre-run test request's.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        let log = self
            .log
            .as_ref()
            .expect("a simulator started with a send log");
        std::fs::read_to_string(log)
            .expect("send log")
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
            .filter(|l| {
                !l["request_id"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("preflight")
            })
            .collect()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A twin.toml's held-out error on `phase`'s `metric`, in % of the real figure, SIGNED
/// (+: the twin is slower): `error_pct` alone is |twin − real| / real, which a twin that
/// predicts too low passes as well as one too high.
pub fn holdout_signed_pct(twin: &toml::Value, phase: &str, metric: &str) -> f64 {
    let rows = twin["holdout"].as_array().expect("holdout rows");
    let row = rows
        .iter()
        .find(|r| r["phase"].as_str() == Some(phase) && r["metric"].as_str() == Some(metric))
        .unwrap_or_else(|| panic!("no held-out {phase} {metric}"));
    let field = |k: &str| row[k].as_float().unwrap_or_else(|| panic!("{k}: {row}"));
    field("error") / field("observed") * 100.0
}

/// `runner calibrate RUN --holdout PHASE... --virtual-time` into a temp file: the twin
/// fitted from the recorded run's other phases and the held-out replay on the simulated
/// clock, both deterministic (the same figures on any machine however busy).
pub fn calibrate_recorded(run: &Path, holdout: &[&str]) -> (toml::Value, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("twin.toml").display().to_string();
    let run = run.display().to_string();
    let mut args = vec!["calibrate", run.as_str(), "--virtual-time", "--out", &out];
    for phase in holdout {
        args.extend(["--holdout", phase]);
    }
    let o = runner(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).expect("twin.toml");
    (toml::from_str(&text).expect("toml"), text)
}
