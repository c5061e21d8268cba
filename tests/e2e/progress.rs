//! The progress display: drawn when stdout is a terminal, never into a pipe or with --quiet.

use std::process::Command;

use crate::support::*;

/// The run's arguments, quoted for a shell.
fn shell_line(args: &[&str]) -> String {
    std::iter::once(env!("CARGO_BIN_EXE_runner"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the binary on a pseudo-terminal (util-linux `script`); `None` without `script`.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let out = Command::new("script")
        // A wide terminal, so the whole status line shows.
        .args([
            "-q",
            "-e",
            "-c",
            &format!("stty rows 40 cols 200; {}", shell_line(args)),
            "/dev/null",
        ])
        .env("TERM", "xterm")
        .env_remove("OPENAI_API_KEY")
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// 40 requests, 10 at a time, 0.3 s each: requests finish while the display is drawn.
const RUN: [&str; 10] = [
    "",
    "-p",
    "requests=40",
    "-p",
    "output_tokens=32",
    "-p",
    "max_concurrency=10",
    "--sim-profile",
    "fixed",
    "--sim-itl-ms=8",
];

#[test]
fn progress_shows_on_a_terminal_only() {
    let _quiet = exclusive();
    let path = scenario("throughput.rhai");
    let mut args = RUN;
    args[0] = &path;

    // Piped: the report only.
    let piped = runner(&args);
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert!(!stderr(&piped).contains("phase 1/1"), "{}", stderr(&piped));
    assert!(!stdout(&piped).contains("phase 1/1"));

    let Some(screen) = on_a_terminal(&args) else {
        skip_unless_required(
            "RUNNER_REQUIRE_TERMINAL",
            "the terminal check: no `script` (util-linux) on PATH",
        );
        return;
    };
    // Phase, counts, time left, live throughput and TTFT.
    assert!(screen.contains("phase 1/1 throughput"), "{screen}");
    assert!(screen.contains("sent "), "{screen}");
    assert!(screen.contains(" left"), "{screen}");
    assert!(screen.contains("tok/s | TTFT p50 "), "{screen}");
    assert!(screen.contains("Serving Benchmark Result"));

    let mut quiet: Vec<&str> = args.to_vec();
    quiet.push("--quiet");
    let screen = on_a_terminal(&quiet).expect("script ran before");
    assert!(!screen.contains("phase 1/1"), "{screen}");
    assert!(screen.contains("Serving Benchmark Result"));
    tell("terminal check: the progress display drawn on a pseudo-terminal, not with --quiet");
}
