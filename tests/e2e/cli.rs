//! Bad input gets one clear line on stderr and a non-zero exit, never a panic.

use std::io::{Read, Write};
use std::net::TcpListener;

use crate::support::*;

fn fails_with(args: &[&str], needles: &[&str]) {
    let out = runner(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "runner {args:?} should fail");
    assert_eq!(out.status.code(), Some(1), "exit code for {args:?}: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line, got: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected `{n}` in: {err}");
    }
}

#[test]
fn missing_scenario_file() {
    fails_with(
        &["/nonexistent/x.rhai"],
        &["/nonexistent/x.rhai", "not found"],
    );
}

#[test]
fn syntax_error_names_line_and_column() {
    fails_with(
        &[&fixture("syntax_error.rhai")],
        &["syntax_error.rhai:6:13", "syntax error"],
    );
}

#[test]
fn runtime_error_names_function_and_line() {
    fails_with(
        &[&fixture("runtime_error.rhai"), "-q"],
        &["runtime_error.rhai:6:", "next_request", "no_such_method"],
    );
}

#[test]
fn malformed_request_names_the_field() {
    fails_with(
        &[&fixture("bad_request.rhai"), "-q"],
        &["next_request", "`max_tokens` must be a positive integer"],
    );
}

#[test]
fn endless_loop_is_stopped() {
    // Rhai reports the operation limit without a source position; file and function suffice.
    fails_with(
        &[&fixture("endless.rhai"), "-q"],
        &["endless.rhai", "`next_request`", "operations", "stopped"],
    );
}

#[test]
fn unknown_parameter_lists_the_known_ones() {
    fails_with(
        &[&scenario("throughput.rhai"), "-p", "request=5"],
        &["unknown parameter `request`", "requests, input_tokens"],
    );
}

#[test]
fn mistyped_parameter() {
    fails_with(
        &[&scenario("throughput.rhai"), "-p", "requests=many"],
        &["`requests`", "must be an integer"],
    );
}

#[test]
fn refused_connection() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("http://127.0.0.1:{port}");
    fails_with(
        &[&scenario("throughput.rhai"), "--target", &target, "-q"],
        &["cannot reach the target", &target],
    );
}

#[test]
fn non_openai_server() {
    // A web server that answers every request with an HTML page.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = "<html><body>hello</body></html>";
            let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    fails_with(
        &[&scenario("throughput.rhai"), "--target", &target, "-q"],
        &["OpenAI", &target],
    );
}

#[test]
fn bad_target_url() {
    fails_with(
        &[&scenario("throughput.rhai"), "--target", "not a url", "-q"],
        &["invalid target URL"],
    );
}

#[test]
fn info_lists_parameters_with_defaults() {
    let out = runner(&["info", &scenario("long_context.rhai")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "long_context",
        "requests",
        "100",
        "input_tokens",
        "32000",
        "output_tokens",
        "rate",
        "seed",
        "42",
    ] {
        assert!(text.contains(needle), "info lacks {needle}:\n{text}");
    }
}

#[test]
fn every_bundled_scenario_describes_itself() {
    for name in [
        "long_context",
        "throughput",
        "generation_heavy",
        "sharegpt",
        "sweep",
        "poisson_duration",
    ] {
        let out = runner(&["info", &scenario(&format!("{name}.rhai"))]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(stdout(&out).starts_with(name), "{name}: {}", stdout(&out));
    }
}

/// `runner sim` as a separate server process, driven with --target, --model and --api chat.
#[test]
fn sweep_against_a_standalone_server_with_chat() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            "sim",
            "--port",
            &port.to_string(),
            "--sim-model",
            "some/model",
            "--sim-profile",
            "fixed",
            "--sim-ttft-ms",
            "20",
            "--sim-itl-ms",
            "2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim starts");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "sim did not start listening"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let target = format!("http://127.0.0.1:{port}");
    let out = runner(&[
        &scenario("sweep.rhai"),
        "--target",
        &target,
        "--model",
        "some/model",
        "--api",
        "chat",
        "-p",
        "max_prompts=8",
        "-p",
        "output_tokens=8",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text.matches("============ Serving Benchmark Result ============")
            .count(),
        4,
        "{text}"
    );
    assert!(
        text.contains("some/model") && text.contains(&target) && text.contains("chat"),
        "{text}"
    );
    // The role-only opening delta of the chat stream is not the first token: TTFT ≥ 20 ms.
    let ttft_row = text
        .lines()
        .find(|l| l.starts_with("Mean TTFT (ms):"))
        .unwrap();
    let ttft: f64 = ttft_row[41..].trim().parse().unwrap();
    assert!(ttft >= 19.5, "{ttft_row}");
}

#[test]
fn bad_request_id_prefix() {
    fails_with(
        &[
            &scenario("throughput.rhai"),
            "--request-id-prefix",
            "two words",
            "-q",
        ],
        &["--request-id-prefix `two words`", "visible ASCII"],
    );
}

#[test]
fn requests_carry_a_request_id_new_for_every_run() {
    let ids = || {
        let (_, _, records) = run_records(&[
            &fixture("truth.rhai"),
            "-p",
            "concurrency=2",
            "-p",
            "requests=2",
            "--sim-profile",
            "zero",
            "-q",
        ]);
        records
            .iter()
            .map(|r| {
                let id = r["request_id"].as_str().expect("request_id").to_string();
                let want_end = format!("-{}-{}", r["phase"], r["index"]);
                assert!(id.ends_with(&want_end), "{id} names {want_end}");
                id.strip_suffix(&want_end).unwrap().to_string()
            })
            .collect::<Vec<String>>()
    };
    let first = ids();
    assert_eq!(first.len(), 4, "warm-up and measured requests");
    let prefix = &first[0];
    assert!(
        prefix.len() == "runner-".len() + 8
            && prefix.starts_with("runner-")
            && prefix[7..].chars().all(|c| c.is_ascii_hexdigit()),
        "default prefix: runner- and 8 hex digits, got {prefix}"
    );
    assert!(first.iter().all(|p| p == prefix), "one prefix per run");
    assert_ne!(&ids()[0], prefix, "a new prefix for the next run");
}

/// Issue 58 item 8: a string where a number belongs is named as a string, not shown as
/// the number it looks like.
#[test]
fn a_string_max_tokens_is_named_as_a_string() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("string_tokens.rhai");
    std::fs::write(
        &path,
        r#"
fn describe() { #{ name: "string_tokens", description: "max_tokens as a string." } }
fn phases() { [#{ name: "main", arrival: #{ process: "closed", concurrency: 1 }, max_requests: 1 }] }
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: "16" } }
"#,
    )
    .unwrap();
    fails_with(
        &[&path.display().to_string(), "-q"],
        &[
            "`max_tokens` must be a positive integer",
            r#"got the string "16""#,
        ],
    );
}

/// `--target https://…` against a server speaking plain HTTP says so, not what the TLS
/// library saw.
#[test]
fn https_against_plain_http_says_to_use_http() {
    let sim = SimProcess::start(&[]);
    let https = sim.url.replacen("http://", "https://", 1);
    fails_with(
        &[&scenario("throughput.rhai"), "--target", &https, "-q"],
        &["answered in plain HTTP", &format!("use {}", sim.url)],
    );
}

/// A base path that answers 404 is named as the thing to check, not `--model`.
#[test]
fn a_wrong_base_path_says_to_check_the_path_not_the_model() {
    let sim = SimProcess::start(&[]);
    let wrong = format!("{}/v2", sim.url);
    let out = runner(&[&scenario("throughput.rhai"), "--target", &wrong, "-q"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line, got: {err}");
    assert!(
        err.contains("HTTP 404") && err.contains("path of --target"),
        "{err}"
    );
    assert!(
        err.contains("/v2/v1/models") && !err.contains("--model"),
        "{err}"
    );
}
