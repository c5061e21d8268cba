//! report.html: one self-contained page with the charts, rendered by a real browser
//! (headless Chromium) to prove it draws: a single-phase run gets every chart a
//! multi-phase one does, each with its numbers beside it, and a `--repeat` series its
//! intervals as error bars; screenshots are kept in target/tmp/html-screens/. Plus the CSV
//! and markdown exports beside the page.

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
            .arg("--window-size=1280,6000")
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

    assert_self_contained(&html);
    // 2 sweep curves and every run's charts but the prefix-cache hit rate: the `fixed`
    // profile has no prefix cache, so the server counts no query.
    let mut charts = vec!["sweep-throughput", "sweep-ttft"];
    charts.extend(EVERY_RUN.iter().filter(|id| **id != "server-hit-rate"));
    assert_charts_drawn(&html, &charts);
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
    assert_charts_drawn(&dom, &charts);
    let bytes = std::fs::read(&png).expect("screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A blank 1280×6000 page compresses to a few KB; charts and tables do not.
    assert!(
        bytes.len() > 60_000,
        "screenshot only {} bytes",
        bytes.len()
    );
    keep_screenshot(&png, "sweep-by-prompts.png");
}

/// Keeps a screenshot for a person to look at, in target/tmp/html-screens/ (target/ is
/// not in git).
fn keep_screenshot(png: &Path, name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-screens");
    let keep = dir.join(name);
    if std::fs::create_dir_all(&dir).is_ok() && std::fs::copy(png, &keep).is_ok() {
        println!("screenshot of report.html: {}", keep.display());
    }
}

/// The charts every run's page has, by the id of their `<figure>`.
const EVERY_RUN: [&str; 12] = [
    "ttft-cdf",
    "tpot-cdf",
    "itl-cdf",
    "e2el-cdf",
    "ttft-by-request",
    "output-throughput",
    "request-throughput",
    "in-flight",
    "send-lateness",
    "server-queue",
    "server-kv",
    "server-hit-rate",
];

/// The `<figure id="chart-ID">` of `dom`, up to its end.
fn figure<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let start = dom.find(&format!("<figure class=\"panel\" id=\"chart-{id}\">"))?;
    let end = dom[start..].find("</figure>")? + start;
    Some(&dom[start..end])
}

/// What a chart drew of its data: dots in a line colour, and paths in one that are not a
/// legend's sample (two points at one height; the axes and grid are black and grey). A
/// path of two points at two heights is data: the CDF of a phase whose requests all took
/// the same time is one vertical step.
fn marks(figure: &str) -> usize {
    const LINE_COLOURS: [&str; 3] = ["#1F77B4", "#FF7F0E", "#2CA02C"];
    let coloured = |tag: &str| {
        LINE_COLOURS
            .iter()
            .any(|c| tag.contains(&format!("\"{c}\"")))
    };
    let dots = figure
        .split("<circle")
        .skip(1)
        .filter(|t| coloured(&t[..t.find('>').unwrap_or(t.len())]))
        .count();
    let paths = figure
        .split("<polyline")
        .skip(1)
        .map(|t| &t[..t.find('>').unwrap_or(t.len())])
        .filter(|t| coloured(t))
        .filter(|t| {
            let points = t.split("points=\"").nth(1).unwrap_or("");
            let points = &points[..points.find('"').unwrap_or(points.len())];
            let heights: Vec<&str> = points
                .split_whitespace()
                .map(|p| p.split(',').nth(1).unwrap_or(""))
                .collect();
            heights.len() >= 3 || (heights.len() == 2 && heights[0] != heights[1])
        })
        .count();
    dots + paths
}

/// Every chart of `ids` is in the browser's DOM, drew marks of its data, and has a table
/// of numbers under it; no other chart is there.
fn assert_charts_drawn(dom: &str, ids: &[&str]) {
    for id in ids {
        let f = figure(dom, id).unwrap_or_else(|| panic!("no chart `{id}` in the page"));
        assert_eq!(f.matches("<svg").count(), 1, "chart `{id}`");
        assert!(marks(f) > 0, "chart `{id}` drew none of its data: {f}");
        let rows = f.split("<table class=\"figures\">").nth(1).unwrap_or("");
        assert!(
            rows.matches("<td>").count() >= 2,
            "chart `{id}` has no numbers beside it: {f}"
        );
    }
    assert_eq!(
        dom.matches("<figure class=\"panel\"").count(),
        ids.len(),
        "{dom}"
    );
}

/// The browser on PATH, or `None` with the skip said (an error when CI requires it).
fn browser_or_skip() -> Option<&'static str> {
    let browser = chromium();
    if browser.is_none() {
        assert!(
            std::env::var_os("RUNNER_REQUIRE_CHROMIUM").is_none(),
            "RUNNER_REQUIRE_CHROMIUM is set but no chromium is on PATH"
        );
        println!("SKIPPED the browser check: no `chromium` on PATH (apt-get install chromium)");
    }
    browser
}

/// Runs `args` into `dir/NAME`, then renders its report.html in the browser: the DOM
/// after load, and the screenshot kept as `NAME.png`; without a browser, the page as
/// written.
fn run_and_render(dir: &Path, name: &str, args: &[&str]) -> String {
    let out_dir = dir.join(name);
    let o = out_dir.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--output", &o, "--quiet"]);
    let run = runner(&all);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = out_dir.join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html written");
    assert_self_contained(&html);
    let Some(browser) = browser_or_skip() else {
        return html;
    };
    let png = dir.join(format!("{name}.png"));
    let dom = render(browser, &page, &png, &dir.join("profile"));
    let bytes = std::fs::read(&png).expect("screenshot");
    assert!(
        bytes.len() > 60_000,
        "screenshot only {} bytes",
        bytes.len()
    );
    keep_screenshot(&png, &format!("{name}.png"));
    dom
}

/// One file, nothing fetched: no scripts, stylesheets, images or links to load.
fn assert_self_contained(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import",
    ] {
        assert!(!html.contains(forbidden), "report.html has `{forbidden}`");
    }
}

#[test]
fn a_single_phase_page_draws_every_chart_a_multi_phase_one_does_with_its_numbers() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let scrape = ["--server-metrics-interval", "100ms"];
    // One phase, on the simulator's default profile (a prefix cache, a KV gauge).
    let single = [
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=48".into(),
        "-p".into(),
        "output_tokens=24".into(),
        "-p".into(),
        "max_concurrency=8".into(),
    ];
    let mut args: Vec<&str> = single.iter().map(String::as_str).collect();
    args.extend(scrape);
    let dom = run_and_render(dir.path(), "single-phase", &args);
    assert_charts_drawn(&dom, &EVERY_RUN);
    assert!(dom.contains("<h2>Summary</h2>") && dom.contains("Serving Benchmark Result"));
    assert!(
        dom.contains("<h2>Steady state</h2>"),
        "the single phase's window"
    );
    // Issue 58: the Summary's throughputs had no units, and the chart's peak (its bins)
    // and the report's (1 s windows) disagreed without saying why.
    for unit in [
        "<th>request throughput (req/s)</th>",
        "<th>output throughput (tok/s)</th>",
    ] {
        assert!(dom.contains(unit), "{unit}");
    }
    let output = figure(&dom, "output-throughput").expect("output throughput");
    assert!(
        output.contains("<th>peak (") && output.contains(" s bin)</th>"),
        "{output}"
    );
    assert!(
        output.contains("<td>over 1 s windows (Peak output token throughput)</td>"),
        "{output}"
    );

    // Three phases of 16 requests each, sharing a prompt prefix: the curves over phases
    // are by phase (16, 16, 16 prompts would be one vertical line), the hit rate above 0.
    let multi = fixture("concurrency_steps.rhai");
    let mut args = vec![multi.as_str()];
    args.extend(scrape);
    let dom = run_and_render(dir.path(), "multi-phase", &args);
    let mut ids = vec!["sweep-throughput", "sweep-ttft"];
    ids.extend(EVERY_RUN);
    assert_charts_drawn(&dom, &ids);
    let sweep = figure(&dom, "sweep-ttft").expect("sweep");
    assert!(
        sweep.contains(">phase<") && sweep.contains("concurrency 8"),
        "{sweep}"
    );
    assert!(!sweep.contains("number of prompts"), "{sweep}");
    let hits = figure(&dom, "server-hit-rate").expect("hit rate");
    assert!(
        hits.contains("<td>concurrency 16</td>") && !hits.contains("<td>0.00</td>"),
        "{hits}"
    );
}

#[test]
fn a_repeated_run_page_draws_each_headline_with_its_interval() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let s = scenario("throughput.rhai");
    let args = [
        s.as_str(),
        "-p",
        "requests=16",
        "-p",
        "output_tokens=16",
        "-p",
        "input_tokens=256",
        "-p",
        "max_concurrency=8",
        "--repeat",
        "3",
    ];
    let dom = run_and_render(dir.path(), "repeat", &args);
    let ids = [
        "repeat-request-throughput",
        "repeat-output-throughput",
        "repeat-ttft",
        "repeat-tpot",
        "repeat-itl",
        "repeat-e2el",
    ];
    assert_charts_drawn(&dom, &ids);
    // An error bar is three strokes in the line's colour: its stem and two caps.
    let ttft = figure(&dom, "repeat-ttft").expect("ttft");
    let bars = ttft
        .matches("<line opacity=\"1\" stroke=\"#1F77B4\"")
        .count();
    assert_eq!(bars, 3, "{ttft}");
    assert!(ttft.contains("<td>Mean TTFT (ms)</td>") && ttft.contains(" to "));
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
    // The session table and its chart, beside 11 panels: 4 CDFs, TTFT by request, 4
    // series over time and 2 of the server's gauges (the `fixed` profile counts no
    // prefix-cache query).
    for wanted in [
        "<h2>Sessions</h2>",
        "TTFT by turn index",
        "<th>Sessions</th><td>4</td>",
    ] {
        assert!(html.contains(wanted), "report.html lacks `{wanted}`");
    }
    assert_eq!(html.matches("<svg").count(), 12);
    browser_draws(dir.path(), &page, 12);
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
