//! report.html: one self-contained page with the charts, rendered by a real browser
//! (headless Chromium) to prove it draws; plus the CSV and markdown exports beside it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;

/// The Chromium binary on PATH, if any.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs a command to completion, killed after `limit` (a browser must not hang the suite).
fn run_bounded(cmd: &mut Command, limit: Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let pipes = Pipes::take(&mut child);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = pipes.join();
    std::process::Output {
        status,
        stdout: out.into_bytes(),
        stderr: err.into_bytes(),
    }
}

/// Loads the page in headless Chromium: its DOM after load, and a screenshot.
fn render(browser: &str, page: &Path, png: &Path, profile: &Path) -> String {
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--hide-scrollbars",
        "--no-first-run",
    ];
    let profile_arg = format!("--user-data-dir={}", profile.display());
    let shot = run_bounded(
        Command::new(browser)
            .args(common)
            .arg(&profile_arg)
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1280,2600")
            .arg(&url),
        Duration::from_secs(120),
    );
    assert!(
        png.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let dom = run_bounded(
        Command::new(browser)
            .args(common)
            .arg(&profile_arg)
            .arg("--dump-dom")
            .arg(&url),
        Duration::from_secs(120),
    );
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

#[test]
fn a_sweep_writes_a_self_contained_html_report_that_a_browser_renders() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let o = out_dir.display().to_string();
    let run = runner(&[
        &scenario("sweep.rhai"),
        "-p",
        "max_prompts=16",
        "-p",
        "output_tokens=32",
        "--sim-profile",
        "fixed",
        "--server-metrics-interval",
        "100ms",
        "--threshold",
        "p99_ttft_ms<5000",
        "--output",
        &o,
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = out_dir.join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html written");

    // One file, nothing fetched: no scripts, stylesheets, images or links to load.
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import",
    ] {
        assert!(!html.contains(forbidden), "report.html has `{forbidden}`");
    }
    // 2 sweep curves, 4 latency CDFs, 3 time series, 2 of the server's gauges.
    assert_eq!(html.matches("<svg").count(), 11);
    for title in [
        "Output token throughput over phases",
        "TTFT over phases",
        "TTFT CDF",
        "TPOT CDF",
        "ITL CDF",
        "E2EL CDF",
        "Output token throughput",
        "Requests in flight",
        "Send lateness",
        "Server: requests running and waiting",
        "Server: KV cache use",
        "Serving Benchmark Result",
        "p99_ttft_ms&lt;5000",
    ] {
        assert!(html.contains(title), "report.html lacks `{title}`");
    }
    for phase in [
        "1 prompts",
        "2 prompts",
        "4 prompts",
        "8 prompts",
        "16 prompts",
    ] {
        assert!(html.contains(phase), "report.html lacks phase `{phase}`");
    }
    // The x axis of the sweep curves is labelled with numbers of prompts.
    assert!(html.contains("number of prompts"));
    // No request named a session: no session section.
    assert!(!html.contains("TTFT by turn index") && !html.contains("<h2>Sessions"));

    // The exports beside it: one CSV row per request, the result as markdown.
    let csv = std::fs::read_to_string(out_dir.join("requests.csv")).expect("requests.csv");
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("phase,phase_name,index,"));
    assert_eq!(rows.len(), 1 + 1 + 2 + 4 + 8 + 16);
    assert!(rows[1..].iter().all(|r| r.contains(",ok,200,")), "{csv}");
    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("report.md");
    assert!(md.starts_with("# Benchmark result: sweep"));
    assert_eq!(
        md.matches("============ Serving Benchmark Result").count(),
        5
    );
    assert!(md.contains("| `p99_ttft_ms<5000` | 16 prompts |"), "{md}");
    assert!(!md.contains("## Sessions"), "{md}");

    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("RUNNER_REQUIRE_CHROMIUM").is_none(),
            "RUNNER_REQUIRE_CHROMIUM is set but no chromium is on PATH"
        );
        println!("SKIPPED the browser check: no `chromium` on PATH (apt-get install chromium)");
        return;
    };
    let png = dir.path().join("report.png");
    let dom = render(browser, &page, &png, &dir.path().join("profile"));
    // The browser parsed every chart.
    assert_eq!(dom.matches("<svg").count(), 11, "{dom}");
    let bytes = std::fs::read(&png).expect("screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A blank 1280×2600 page compresses to a few KB; charts and tables do not.
    assert!(
        bytes.len() > 60_000,
        "screenshot only {} bytes",
        bytes.len()
    );
    // Kept for a person to look at (target/ is not in git).
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    if std::fs::copy(&png, &keep).is_ok() {
        println!("screenshot of report.html: {}", keep.display());
    }
}

#[test]
fn a_session_run_reports_its_sessions_in_every_format_and_a_browser_draws_the_turn_chart() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let o = out_dir.display().to_string();
    let fixture = fixture("session_report.rhai");
    let run = runner(&[
        &fixture,
        "--sim-profile",
        "fixed",
        "--api",
        "chat",
        "--output",
        &o,
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));

    // Four sessions of three turns: the text block after the extras, in the 40/10 rows.
    let text = std::fs::read_to_string(out_dir.join("report.txt")).expect("report.txt");
    assert_eq!(report_row(&text, "Sessions:"), Some(4));
    assert_eq!(report_row(&text, "Session requests:"), Some(12));
    assert_eq!(report_row(&text, "Max requests per session:"), Some(3));
    let extras = text.find("Runner extras").expect("extras");
    let block = text.find("-- Sessions --").expect("the Sessions block");
    assert!(
        extras < block && text.contains("TTFT by Turn Index"),
        "{text}"
    );

    // result.json: runner.sessions, one row per turn index, the prompt growing by turn.
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("result.json")).unwrap())
            .expect("result.json");
    let sessions = &result["runner"]["sessions"];
    assert_eq!(
        (sessions["sessions"].as_u64(), sessions["requests"].as_u64()),
        (Some(4), Some(12))
    );
    assert_eq!(sessions["requests_per_session"]["mean"], 3.0);
    // Two waits of 20 ms in each session, none for tools (the answers made none we count).
    assert!(
        (num(&sessions["think_ms"], "total") + num(&sessions["tool_wait_ms"], "total") - 160.0)
            .abs()
            < 1e-6
    );
    let turns = sessions["turns"].as_array().expect("turns");
    let prompt: Vec<f64> = turns.iter().map(|t| num(t, "mean_input_tokens")).collect();
    assert_eq!(turns.len(), 3);
    assert!(prompt[0] < prompt[1] && prompt[1] < prompt[2], "{prompt:?}");
    assert!(turns
        .iter()
        .all(|t| t["requests"] == 4 && num(&t["ttft"], "mean_ms") > 0.0));

    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("report.md");
    assert!(
        md.contains("## Sessions: sessions") && md.contains("| Sessions | 4 |"),
        "{md}"
    );
    assert!(md.contains("### TTFT by turn index"), "{md}");
    let page = out_dir.join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html");
    // The session table and its chart, beside the 4 CDFs, 3 time series and 2 gauges.
    for wanted in [
        "<h2>Sessions</h2>",
        "TTFT by turn index",
        "<th>Sessions</th><td>4</td>",
    ] {
        assert!(html.contains(wanted), "report.html lacks `{wanted}`");
    }
    assert_eq!(html.matches("<svg").count(), 10);
    browser_draws(dir.path(), &page, 10);
}

/// With Chromium on PATH, it renders `page` with `charts` charts, to a non-blank screenshot.
fn browser_draws(dir: &Path, page: &Path, charts: usize) {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("RUNNER_REQUIRE_CHROMIUM").is_none(),
            "RUNNER_REQUIRE_CHROMIUM is set but no chromium is on PATH"
        );
        println!("SKIPPED the browser check: no `chromium` on PATH (apt-get install chromium)");
        return;
    };
    let png = dir.join("report.png");
    let dom = render(browser, page, &png, &dir.join("profile"));
    assert_eq!(dom.matches("<svg").count(), charts, "{dom}");
    assert!(
        dom.contains("TTFT by turn index") && dom.contains("mean TTFT") && dom.contains("P99 TTFT")
    );
    let bytes = std::fs::read(&png).expect("screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 60_000,
        "screenshot only {} bytes",
        bytes.len()
    );
}
