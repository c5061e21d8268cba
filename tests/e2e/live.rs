//! The live view of a running phase: the panel a terminal shows under the progress bar
//! (read through a real pseudo-terminal as it is drawn, with each frame's arrival time),
//! and the run's own metrics that `--live-metrics` serves while it goes on.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

use crate::support::*;

/// 80 requests offered at 20 req/s on the default simulator profile: the phase lasts
/// about 4 s, with requests finishing and running all along (64 tokens take ~0.5 s).
const RUN: [&str; 9] = [
    "",
    "-p",
    "requests=80",
    "-p",
    "rate=20",
    "-p",
    "output_tokens=64",
    "-p",
    "input_tokens=256",
];

fn run_args(path: &str) -> Vec<&str> {
    let mut args = RUN.to_vec();
    args[0] = path;
    args
}

/// What the terminal received, chunk by chunk, with the moment each chunk arrived.
struct Screen {
    chunks: Vec<(Instant, Vec<u8>)>,
}

/// Runs `runner ARGS…` on a 200-column pseudo-terminal and records all it writes.
fn on_a_pty(args: &[&str]) -> Screen {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_runner"));
    cmd.args(args);
    cmd.cwd(repo());
    cmd.env("TERM", "xterm");
    cmd.env("RUNNER_CACHE_DIR", test_cache_dir());
    cmd.env_remove("OPENAI_API_KEY");
    let mut child = pty.slave.spawn_command(cmd).expect("the runner starts");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("a reader");
    let reading = std::thread::spawn(move || {
        let mut chunks = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        // Ends when the runner has exited and its side of the terminal is closed (EIO).
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            chunks.push((Instant::now(), buf[..n].to_vec()));
        }
        chunks
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the run did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(pty.master);
    let chunks = reading.join().expect("the reader");
    assert!(status.success(), "{status:?}");
    Screen { chunks }
}

/// `text` without terminal control sequences, its runs of blanks made one space.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            // CSI: parameters up to a final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            out.push(' ');
        } else if c.is_whitespace() {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One drawing of the panel: when its first bytes arrived, and what it showed.
struct Frame {
    at: Instant,
    text: String,
}

impl Screen {
    /// Every frame, in order: each starts with the bar's `marker` prefix.
    fn frames(&self, marker: &str) -> Vec<Frame> {
        let mut all = String::new();
        let mut starts = Vec::new();
        for (at, bytes) in &self.chunks {
            let from = all.len().saturating_sub(marker.len());
            all += &String::from_utf8_lossy(bytes);
            let mut i = from;
            while let Some(found) = all[i..].find(marker) {
                starts.push((*at, i + found));
                i += found + marker.len();
            }
        }
        starts.dedup_by_key(|s| s.1);
        let ends = starts.iter().skip(1).map(|s| s.1).chain([all.len()]);
        starts
            .iter()
            .zip(ends)
            .map(|(&(at, from), to)| {
                let text = plain(&all[from..to]);
                // The last frame runs into the report: keep the panel only.
                let text = match text.find("Serving Benchmark") {
                    Some(cut) => text[..cut].to_string(),
                    None => text,
                };
                Frame { at, text }
            })
            .collect()
    }
}

/// The number right after `label` in `text`, if any.
fn number_after(text: &str, label: &str) -> Option<f64> {
    let rest = &text[text.find(label)? + label.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[test]
fn the_panel_shows_the_window_and_the_server_and_is_redrawn_often() {
    let _quiet = exclusive();
    let path = scenario("throughput.rhai");
    let screen = on_a_pty(&run_args(&path));
    let frames = screen.frames("phase 1/1 throughput [");
    assert!(frames.len() > 2, "{} frames", frames.len());
    let all: Vec<&str> = frames.iter().map(|f| f.text.as_str()).collect();

    // The window's TTFT quantiles, once requests finished in it.
    let ttft = all.iter().find_map(|t| {
        let at = &t[t.find("TTFT p50 ")?..];
        Some((number_after(at, "TTFT p50 ")?, number_after(at, " p99 ")?))
    });
    let (p50, p99) = ttft.unwrap_or_else(|| panic!("no TTFT quantiles in: {all:#?}"));
    assert!(p50 > 0.0 && p99 >= p50, "TTFT p50 {p50} p99 {p99}");
    // The simulator's running requests, from its scraped /metrics.
    let running = all
        .iter()
        .filter_map(|t| number_after(t, "server: running "))
        .fold(0.0, f64::max);
    assert!(running >= 1.0, "no request seen running: {all:#?}");
    assert!(all
        .iter()
        .any(|t| t.contains("req/s") && t.contains("send lateness")));

    // Redrawn at least twice a second over the time the panel was up, as this test saw
    // it arrive (five a second nominally; a loaded machine may delay a few).
    let mut distinct = frames.iter().map(|f| &f.text).collect::<Vec<_>>();
    distinct.dedup();
    let shown = frames[frames.len() - 1].at - frames[0].at;
    let per_s = (distinct.len() - 1) as f64 / shown.as_secs_f64();
    println!(
        "{} frames ({} distinct) over {shown:?}: {per_s:.1} per second",
        frames.len(),
        distinct.len()
    );
    assert!(
        shown >= Duration::from_secs(2),
        "the panel was up {shown:?}"
    );
    assert!(per_s >= 2.0, "{per_s:.2} frames per second");
}

/// `GET /metrics` on `port`: the body of a 200 answer.
fn scrape(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
}

/// The counters of phase `phase` in a scrape, read by the `prometheus-parse` crate.
fn counter(text: &str, name: &str, phase: &str) -> Option<f64> {
    let parsed = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("the exposition parses");
    parsed
        .samples
        .iter()
        .find(|s| s.metric == name && s.labels.get("phase") == Some(phase))
        .and_then(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => Some(v),
            _ => None,
        })
}

#[test]
fn live_metrics_are_served_while_the_run_goes_on() {
    let _quiet = exclusive();
    let port = free_port();
    let path = scenario("throughput.rhai");
    let addr = format!("127.0.0.1:{port}");
    let mut args = run_args(&path);
    args.extend(["--live-metrics", &addr, "-q"]);
    let mut child = spawn_runner(&args);
    let pipes = Pipes::take(&mut child);

    // First scrape once the phase has sent something; the second a second later.
    let mut first = None;
    wait_until(
        "the phase's first counters",
        Duration::from_secs(60),
        || {
            let sent = |t: &String| counter(t, "runner_sent_total", "throughput");
            first = scrape(port).filter(|t| sent(t).is_some_and(|n| n > 0.0));
            first.is_some()
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let second = scrape(port).expect("a scrape a second later, mid-run");
    let first = first.expect("the first scrape");
    let read = |t: &str, name: &str| counter(t, name, "throughput").unwrap_or(-1.0);
    let (sent, completed) = (
        (
            read(&first, "runner_sent_total"),
            read(&second, "runner_sent_total"),
        ),
        (
            read(&first, "runner_completed_total"),
            read(&second, "runner_completed_total"),
        ),
    );
    println!("sent {sent:?}, completed {completed:?} a second apart");
    assert!(sent.1 > sent.0, "sent did not rise: {sent:?}\n{second}");
    assert!(
        completed.1 > completed.0,
        "completed did not rise: {completed:?}\n{second}"
    );
    // result.json's names for the window's figures.
    for name in [
        "runner_p99_ttft_ms",
        "runner_median_e2el_ms",
        "runner_request_throughput",
    ] {
        assert!(
            second.contains(&format!("{name}{{phase=\"throughput\"}}")),
            "{name}: {second}"
        );
    }

    // Scrapers that connect and never send a byte, held open until the run has ended: it
    // still ends, with its report (the server holds at most four of them at once, drops
    // each after two seconds, and stops with the run whatever they do).
    let hostile: Vec<_> = (0..16)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(!hostile.is_empty());
    assert_eq!(wait_exit(&mut child, Duration::from_secs(60)), Some(0));
    drop(hostile);
    let (out, _) = pipes.join();
    assert!(out.contains("Serving Benchmark Result"), "{out}");
}

#[test]
fn live_metrics_refuse_other_than_loopback_and_a_port_in_use() {
    let path = scenario("throughput.rhai");
    let refused = runner(&[&path, "--live-metrics", "0.0.0.0:9464", "-p", "requests=1"]);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("--live-metrics") && err.contains("not a loopback address"),
        "{err}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let busy = runner(&[&path, "--live-metrics", &addr, "-p", "requests=1", "-q"]);
    let err = stderr(&busy);
    assert_eq!(busy.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(&addr) && err.contains("in use"), "{err}");
}

/// `GET /metrics` on `port`, connecting and reading within `limit`: whether a 200 came.
fn scrape_within(port: u16, limit: Duration) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, limit) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(limit));
    if s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

/// 1,000 connections from a local process that never send a byte, held open, once took
/// every slot and the kernel's queue behind them for the whole run (0 of 8 scrapes
/// answered): the oldest idle one is shed for each that comes, and scrapes get through.
#[test]
fn idle_connections_by_the_thousand_do_not_starve_a_scrape() {
    let port = free_port();
    let path = scenario("throughput.rhai");
    let addr = format!("127.0.0.1:{port}");
    let args = [
        path.as_str(),
        "-p",
        "requests=4000",
        "-p",
        "rate=50",
        "-p",
        "output_tokens=16",
        "--live-metrics",
        &addr,
        "-q",
    ];
    let mut child = spawn_runner(&args);
    let pipes = Pipes::take(&mut child);
    wait_until("the first scrape", Duration::from_secs(60), || {
        scrape_within(port, Duration::from_secs(1))
    });
    let target = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut idle = Vec::new();
    let opening = Instant::now();
    while idle.len() < 1000 && opening.elapsed() < Duration::from_secs(10) {
        if let Ok(s) = std::net::TcpStream::connect_timeout(&target, Duration::from_millis(100)) {
            idle.push(s);
        }
    }
    let answered = (0..8)
        .filter(|_| scrape_within(port, Duration::from_secs(5)))
        .count();
    println!(
        "{} idle connections open; {answered} of 8 scrapes answered",
        idle.len()
    );
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    drop(idle);
    let (out, err) = pipes.join();
    assert_eq!(code, Some(130), "{err}");
    assert!(out.contains("Serving Benchmark Result"), "{out}");
    assert_eq!(answered, 8, "{err}");
}
