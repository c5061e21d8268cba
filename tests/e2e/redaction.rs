//! Redaction never corrupts an output: secrets are hidden where values enter (a server's
//! message, a scenario's note or log line, a metric name), never in serialised text, so a
//! short API key or URL password (`1`, `e`, `ok`, `null`, `0.0`, `p`) gives the same
//! outputs, times aside, as a long one; and a scenario's `log()` and server_metrics.jsonl
//! hold no secret a server echoed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{fixture, stderr, stdout, SimProcess};

/// Whether `word` is a random id of the run (a `traceparent`'s trace or span id: 16 or 32
/// hex digits), which differs between two runs of the same workload.
fn is_hex_id(word: &str) -> bool {
    word.len() >= 16 && word.chars().all(|c| c.is_ascii_hexdigit())
}

/// What a loaded machine changes in one run of two beside its numbers: which clock the
/// chunks and sends were read on (a chunk without the kernel's receive time, or one
/// stepped back behind its predecessor, has no `client_delay_ns`, and the `Latency clock`
/// line says "user-space read times for the rest"; `clock.rs`, `transport/response.rs`),
/// and the client-bound verdict (p99 send lateness over 10 ms, `summary.rs`). Timings,
/// like the numbers masked below, not values a secret could corrupt.
const TIMING_LINES: [&str; 2] = [
    "Latency clock:",
    "WARNING: the client could not keep its schedule",
];
const TIMING_KEYS: [&str; 3] = ["client_delay_ns", "send_write_ns", "client_bound"];

/// `text` with what differs between two runs of the same workload masked: every run of
/// digits (times, rates, ports, ids), hex ids, and runs of white space
/// (columns widen with their numbers); lines left with nothing but a number (a chart's
/// axis ticks, which follow the values) and the lines of [`TIMING_LINES`] are dropped.
fn masked_text(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let timing = |l: &str| TIMING_LINES.iter().any(|t| l.trim_start().starts_with(t));
    for line in text.lines().filter(|l| !timing(l)) {
        let mut out = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let word: String = std::iter::once(c)
                .chain(chars.clone().take_while(|d| d.is_ascii_alphanumeric()))
                .collect();
            if c.is_ascii_alphanumeric() && is_hex_id(&word) {
                for _ in 1..word.len() {
                    chars.next();
                }
                out.push('#');
            } else if c.is_ascii_digit() {
                while chars
                    .peek()
                    .is_some_and(|d| d.is_ascii_digit() || *d == '.')
                {
                    chars.next();
                }
                out.push('#');
            } else if c.is_whitespace() {
                while chars.peek().is_some_and(|d| d.is_whitespace()) {
                    chars.next();
                }
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        let out = out.trim().to_string();
        // An axis tick: a number, perhaps with a unit (`#k`, `#ms`).
        let tick = out.starts_with('#') && out.len() <= 3;
        if !tick && out.chars().any(|c| c != '#' && c != ' ') {
            lines.push(out);
        }
    }
    lines
}

/// A JSON value with every number set to 0, every string masked as text, and the keys
/// of [`TIMING_KEYS`] left out. Keys stay as they are: masked, a key holding a secret's
/// digits (or one a redaction cut into) would read the same as the right one.
fn masked_json(v: &Value) -> Value {
    match v {
        Value::Number(_) => Value::from(0),
        Value::String(s) => Value::String(masked_text(s).join("\n")),
        Value::Array(items) => Value::Array(items.iter().map(masked_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !TIMING_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), masked_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What a run showed and wrote, times masked: JSON files parsed (they must parse), records
/// sorted (they are written as requests end), HTML without its markup (charts' grids
/// follow their values), server_metrics.jsonl as the names it holds (one line per scrape).
fn outputs(out: &Output, dir: &Path) -> Vec<(String, String)> {
    let mut all = vec![("stdout".to_string(), masked_text(&stdout(out)).join("\n"))];
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        let shown = match name.rsplit('.').next().unwrap_or("") {
            "json" => masked_json(&parse(&name, &text)).to_string(),
            "jsonl" if name == "server_metrics.jsonl" => {
                let mut keys: Vec<String> = text
                    .lines()
                    .flat_map(|l| json_keys(&parse(&name, l)))
                    .collect();
                keys.sort();
                keys.dedup();
                keys.join("\n")
            }
            "jsonl" => {
                let mut lines: Vec<String> = text
                    .lines()
                    .map(|l| masked_json(&parse(&name, l)).to_string())
                    .collect();
                lines.sort();
                lines.join("\n")
            }
            "html" => masked_text(&without_markup(&text)).join("\n"),
            _ => {
                let mut lines = masked_text(&text);
                if name.ends_with(".csv") {
                    lines.sort();
                }
                lines.join("\n")
            }
        };
        all.push((name, shown));
    }
    all
}

fn parse(name: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {text:.300}"))
}

/// Every object key in `v`, at any depth.
fn json_keys(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().flat_map(json_keys).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(json_keys(v)))
            .collect(),
        _ => vec![],
    }
}

fn without_markup(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push('\n');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// A run of fixed.rhai (16 requests, seed fixed) against `target` (the built-in simulator
/// when `None`) with `key` as OPENAI_API_KEY, writing into `dir`.
fn run(target: Option<&str>, key: Option<&str>, dir: &Path) -> Output {
    let out = dir.display().to_string();
    let mut args = vec![
        fixture("fixed.rhai"),
        "-p".into(),
        "requests=16".into(),
        "-p".into(),
        "concurrency=4".into(),
        "-p".into(),
        "output_tokens=8".into(),
        // The default prefix is random per run.
        "--request-id-prefix".into(),
        "req-".into(),
        "--output".into(),
        out,
    ];
    if let Some(t) = target {
        // Every run sends the same prompts to one simulator: each starts from an empty
        // prefix cache, or the later ones read a warm one (and say so).
        args.extend(["--target".into(), t.to_string()]);
        args.extend(["--reset-prefix-cache".into(), "run".into()]);
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.args(&args)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0");
    if let Some(key) = key {
        cmd.env("OPENAI_API_KEY", key);
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "key {key:?}: {}", stderr(&o));
    o
}

/// A run's outputs as written, unmasked: stdout, stderr and every file, one string.
fn unmasked(out: &Output, dir: &Path) -> String {
    let mut all = stdout(out);
    all.push_str(&stderr(out));
    for entry in std::fs::read_dir(dir).unwrap() {
        all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    all
}

/// The outputs of a run, and its stderr's lines about short secrets; panics if `secret`
/// is in any of them as written (the masked outputs cannot show it: their digits are
/// masked, and a secret with digits would read as masked digits).
fn outputs_of(
    target: Option<&str>,
    key: Option<&str>,
    secret: &str,
) -> (Vec<(String, String)>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let o = run(target, key, dir.path());
    assert!(
        !unmasked(&o, dir.path()).contains(secret),
        "the secret {secret} is shown"
    );
    let warnings = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("warning: ") && l.contains("shorter than"))
        .count();
    (outputs(&o, dir.path()), warnings)
}

fn assert_same(long: &[(String, String)], short: &[(String, String)], what: &str) {
    let files = |o: &[(String, String)]| o.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(files(long), files(short), "{what}");
    for ((name, a), (_, b)) in long.iter().zip(short) {
        assert_eq!(a, b, "{what}: {name} differs");
    }
}

/// OPENAI_API_KEY set to `1`, `e`, `ok`, `null`, `0.0` (against a simulator given as the
/// target, and the built-in one where the key is merely set) and a URL password `p` give
/// the outputs a long key gives, times masked, with one warning line; the long key is in
/// no output.
#[test]
fn short_keys_and_passwords_change_no_output() {
    const LONG: &str = "sk-long-key-4b9d0e7a21c8f6";
    let sim = SimProcess::start(&[]);
    let url = sim.url.clone();
    let (long, warned) = outputs_of(Some(&url), Some(LONG), LONG);
    assert_eq!(warned, 0);
    for key in ["1", "e", "ok", "null", "0.0"] {
        let (short, warned) = outputs_of(Some(&url), Some(key), LONG);
        assert_eq!(warned, 1, "key {key}: one warning line");
        assert_same(&long, &short, &format!("key {key}"));
    }

    let (long, _) = outputs_of(None, Some(LONG), LONG);
    let (short, warned) = outputs_of(None, Some("1"), LONG);
    assert_eq!(warned, 1);
    assert_same(&long, &short, "key 1, built-in simulator");

    const PASSWORD: &str = "long-password-1234";
    let with_password = |pw: &str| url.replace("http://", &format!("http://admin:{pw}@"));
    let (long, _) = outputs_of(Some(&with_password(PASSWORD)), None, PASSWORD);
    let (short, warned) = outputs_of(Some(&with_password("p")), None, PASSWORD);
    assert_eq!(warned, 1);
    assert_same(&long, &short, "password p");
}

/// A key that is a valid metric name, so a hostile /metrics can name a metric after it.
const KEY: &str = "sk_live_7f3a9c1e5b_secret";

/// A loopback server that echoes the Authorization header it got: as the text of a
/// completion (an SSE stream), and as the name of a metric on `/metrics`. Serves at most
/// 200 connections, one request each.
fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200) {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || answer(stream));
        }
    });
    format!("http://{addr}")
}

fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    let mut auth = String::new();
    for _ in 0..100 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("authorization:") {
            auth = line["authorization:".len()..].trim().to_string();
        }
        if head.is_empty() {
            head = line;
        }
    }
    let mut body = vec![0; length.min(1 << 20)];
    let _ = reader.read_exact(&mut body);
    let key = auth.strip_prefix("Bearer ").unwrap_or(&auth).to_string();
    let (kind, body) = if head.starts_with("GET /metrics") {
        (
            "text/plain",
            format!("{key} 1\nvllm:num_requests_running 0\n"),
        )
    } else if head.starts_with("POST") {
        let event = serde_json::json!({"choices": [{"index": 0, "text": format!("echo {key}")}]});
        (
            "text/event-stream",
            format!("data: {event}\n\ndata: [DONE]\n\n"),
        )
    } else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A scenario that logs and notes, from `on_response`, the text the server answered.
const ECHO_SCENARIO: &str = r#"
fn describe() { #{ name: "echo_log", description: "Logs what the server said." } }
fn phases() { [#{ name: "p", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 4 }] }
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 4 } }
fn on_response(o) { log("heard " + o.text); print(o.text); note("heard", o.text); }
"#;

/// A server that echoes the key into the answer's text and names a metric after it: the
/// scenario's `log()` lines (on stderr), its notes and server_metrics.jsonl hold no part of
/// it, though the scenario did hear it.
#[test]
fn log_lines_and_server_metrics_hold_no_secret() {
    let url = echo_server();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("echo_log.rhai");
    std::fs::write(&scenario, ECHO_SCENARIO).unwrap();
    let out_dir = dir.path().join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            &scenario.display().to_string(),
            "--target",
            &url,
            "--model",
            "m",
            "--server-metrics",
            &format!("{url}/metrics"),
            "--server-metrics-interval",
            "100ms",
            "--output",
            &out_dir.display().to_string(),
        ])
        .env("OPENAI_API_KEY", KEY)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("heard echo [redacted]"),
        "the log line was not shown: {err}"
    );
    let metrics = std::fs::read_to_string(out_dir.join("server_metrics.jsonl")).unwrap();
    assert!(
        metrics.contains("[redacted]"),
        "the metric was not kept: {metrics:.300}"
    );
    let mut everything = format!("{}{err}{metrics}", stdout(&o));
    for name in ["result.json", "requests.jsonl", "report.html", "report.txt"] {
        everything += &std::fs::read_to_string(out_dir.join(name)).unwrap();
    }
    for piece in ["7f3a9c1e5b", KEY] {
        assert!(!everything.contains(piece), "the key leaked: {piece}");
    }
}
