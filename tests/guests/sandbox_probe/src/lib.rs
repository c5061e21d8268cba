//! A scenario that tries, on purpose, what a component from another team must not be
//! able to do. `-p attack=NAME` picks the attempt; the probes report what they saw
//! through the host log, and the tests read it.
//!
//! - `none`: behaves (one small request per index, `requests` of them).
//! - `loop`: `next_request` never returns.
//! - `memory`: `next_request` allocates until the memory cap stops it.
//! - `panic`: `next_request` panics with a known message.
//! - `err`: `next_request` returns an error with a known message.
//! - `files`: reads paths outside its package, and one inside it.
//! - `read`: reads `-p path=P` both ways: `/scenario/P` through WASI, `P` through the host.
//! - `socket`: connects to `-p port=N` on loopback.
//! - `env`: lists its environment and reads the clock.
//! - `synthetic`, `random-text`: ask the host for u32::MAX tokens of text.
//! - `host-loop`: calls the host for text until the call's time limit stops it.
//! - `stack`: recurses until its stack overflows.
//! - `log`: logs five 10 MB messages, then behaves.

use std::hint::black_box;
use std::io::Read;

use bench_scenario_sdk::prelude::*;

struct Probe {
    attack: String,
}

fn attempt(what: &str, result: Result<String, String>) -> String {
    match result {
        Ok(text) => format!("{what}: LEAKED {} bytes", text.len()),
        Err(e) => format!("{what}: refused ({e})"),
    }
}

fn std_read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

impl Scenario for Probe {
    fn describe() -> Description {
        Description::new("sandbox_probe", "Tries what the sandbox must refuse.")
            .param(
                "attack",
                "none",
                "none, loop, memory, panic, files, read, socket or env",
            )
            .param("requests", 3, "requests when behaving")
            .param("port", 0, "loopback port for the socket attempt")
            .param("path", "data/inside.txt", "what the read attempt reads")
    }

    fn new() -> Result<Self, String> {
        Ok(Probe {
            attack: param_str("attack")?,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        match self.attack.as_str() {
            "files" => {
                for line in [
                    attempt("std /etc/passwd", std_read("/etc/passwd")),
                    attempt(
                        "std /scenario/../../../../etc/passwd",
                        std_read("/scenario/../../../../etc/passwd"),
                    ),
                    attempt("std ../outside.txt", std_read("../outside.txt")),
                    attempt("host ../outside.txt", read_file("../outside.txt")),
                    attempt("host /etc/passwd", read_file("/etc/passwd")),
                ] {
                    log(&line);
                }
                // A file beside the component, outside its `data/` folder.
                log(&attempt("std beside", std_read("/scenario/beside.txt")));
                log(&attempt("host beside", read_file("beside.txt")));
                let inside =
                    std_read("/scenario/data/inside.txt").unwrap_or_else(|e| format!("error {e}"));
                log(&format!("std inside: {}", inside.trim()));
                let inside = read_file("data/inside.txt").unwrap_or_else(|e| format!("error {e}"));
                log(&format!("host inside: {}", inside.trim()));
                let write =
                    std::fs::write("/scenario/data/written.txt", "x").map_err(|e| e.to_string());
                log(&attempt(
                    "std write /scenario/data/written.txt",
                    write.map(|_| String::new()),
                ));
            }
            "read" => {
                let path = param_str("path")?;
                let std_path = format!("/scenario/{path}");
                log(&attempt(&format!("std {std_path}"), std_read(&std_path)));
                log(&attempt(&format!("host {path}"), read_file(&path)));
            }
            "socket" => {
                let port = param_i64("port")?;
                let result = std::net::TcpStream::connect(("127.0.0.1", port as u16))
                    .and_then(|mut s| {
                        let mut buf = String::new();
                        s.read_to_string(&mut buf).map(|_| buf)
                    })
                    .map_err(|e| e.to_string());
                log(&attempt("socket 127.0.0.1", result));
            }
            "env" => {
                let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                log(&format!("env: {} variables {:?}", vars.len(), vars));
                log(&format!("args: {:?}", std::env::args().collect::<Vec<_>>()));
                let since = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(-1.0);
                log(&format!("clock: {since:.6} s since 1970"));
            }
            _ => {}
        }
        Ok(vec![Phase::new("probe")
            .closed(1)
            .max_requests(param_u64("requests")?)])
    }

    fn next_request(&mut self, _phase: u32, index: u64) -> Result<Next, String> {
        match self.attack.as_str() {
            "loop" => {
                let mut x = index;
                loop {
                    x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            "memory" => {
                let mut keep: Vec<Vec<u8>> = Vec::new();
                loop {
                    keep.push(Vec::with_capacity(64 << 20));
                    black_box(&keep);
                }
            }
            "panic" => panic!("probe panicked on purpose at request {index}"),
            "err" => Err(format!("probe refused request {index} on purpose")),
            "synthetic" => Ok(Request::text(synthetic_text(u32::MAX)).into()),
            "random-text" => Ok(Request::text(random_token_text(u32::MAX)).into()),
            "host-loop" => {
                let mut total = 0;
                loop {
                    total += black_box(random_token_text(50_000)).len();
                    black_box(total);
                }
            }
            "stack" => Ok(Request::text(format!("{}", deep(black_box(index)))).into()),
            "log" => {
                if index == 0 {
                    let big = "x".repeat(10 << 20);
                    for _ in 0..5 {
                        log(&big);
                    }
                }
                Ok(Request::text(synthetic_text(8)).max_tokens(4).into())
            }
            _ => Ok(Request::text(synthetic_text(8)).max_tokens(4).into()),
        }
    }
}

/// Recurses until the stack runs out; the array keeps each frame large and the work
/// after the call keeps it from becoming a loop.
fn deep(n: u64) -> u64 {
    if n == u64::MAX {
        return 0;
    }
    let frame = black_box([n; 32]);
    deep(black_box(n + 1)).wrapping_mul(frame[1]) ^ frame[(n % 32) as usize]
}

export_scenario!(Probe);
