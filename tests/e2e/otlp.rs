//! Traces joined to the server: every request carries a W3C `traceparent` (the run's trace
//! id, its own span id), requests.jsonl and result.json name them, the built-in simulator
//! logs the header it received, and `--otlp` delivers one span per request to a real OTLP
//! receiver: one built on the OpenTelemetry project's generated protobuf classes (PyPI's
//! opentelemetry-proto, tests/otlp/receiver.py), as no OpenTelemetry Collector is packaged
//! for this machine. A receiver that is not there costs the run nothing but a warning.
//! result.json counts the spans exported and dropped, and why. A hostile receiver (an
//! endless answer, a redirect elsewhere) is one warning too, in bounded memory.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::{
    exclusive, free_port, records_in, repo, runner, scenario, stderr, stdout, Pipes,
};

/// The receiver's pinned packages (tests/otlp/requirements.txt), in a venv made once under
/// cargo's test temp dir; `None`, with the reason printed, when Python cannot make one,
/// unless RUNNER_REQUIRE_OTLP=1.
fn receiver_python() -> Option<PathBuf> {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("otlp-proto-1.45.2");
    let python = work.join("bin/python");
    let ready = |p: &Path| {
        Command::new(p)
            .args([
                "-c",
                "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if ready(&python) {
        return Some(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&work)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(repo().join("tests/otlp/requirements.txt"))
            .status()
            .is_ok_and(|s| s.success())
        && ready(&python);
    if made {
        return Some(python);
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        std::env::var("RUNNER_REQUIRE_OTLP").as_deref() != Ok("1"),
        "the OTLP receiver is required but opentelemetry-proto cannot be installed"
    );
    eprintln!("SKIPPED: cannot install opentelemetry-proto from PyPI into a venv");
    None
}

/// tests/otlp/receiver.py, serving on loopback; killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Receiver {
    fn start(python: &Path, dir: &Path) -> Receiver {
        let spans = dir.join("spans.jsonl");
        let mut child = Command::new(python)
            .arg(repo().join("tests/otlp/receiver.py"))
            .arg(&spans)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let mut line = String::new();
        let out = child.stdout.take().expect("piped stdout");
        BufReader::new(out).read_line(&mut line).expect("its port");
        let port = line.trim().parse().expect("a port number");
        Receiver { child, port, spans }
    }

    fn spans(&self) -> Vec<Value> {
        json_lines(&self.spans)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// 32 short requests on the simulator, recorded in `dir`, with `extra` arguments.
fn small_run(dir: &Path, extra: &[&str]) -> std::process::Output {
    let out = dir.join("out").display().to_string();
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=32".into(),
        "-p".into(),
        "input_tokens=64".into(),
        "-p".into(),
        "output_tokens=8".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--sim-ttft-ms".into(),
        "20".into(),
        "--sim-itl-ms".into(),
        "5".into(),
        "--output".into(),
        out,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    runner(&args)
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The span's times, as offsets from its record's phase clock, equal the record's own:
/// sent, first token, first answer, end. Every span of the phase shares that clock.
fn phase_zero(span: &Value, r: &Value) -> u64 {
    let zero = u(&span["start_time_unix_nano"]) - u(&r["sent_ns"]);
    let offset = |t: &Value| u(t) - zero;
    assert_eq!(
        offset(&span["end_time_unix_nano"]),
        u(&r["end_ns"]),
        "{span}\n{r}"
    );
    let events: HashMap<&str, u64> = span["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().expect("name"),
                offset(&e["time_unix_nano"]),
            )
        })
        .collect();
    assert_eq!(
        events.get("first_token"),
        Some(&u(&r["chunks"][0]["t_ns"])),
        "{span}"
    );
    assert_eq!(
        events.get("first_answer"),
        Some(&u(&r["first_answer_ns"])),
        "{span}"
    );
    zero
}

/// A span's attributes say what its record says.
fn attributes_match(span: &Value, r: &Value) {
    let a = &span["attributes"];
    assert_eq!(a["runner.request_id"], r["request_id"], "{span}");
    assert_eq!(a["runner.phase"], r["phase"], "{span}");
    assert_eq!(a["runner.index"], r["index"], "{span}");
    assert_eq!(a["runner.outcome"], "ok", "{span}");
    assert_eq!(a["gen_ai.usage.input_tokens"], r["input_tokens"], "{span}");
    assert_eq!(
        a["gen_ai.usage.output_tokens"], r["output_tokens"],
        "{span}"
    );
    assert_eq!(a["http.response.status_code"], 200, "{span}");
    assert_eq!(span["kind"], 3, "a client span: {span}");
    assert_eq!(span["resource"]["service.name"], "runner", "{span}");
    assert_eq!(span["content_type"], "application/x-protobuf", "{span}");
}

/// The acceptance run: exactly one span per request reaches the receiver, with the ids
/// requests.jsonl names and the simulator received, times and attributes equal to the
/// record's.
#[test]
fn every_request_is_one_span_at_a_real_otlp_receiver() {
    let Some(python) = receiver_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let receiver = Receiver::start(&python, dir.path());
    let log = dir.path().join("sent.jsonl");
    let url = format!("http://127.0.0.1:{}/v1/traces", receiver.port);
    let before = unix_ns();
    let out = small_run(
        dir.path(),
        &["--otlp", &url, "--sim-send-log", &log.display().to_string()],
    );
    let after = unix_ns();
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    assert!(
        stderr(&out).contains(&format!("otlp: 32 spans exported to {url}")),
        "{}",
        stderr(&out)
    );
    let records = records_in(&dir.path().join("out"));
    assert_eq!(records.len(), 32);
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/result.json")).expect("result.json"),
    )
    .expect("JSON");
    let trace = result["runner"]["trace_id"]
        .as_str()
        .expect("the run's trace id");
    // result.json counts them: all 32 exported, none dropped, no receiver error.
    let otlp = &result["otlp"];
    assert_eq!(otlp["url"], url.as_str(), "{otlp}");
    for (key, n) in [("spans", 32), ("exported", 32), ("dropped", 0)] {
        assert_eq!(otlp[key], n, "{key}: {otlp}");
    }
    assert!(otlp.get("receiver_error").is_none(), "{otlp}");
    let spans = receiver.spans();
    assert_eq!(spans.len(), 32, "one span per request: {spans:?}");
    let by_span: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().expect("span id"), s))
        .collect();
    assert_eq!(by_span.len(), 32, "span ids are unique");
    let received: HashMap<String, String> = json_lines(&log)
        .into_iter()
        .filter_map(|l| {
            let id = l["request_id"].as_str()?.to_string();
            Some((id, l["traceparent"].as_str()?.to_string()))
        })
        .collect();
    let mut zeros = HashSet::new();
    for r in &records {
        let (trace_id, span_id) = (
            r["trace_id"].as_str().unwrap(),
            r["span_id"].as_str().unwrap(),
        );
        assert_eq!(trace_id, trace, "one trace per run: {r}");
        let request_id = r["request_id"].as_str().expect("request id");
        assert_eq!(
            received.get(request_id).map(String::as_str),
            Some(format!("00-{trace_id}-{span_id}-01").as_str()),
            "the simulator received the recorded traceparent"
        );
        let span = by_span
            .get(span_id)
            .unwrap_or_else(|| panic!("no span for {r}"));
        assert_eq!(span["trace_id"], trace_id);
        assert_eq!(
            span["parent_span_id"], "",
            "a root span: the server's is its child"
        );
        attributes_match(span, r);
        zeros.insert(phase_zero(span, r));
    }
    assert_eq!(zeros.len(), 1, "one clock for the phase: {zeros:?}");
    let zero = zeros.into_iter().next().unwrap();
    assert!(
        (before..after).contains(&zero),
        "the phase began during the run"
    );
}

/// A receiver that is not there: one warning line while the run goes on, its last line
/// counts the spans lost, and the run succeeds. The same seed without --otlp sends the
/// same request stream (the digest) in a trace of its own.
#[test]
fn a_missing_receiver_is_a_warning_and_a_new_run_a_new_trace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("http://127.0.0.1:{}/v1/traces", free_port());
    let out = small_run(dir.path(), &["--otlp", &url]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("warning: --otlp"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        err.contains(&format!("warning: otlp: 0 of 32 spans exported to {url}")),
        "{err}"
    );
    let result = |d: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("out/result.json")).expect("result"))
            .expect("JSON")
    };
    let first = result(dir.path());
    // result.json counts every span dropped, by the receiver's failure, and says why.
    let otlp = &first["otlp"];
    for (key, n) in [
        ("spans", 32),
        ("exported", 0),
        ("dropped", 32),
        ("dropped_receiver", 32),
        ("dropped_queue_full", 0),
        ("dropped_unflushed", 0),
    ] {
        assert_eq!(otlp[key], n, "{key}: {otlp}");
    }
    let why = otlp["receiver_error"].as_str().unwrap_or_default();
    assert!(why.to_lowercase().contains("connect"), "{otlp}");
    let again = tempfile::tempdir().expect("temp dir");
    let out = small_run(again.path(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("otlp"), "{}", stderr(&out));
    let second = result(again.path());
    assert!(
        second.get("otlp").is_none(),
        "no --otlp, no section: {second}"
    );
    assert_eq!(
        first["runner"]["request_digest"],
        second["runner"]["request_digest"]
    );
    assert_ne!(first["runner"]["trace_id"], second["runner"]["trace_id"]);
    let traces: HashSet<Value> = records_in(&again.path().join("out"))
        .iter()
        .map(|r| r["trace_id"].clone())
        .collect();
    assert_eq!(
        traces,
        HashSet::from([second["runner"]["trace_id"].clone()])
    );
}

/// A `traceparent` of the user's own is refused: the runner sets it on every request.
#[test]
fn a_traceparent_header_of_ones_own_is_refused() {
    let out = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=1",
        "--header",
        "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("set by the runner itself"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A receiver on loopback that reads each post whole and answers it with `answer`
/// (at most 16 connections); its URL.
fn hostile_receiver(answer: fn(&mut TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                if read_post(&mut stream) {
                    answer(&mut stream);
                }
            });
        }
    });
    format!("http://{addr}/v1/traces")
}

/// Reads one request, head and `content-length` body; whether it came whole.
fn read_post(stream: &mut TcpStream) -> bool {
    let mut data = Vec::new();
    let mut buf = [0u8; 64 << 10];
    let body_at = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..body_at]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while data.len() < body_at + length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// 200, then a body without end (until the reader goes away, or 20 s).
fn endless_200(stream: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let filler = vec![0u8; 64 << 10];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) && stream.write_all(&filler).is_ok() {}
}

/// `small_run` with `extra`, its heap budget 512 MiB: its output, how long it took, and
/// its peak resident memory in MiB (the kernel's VmHWM, read until it exits).
fn measured_run(dir: &Path, extra: &[&str]) -> (Option<i32>, String, String, Duration, u64) {
    let out = dir.join("out").display().to_string();
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=32".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--output".into(),
        out,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(&args)
        .env("RUNNER_MEMORY_LIMIT_MIB", "512")
        .env("RUNNER_CACHE_DIR", crate::support::test_cache_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the runner starts");
    let pipes = Pipes::take(&mut child);
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let code = loop {
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        });
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the run did not end in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let (text, err) = pipes.join();
    (code, text, err, took, peak_kib >> 10)
}

/// What a run with a misbehaving receiver must still do: succeed with one `--otlp`
/// warning, its report and result.json, every span counted lost and why.
fn one_warning_and_everything_written(
    dir: &Path,
    code: Option<i32>,
    text: &str,
    err: &str,
) -> Value {
    assert_eq!(code, Some(0), "{err}");
    let warned = err
        .lines()
        .filter(|l| l.starts_with("warning: --otlp"))
        .count();
    assert_eq!(warned, 1, "{err}");
    assert!(
        err.contains("warning: otlp: 0 of 32 spans exported"),
        "{err}"
    );
    assert!(text.contains("Serving Benchmark Result"), "{text}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("out/result.json")).expect("result.json"),
    )
    .expect("JSON");
    assert_eq!(result["otlp"]["exported"], 0, "{}", result["otlp"]);
    assert_eq!(records_in(&dir.join("out")).len(), 32);
    result["otlp"].clone()
}

/// A receiver answering 200 with a body that never ends once filled the run's memory in
/// 4 s (no result.json, no report): its answer is read up to a cap and dropped.
#[test]
fn a_receivers_endless_answer_is_cut_and_the_run_keeps_everything() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = hostile_receiver(endless_200);
    let (code, text, err, took, peak_mib) = measured_run(dir.path(), &["--otlp", &url]);
    eprintln!("ended in {took:?}, peak RSS {peak_mib} MiB:\n{err}");
    let otlp = one_warning_and_everything_written(dir.path(), code, &text, &err);
    let why = otlp["receiver_error"].as_str().unwrap_or_default();
    assert!(why.contains("64 KiB"), "{otlp}");
    assert!(peak_mib < 256, "peak RSS {peak_mib} MiB");
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// A 307 to another port is a failure, not followed: the spans go to the URL given or
/// nowhere (one was followed, and the spans went to a port the user never named).
#[test]
fn a_receivers_redirect_is_a_failure_and_never_followed() {
    let elsewhere = TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = elsewhere.local_addr().expect("addr");
    elsewhere.set_nonblocking(true).expect("nonblocking");
    static OTHER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OTHER.get_or_init(|| format!("http://{other}/v1/traces"));
    let url = hostile_receiver(|s| {
        let to = OTHER.get().expect("set");
        let _ = write!(
            s,
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n"
        );
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, text, err, took, peak_mib) = measured_run(dir.path(), &["--otlp", &url]);
    eprintln!("ended in {took:?}, peak RSS {peak_mib} MiB:\n{err}");
    let otlp = one_warning_and_everything_written(dir.path(), code, &text, &err);
    let why = otlp["receiver_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("307") && why.contains("not followed"),
        "{otlp}"
    );
    assert!(
        elsewhere.accept().is_err(),
        "the redirect was followed to {other}"
    );
}
