//! Nothing that comes in can exhaust the runner's memory: under a 1 GiB memory cgroup, an
//! endless `/v1/models`, a registry's endless manifest, token or error body, a `/metrics`
//! inventing new names at every scrape, a Rhai script holding 80 strings of 52 MB and
//! notes of 52 MB or by the thousand each end with one `error:` line (exit 1) or one
//! warning, in about a second (each run prints its time; the bound is 30 s, for a busy
//! machine), and the kernel kills nothing. The cap is a cgroup (v2's
//! memory.max, else v1's memory.limit_in_bytes): an address-space limit would break
//! Wasmtime's reservations. Without either the tests say so and pass, unless
//! `RUNNER_REQUIRE_MEMORY_CGROUP=1` (`.ci/run` sets it: CI runs as root, and a Debian 12
//! machine like this one mounts cgroup v1's memory controller, where root makes one);
//! each run tells the CI log its time and its cgroup.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{scenario, skip_unless_required, stderr, tell};

const CAP_BYTES: u64 = 1 << 30;

/// A memory cgroup of its own, capped at [`CAP_BYTES`], removed when dropped.
struct MemoryCap {
    dir: PathBuf,
    /// The file that counts the kernel's OOM kills in it.
    events: PathBuf,
}

static CAPS: AtomicUsize = AtomicUsize::new(0);

impl MemoryCap {
    /// A fresh capped cgroup, or `None` (said on stderr) where this machine has none.
    fn new() -> Option<MemoryCap> {
        let name = format!(
            "runner-e2e-{}-{}",
            std::process::id(),
            CAPS.fetch_add(1, Ordering::Relaxed)
        );
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let (root, limit, swap, events) = if v2 {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
            (
                "/sys/fs/cgroup",
                "memory.max",
                "memory.swap.max",
                "memory.events",
            )
        } else {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.memsw.limit_in_bytes",
                "memory.oom_control",
            )
        };
        let dir = PathBuf::from(root).join(name);
        let made = std::fs::create_dir(&dir)
            .and_then(|_| std::fs::write(dir.join(limit), CAP_BYTES.to_string()));
        if let Err(e) = made {
            let _ = std::fs::remove_dir(&dir);
            skip_unless_required(
                "RUNNER_REQUIRE_MEMORY_CGROUP",
                &format!("no memory cgroup can be made under {root} ({e})"),
            );
            return None;
        }
        // No swap to spill into: the cap is on memory itself.
        let swap_cap = if v2 { 0 } else { CAP_BYTES };
        let _ = std::fs::write(dir.join(swap), swap_cap.to_string());
        let events = dir.join(events);
        Some(MemoryCap { dir, events })
    }

    /// Runs `runner ARGS…` inside the cgroup, with `env` set; checks it ended (within 30 s:
    /// a hang, not a slow machine) and that nothing in the cgroup was killed for memory.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let cache = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
            .arg(&self.dir)
            .arg(env!("CARGO_BIN_EXE_runner"))
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("RUNNER_MEMORY_LIMIT_MIB")
            .env("RUST_BACKTRACE", "0")
            .env("RUNNER_CACHE_DIR", cache.path())
            .envs(env.iter().copied())
            .output()
            .expect("sh starts");
        let took = start.elapsed();
        let err = stderr(&out);
        assert_eq!(self.oom_kills(), 0, "killed for memory: {err}");
        assert!(out.status.code().is_some(), "{:?}: {err}", out.status);
        // Each ends in about a second on a quiet machine (figures in the note of issue 40:
        // 0.5-1.0 s); the bound catches a run that hangs or thrashes on what came in, with
        // room for a machine doing other work (timed figures come from benchmarks).
        let test = std::thread::current().name().unwrap_or("?").to_string();
        tell(&format!(
            "{test}: ended in {took:?} under the 1 GiB cap of {}",
            self.dir.display()
        ));
        assert!(took < Duration::from_secs(30), "took {took:?}: {err}");
        out
    }

    fn oom_kills(&self) -> u64 {
        let text = std::fs::read_to_string(&self.events).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        // The run has exited; its cgroup empties a moment later.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Exit 1 and exactly one `error:` line holding `wanted`; no panic, no abort.
fn assert_one_error(out: &Output, wanted: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains(wanted), "`{wanted}` missing: {err}");
    for bad in ["panicked", "memory allocation of", "abort"] {
        assert!(!err.contains(bad), "`{bad}` in: {err}");
    }
}

/// What a hostile server answers to one request path.
type Answer = fn(&str, &str, &mut TcpStream);

/// A server on loopback answering each request (one per connection) with `answer`;
/// at most 64 connections. Its address.
fn hostile_server(answer: Answer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let me = addr.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let me = me.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                answer(&me, &path, &mut stream);
            });
        }
    });
    addr
}

/// A status line and headers, then `prefix` and filler until the reader goes away (at
/// most 8 GiB or 20 s): a body with no end.
fn endless(stream: &mut TcpStream, status: &str, content_type: &str, prefix: &str) {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n{prefix}"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let filler = vec![b'a'; 64 << 10];
    let start = Instant::now();
    for _ in 0..(8u64 << 30) / filler.len() as u64 {
        if stream.write_all(&filler).is_err() || start.elapsed() > Duration::from_secs(20) {
            return;
        }
    }
}

fn short(stream: &mut TcpStream, status: &str, headers: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[test]
fn an_endless_model_list_is_refused_at_its_limit() {
    let Some(cap) = MemoryCap::new() else { return };
    let addr = hostile_server(|_, path, s| match path {
        "/v1/models" => endless(
            s,
            "200 OK",
            "application/json",
            r#"{"object":"list","data":[{"id":""#,
        ),
        _ => short(s, "404 Not Found", "", "{}"),
    });
    let out_dir = tempfile::tempdir().unwrap();
    let target = format!("http://{addr}");
    let out = cap.run(
        &[
            &scenario("throughput.rhai"),
            "--target",
            &target,
            "-p",
            "requests=1",
            "--output",
            &out_dir.path().display().to_string(),
        ],
        &[],
    );
    assert_one_error(&out, "16 MiB");
}

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// `runner pull` of a package from the registry at `addr`.
fn pull(cap: &MemoryCap, addr: &str) -> Output {
    let out_dir = tempfile::tempdir().unwrap();
    let reference = format!("oci://{addr}/bench/pkg:1.0");
    let target = out_dir.path().join("pkg.tar").display().to_string();
    cap.run(&["pull", &reference, "-o", &target], &[])
}

#[test]
fn a_registrys_endless_manifest_token_or_error_body_ends_the_pull_with_one_line() {
    let Some(cap) = MemoryCap::new() else { return };
    let manifest = hostile_server(|_, path, s| match path {
        "/v2/" => short(s, "200 OK", "", "{}"),
        _ => endless(s, "200 OK", MANIFEST, r#"{"schemaVersion":2,"x":""#),
    });
    let token = hostile_server(|me, path, s| match path {
        "/v2/" => {
            let challenge =
                format!("www-authenticate: Bearer realm=\"http://{me}/token\",service=\"s\"\r\n");
            short(s, "401 Unauthorized", &challenge, "{}")
        }
        p if p.starts_with("/token") => endless(s, "200 OK", "application/json", r#"{"token":""#),
        _ => short(s, "401 Unauthorized", "", "{}"),
    });
    let error = hostile_server(|_, path, s| match path {
        "/v2/" => short(s, "200 OK", "", "{}"),
        _ => endless(
            s,
            "500 Internal Server Error",
            "application/json",
            r#"{"errors":[{"message":""#,
        ),
    });
    for addr in [manifest, token, error] {
        let out = pull(&cap, &addr);
        assert_one_error(&out, "");
        let err = stderr(&out);
        assert!(
            err.contains("MiB") || err.contains("out of memory"),
            "{addr}: {err}"
        );
    }
}

/// A `/metrics` whose every scrape names 20,000 series never seen before.
fn inventive_metrics() -> String {
    static SCRAPES: AtomicUsize = AtomicUsize::new(0);
    let addr = hostile_server(|_, _, s| {
        let n = SCRAPES.fetch_add(1, Ordering::Relaxed);
        let mut body = String::new();
        for i in 0..20_000 {
            body.push_str(&format!("invented_{n}_{i} 1\n"));
        }
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    format!("http://{addr}/metrics")
}

#[test]
fn a_metrics_endpoint_inventing_names_is_kept_to_a_bounded_number_of_series() {
    let Some(cap) = MemoryCap::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("paced.rhai");
    std::fs::write(
        &script,
        r#"fn describe() { #{ name: "paced", params: [] } }
fn phases() { [#{ name: "main", arrival: #{ process: "poisson", rate: 40.0 }, max_requests: 30 }] }
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 2 } }
"#,
    )
    .unwrap();
    let metrics = inventive_metrics();
    let out_dir = dir.path().join("out").display().to_string();
    let out = cap.run(
        &[
            &script.display().to_string(),
            "--sim-profile",
            "zero",
            "--server-metrics",
            &metrics,
            "--server-metrics-interval",
            "100ms",
            "--output",
            &out_dir,
        ],
        &[],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("series")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].starts_with("warning: ") && warnings[0].contains("10000"));
}

/// A Rhai scenario whose `next_request` runs `body` first.
fn hog(dir: &tempfile::TempDir, body: &str) -> String {
    let path = dir.path().join("hog.rhai");
    std::fs::write(
        &path,
        format!(
            r#"fn describe() {{ #{{ name: "hog", params: [] }} }}
fn phases() {{ [#{{ name: "main", arrival: #{{ process: "burst" }}, max_requests: 1 }}] }}
fn next_request(phase, index) {{
{body}
    #{{ prompt: "hi", max_tokens: 2 }}
}}
"#
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Rhai that makes `s`, a string of 52 MB, in 19 doublings (a `pad` of that size takes a
/// second).
const FIFTY_MB: &str = "    let s = \"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\";
    for i in 0..19 { s += s; }
";

fn run_hog(cap: &MemoryCap, body: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let script = hog(&dir, body);
    let out_dir = dir.path().join("out").display().to_string();
    cap.run(
        &[&script, "--sim-profile", "zero", "--output", &out_dir],
        &[],
    )
}

/// 80 locals of 52 MB in one call: the call is stopped at its heap limit (a quarter of
/// the 768 MiB budget), in one line naming the scenario, before the budget is reached.
#[test]
fn rhai_locals_of_52_mb_each_are_stopped_at_the_calls_heap_limit() {
    let Some(cap) = MemoryCap::new() else { return };
    let lets: String = (0..80)
        .map(|i| format!("    let a{i} = s + \"{i}\";\n"))
        .collect();
    let out = run_hog(&cap, &format!("{FIFTY_MB}{lets}"));
    assert_one_error(
        &out,
        "hog.rhai: error in `next_request`: the call added more than 192 MiB to the heap",
    );
}

#[test]
fn rhai_notes_are_refused_past_their_bytes_or_their_count() {
    let Some(cap) = MemoryCap::new() else { return };
    let big = format!("{FIFTY_MB}    for i in 0..80 {{ note(`big${{i}}`, s + i); }}");
    assert_one_error(&run_hog(&cap, &big), "16 MiB");
    let many = "    for i in 0..50000 { note(`n${i}`, i); }";
    assert_one_error(&run_hog(&cap, many), "1000 notes");
}
