//! Energy per phase (`--power-metrics`): the simulator's power model (`--sim-power`,
//! served at /dcgm/metrics in DCGM's names) scraped on the server metrics' ticks gives
//! each phase's joules, mean watts, joules per output token and tokens per joule in every
//! report; the figures are the model's own, computed here from the window and the tokens
//! the run measured. Without the flag there is no section; an exporter without the
//! counters is one line in the report and one on stderr; one with only a power gauge (AMD's
//! names, two GPUs) has its watts integrated over the scrapes.

use std::path::Path;

use serde_json::Value;

use crate::support::{exclusive, runner, scenario, stderr, stdout, SimProcess};

/// The model: 300 W idle, 0.05 J per generated token. A phase of ~1 s and 8,192 tokens
/// spends about a third of its energy idle and two thirds on tokens, so a report that
/// missed either part would be off by far more than the 2 % allowed.
const IDLE_W: f64 = 300.0;
const PER_TOKEN_J: f64 = 0.05;

fn model() -> String {
    format!("idle={IDLE_W},per_token={PER_TOKEN_J}")
}

/// A sweep of two phases (64 then 128 prompts of 64 output tokens) against `sim`, with
/// `--output` into `dir`: the runner's output.
fn sweep(sim: &SimProcess, dir: &Path, extra: &[&str]) -> std::process::Output {
    let out = dir.display().to_string();
    let mut args = vec![
        scenario("sweep.rhai"),
        "-p".into(),
        "min_prompts=64".into(),
        "-p".into(),
        "max_prompts=128".into(),
        "-p".into(),
        "output_tokens=64".into(),
        "--target".into(),
        sim.url.clone(),
        "--server-metrics-interval".into(),
        "200ms".into(),
        "--output".into(),
        out,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    assert!(o.status.success(), "{}\n{}", stderr(&o), stdout(&o));
    o
}

fn result(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    serde_json::from_str(&text).expect("JSON")
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number `{key}` in {v}"))
}

#[test]
fn joules_per_token_are_the_simulators_power_model() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&["--sim-power", &model()]);
    let dir = tempfile::tempdir().expect("temp dir");
    let power = format!("{}/dcgm/metrics", sim.url);
    let o = sweep(&sim, dir.path(), &["--power-metrics", &power]);
    let all = result(dir.path());
    // result.json's energy is in the committed schema.
    crate::schema::assert_valid(&crate::schema::validator(), "an energy run", &all);
    let phases = all["phases"].as_array().cloned().expect("two phases");
    assert_eq!(phases.len(), 2);
    for phase in &phases {
        let e = &phase["runner"]["server_metrics"]["energy"];
        assert_eq!(e["source"], "counter", "{e}");
        // The client's count of the phase: every request's 64 tokens.
        let tokens = f(phase, "total_output_tokens");
        assert_eq!(f(e, "output_tokens"), tokens);
        assert_eq!(tokens, 64.0 * f(phase, "completed"));
        let (joules, seconds) = (f(e, "joules"), f(e, "seconds"));
        // The model over the window the energy spans, with the phase's tokens.
        let idle = IDLE_W * seconds;
        let expected = (idle + PER_TOKEN_J * tokens) / tokens;
        let measured = f(e, "joules_per_token");
        println!(
            "{}: {joules:.1} J over {seconds:.3} s, {tokens} tokens: {measured:.5} J/token, model {expected:.5}",
            phase["runner"]["phase"]
        );
        assert!(
            (measured / expected - 1.0).abs() < 0.02,
            "{measured} J/token against the model's {expected}: {e}"
        );
        // Both parts weigh: a report without either would be far off.
        assert!(idle / joules > 0.1 && idle / joules < 0.9, "{e}");
        assert!((f(e, "mean_watts") - joules / seconds).abs() < 1e-6 * joules);
        assert!((f(e, "tokens_per_joule") * measured - 1.0).abs() < 1e-9);
        // The engine's figures are their own: one endpoint, the energy not among them.
        assert_eq!(phase["runner"]["server_metrics"]["endpoints"], 1);
    }
    // Every format has the section.
    let text = stdout(&o);
    assert_eq!(text.matches("--- Energy ---").count(), 2, "{text}");
    assert!(text.contains("Joules per output token:"), "{text}");
    assert_eq!(
        read(dir.path(), "report.txt")
            .matches("--- Energy ---")
            .count(),
        2
    );
    let md = read(dir.path(), "report.md");
    assert!(md.contains("## Energy: 64 prompts"), "{md}");
    assert!(md.contains("| Joules per output token |"), "{md}");
    let html = read(dir.path(), "report.html");
    assert!(
        html.contains("<h2>Energy</h2>"),
        "no energy section in report.html"
    );
    assert!(html.contains("<td>128 prompts</td>"));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn without_power_metrics_there_is_no_energy_section() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&["--sim-power", &model()]);
    let dir = tempfile::tempdir().expect("temp dir");
    let o = sweep(&sim, dir.path(), &[]);
    for phase in result(dir.path())["phases"].as_array().expect("phases") {
        assert!(phase["runner"]["server_metrics"].get("energy").is_none());
    }
    assert!(!stdout(&o).contains("Energy"), "{}", stdout(&o));
    assert!(!read(dir.path(), "report.md").contains("## Energy"));
    assert!(!read(dir.path(), "report.html").contains("<h2>Energy</h2>"));
}

/// The engine's /metrics has no DCGM names: the report says so in one line per phase,
/// stderr once, and no figure is made up; `--server-metrics off` leaves the energy
/// section alone, without a server section.
#[test]
fn an_exporter_without_the_counters_is_one_line() {
    let _quiet = exclusive();
    let sim = SimProcess::start(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let vllm = format!("{}/metrics", sim.url);
    let o = sweep(
        &sim,
        dir.path(),
        &["--power-metrics", &vllm, "--server-metrics", "off"],
    );
    let warning = format!("warning: {vllm} has no energy counter");
    assert_eq!(stderr(&o).matches(&warning).count(), 1, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(!text.contains("Server metrics"), "{text}");
    let missing: Vec<&str> = text.lines().filter(|l| l.starts_with("Missing:")).collect();
    assert_eq!(missing.len(), 2, "{text}");
    assert!(missing[0].contains("and no power gauge"), "{text}");
    assert_eq!(text.matches("Energy used:").count(), 2, "{text}");
    for phase in result(dir.path())["phases"].as_array().expect("phases") {
        let e = &phase["runner"]["server_metrics"]["energy"];
        assert_eq!(e["joules"], Value::Null, "{e}");
        assert_eq!(e["joules_per_token"], Value::Null, "{e}");
        assert_eq!(e["missing"].as_array().map(Vec::len), Some(1), "{e}");
        assert_eq!(phase["runner"]["server_metrics"]["samples"], 0);
    }
}

/// `runner compare` sets joules per token and tokens per joule side by side; the run
/// that spent fewer joules per token wins.
#[test]
fn compare_sets_joules_per_token_side_by_side() {
    let _quiet = exclusive();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (dir, per_token) in dirs.iter().zip([0.2, 0.05]) {
        let sim = SimProcess::start(&["--sim-power", &format!("idle=100,per_token={per_token}")]);
        let power = format!("{}/dcgm/metrics", sim.url);
        sweep(&sim, dir.path(), &["--power-metrics", &power]);
    }
    let [a, b] = [&dirs[0], &dirs[1]].map(|d| d.path().join("result.json").display().to_string());
    let out = runner(&["compare", &a, &b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |label: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no row `{label}`:\n{text}"))
            .to_string()
    };
    // compare names a run by its result's directory.
    let b_name = dirs[1]
        .path()
        .file_name()
        .expect("a name")
        .to_string_lossy();
    for (label, arrow) in [
        ("Energy joules per output token", "↓"),
        ("Energy output tokens per joule", "↑"),
    ] {
        let line = row(label);
        assert!(
            line.ends_with(&format!("{arrow} {b_name}")),
            "B wins: {line}"
        );
    }
}

/// A power exporter of AMD's device-metrics exporter names with a power gauge and no
/// energy counter: two GPUs at 250 W and 150 W, on loopback for the rest of the tests.
fn gauge_only_exporter() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/metrics", listener.local_addr().expect("addr"));
    let body = "# TYPE gpu_power_usage gauge\n\
                gpu_power_usage{gpu_id=\"0\",hostname=\"h\"} 250\n\
                gpu_power_usage{gpu_id=\"1\",hostname=\"h\"} 150\n";
    std::thread::spawn(move || {
        for (n, mut stream) in listener.incoming().flatten().enumerate() {
            // Its first answer is slow, as a loaded machine's can be: the run still
            // starts after it, so the first phase has a reading from before it began.
            if n == 0 {
                std::thread::sleep(std::time::Duration::from_millis(400));
            }
            // The request's head, then one answer and the connection closed.
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Where an exporter has only a power gauge, the watts are integrated over the scrape
/// times, summed over its GPUs, and the section and stderr say so.
#[test]
fn a_power_gauge_alone_is_integrated_and_said_so() {
    let _quiet = exclusive();
    let power = gauge_only_exporter();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().display().to_string();
    let o = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=64",
        "-p",
        "output_tokens=64",
        "--server-metrics-interval",
        "100ms",
        "--power-metrics",
        &power,
        "--output",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let phase = result(dir.path());
    let e = &phase["runner"]["server_metrics"]["energy"];
    assert_eq!(e["source"], "power_gauge", "{e}");
    // 400 W all along: the trapezoids of a constant are exact.
    assert!((f(e, "mean_watts") - 400.0).abs() < 1e-6, "{e}");
    assert!(
        (f(e, "joules") - 400.0 * f(e, "seconds")).abs() < 1e-6,
        "{e}"
    );
    assert!(f(e, "seconds") > 0.0, "{e}");
    let tokens = f(&phase, "total_output_tokens");
    assert!((f(e, "joules_per_token") - f(e, "joules") / tokens).abs() < 1e-9);
    assert_eq!(e["missing"].as_array().map(Vec::len), Some(1), "{e}");
    let warning = format!("warning: {power} has no energy counter");
    assert_eq!(stderr(&o).matches(&warning).count(), 1, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains(
            "Energy from:                             power gauge integrated over the scrapes"
        ),
        "{text}"
    );
    // The engine's section still counts its one endpoint, the exporter apart.
    assert_eq!(phase["runner"]["server_metrics"]["endpoints"], 1);
}
