//! Speculative decoding: the simulator's draft model (`--sim-spec-decode`) exports vLLM's
//! acceptance counters, and each phase's "Speculative decoding" section in report.txt,
//! report.md, report.html and result.json gives back the acceptance the flag configured;
//! without the flag there is no section; `runner compare` sets two acceptances side by side.

use std::path::Path;

use serde_json::Value;

use crate::support::{runner, scenario, stderr, stdout};

/// Two phases of 150 requests of 128 tokens each: about 7,700 drafts per phase at the
/// acceptance below (127 decode tokens per request over 2.47 tokens per step). The
/// acceptance rate's standard error is then 0.4 points (a draft's accepted count has a
/// standard deviation of 1.02 tokens, over 3 positions), a position's at most 0.6: the
/// 2-point bound is more than 3 standard errors from each. The draws are a fixed stream
/// per admitted request, so the figures are the same on every run.
const TWO_PHASES: &str = r#"
fn describe() { #{ name: "spec-decode", description: "two phases with a draft model" } }
fn phases() {
    [#{ name: "one", arrival: #{ process: "closed", concurrency: 32 }, max_requests: 150 },
     #{ name: "two", arrival: #{ process: "closed", concurrency: 32 }, max_requests: 150 }]
}
fn next_request(phase, index) {
    #{ prompt: synthetic_text(32), input_tokens: 32, max_tokens: 128, ignore_eos: true }
}
"#;

/// The draft model: P(position i accepted | every earlier one was).
const ACCEPT: [f64; 3] = [0.8, 0.6, 0.4];
const FLAG: &str = "0.8,0.6,0.4";

/// Short steps, so the runs take about a second a phase.
const FAST: [&str; 2] = ["--sim-decode-step-ms", "1"];

/// What the draft model should give: per-position acceptance (the product of the
/// probabilities up to it), acceptance rate (their mean) and mean acceptance length
/// (1 + their sum).
fn expected(accept: &[f64]) -> (Vec<f64>, f64, f64) {
    let per_position: Vec<f64> = accept
        .iter()
        .scan(1.0, |all, p| {
            *all *= p;
            Some(*all)
        })
        .collect();
    let sum: f64 = per_position.iter().sum();
    (per_position, sum / accept.len() as f64, 1.0 + sum)
}

/// Runs `args` with `--output dir` and returns its result.json.
fn run_into(dir: &Path, args: &[&str]) -> Value {
    let out = dir.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--output", &out, "-q"]);
    let o = runner(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    serde_json::from_str(&text).expect("result.json is JSON")
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn within(what: &str, got: f64, want: f64, by: f64) {
    assert!(
        (got - want).abs() <= by,
        "{what}: {got} against the configured {want} (at most {by} apart)"
    );
}

#[test]
fn each_phase_reports_the_draft_models_acceptance_in_every_format() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = tmp.path().join("spec.rhai");
    std::fs::write(&script, TWO_PHASES).expect("write the scenario");
    let dir = tmp.path().join("out");
    let mut args = vec![
        script.to_str().expect("a UTF-8 path"),
        "--sim-spec-decode",
        FLAG,
    ];
    args.extend(FAST);
    let result = run_into(&dir, &args);

    let (per_position, rate, length) = expected(&ACCEPT);
    let phases = result["phases"].as_array().expect("two phases");
    assert_eq!(phases.len(), 2);
    let mut drafts_in_phases = 0.0;
    for phase in phases {
        let s = &phase["runner"]["server_metrics"]["spec_decode"];
        let name = phase["phase"].as_str().unwrap_or("?");
        let drafts = s["drafts"].as_f64().expect("drafts");
        eprintln!("phase {name}: {s}");
        // 150 requests of 127 decode tokens at 2.47 tokens a step: about 7,700 drafts.
        assert!(
            (6_000.0..9_500.0).contains(&drafts),
            "{name}: {drafts} drafts"
        );
        drafts_in_phases += drafts;
        assert_eq!(s["source"], "counters");
        assert_eq!(s["draft_tokens"].as_f64(), Some(3.0 * drafts));
        within(
            "acceptance rate",
            s["acceptance_rate"].as_f64().expect("rate"),
            rate,
            0.02,
        );
        let got_length = s["mean_acceptance_length"].as_f64().expect("length");
        within("mean acceptance length", got_length, length, 0.02 * length);
        let got: Vec<f64> = serde_json::from_value(s["per_position"].clone()).expect("a list");
        assert_eq!(got.len(), 3, "{got:?}");
        for (i, (g, w)) in got.iter().zip(&per_position).enumerate() {
            within(&format!("{name}: position {i}"), *g, *w, 0.02);
        }
    }
    // The phases' deltas add up to the server's own count from the run's first scrape to
    // its last (the runner's probe request before the first phase drafts too).
    let samples = read(&dir, "server_metrics.jsonl");
    let scrape = |line: Option<&str>| -> Value {
        serde_json::from_str(line.expect("a scrape")).expect("a JSON line")
    };
    let (first, last) = (
        scrape(samples.lines().next()),
        scrape(samples.lines().last()),
    );
    let drafts = |s: &Value| s["values"]["vllm:spec_decode_num_drafts_total"].as_f64();
    let total = drafts(&last).zip(drafts(&first)).map(|(l, f)| l - f);
    assert_eq!(total, Some(drafts_in_phases));
    let by_position = "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"}";
    assert!(
        last["values"][by_position]
            .as_f64()
            .is_some_and(|v| v > 0.0),
        "{last}"
    );

    // The section per phase in the text, markdown and HTML reports.
    let text = read(&dir, "report.txt");
    assert_eq!(
        text.matches("- Speculative decoding -").count(),
        2,
        "{text}"
    );
    let rate_line = text
        .lines()
        .find(|l| l.starts_with("Acceptance rate:"))
        .expect("an acceptance-rate line");
    let shown: f64 = rate_line
        .trim_start_matches("Acceptance rate:")
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .expect("a percentage");
    within("report.txt's rate (%)", shown, rate * 100.0, 2.0);
    assert!(text.contains("Acceptance per position:"), "{text}");
    let md = read(&dir, "report.md");
    for phase in ["one", "two"] {
        assert!(
            md.contains(&format!("## Speculative decoding: {phase}\n")),
            "{md}"
        );
    }
    assert!(
        md.contains("| Mean acceptance length (tokens/step) | 2.4"),
        "{md}"
    );
    let html = read(&dir, "report.html");
    assert_eq!(html.matches("<h2>Speculative decoding: ").count(), 2);
    assert!(
        html.contains("<tr><th>Acceptance rate</th><td>4"),
        "no rate row"
    );

    // The client sees it too: after the first token, a step's event carries the
    // accepted tokens and the bonus one (2.47 on average; 1 without a draft model).
    let records = read(&dir, "requests.jsonl");
    let (mut events, mut tokens) = (0.0, 0.0);
    for line in records.lines() {
        let r: Value = serde_json::from_str(line).expect("a record");
        let chunks = r["chunks"].as_array().expect("chunks");
        events += (chunks.len() - 1) as f64;
        tokens += chunks[1..]
            .iter()
            .filter_map(|c| c["tokens"].as_f64())
            .sum::<f64>();
    }
    assert!(
        tokens / events > 2.3,
        "{} tokens per decode event",
        tokens / events
    );

    let v = crate::schema::validator();
    crate::schema::assert_valid(&v, "a run with a draft model", &result);
}

#[test]
fn without_a_draft_model_there_is_no_section() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=20".into(),
        "-p".into(),
        "output_tokens=16".into(),
    ];
    args.extend(FAST.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = run_into(tmp.path(), &args);
    let server = &result["runner"]["server_metrics"];
    assert!(server.is_object(), "the run was scraped: {result}");
    assert!(server.get("spec_decode").is_none(), "{server}");
    for file in ["report.txt", "report.md", "report.html"] {
        let text = read(tmp.path(), file);
        assert!(!text.contains("Speculative decoding"), "{file}");
    }
    let samples = read(tmp.path(), "server_metrics.jsonl");
    assert!(!samples.contains("spec_decode"));
}

#[test]
fn compare_sets_two_acceptances_side_by_side() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let run = |name: &str, flag: &str| {
        let dir = tmp.path().join(name);
        let mut args = vec![
            scenario("throughput.rhai"),
            "-p".into(),
            "requests=60".into(),
            "-p".into(),
            "input_tokens=32".into(),
            "--sim-spec-decode".into(),
            flag.into(),
        ];
        args.extend(FAST.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = run_into(&dir, &args);
        let s = &result["runner"]["server_metrics"]["spec_decode"];
        let rate = s["acceptance_rate"].as_f64().expect("a rate");
        let length = s["mean_acceptance_length"].as_f64().expect("a length");
        (dir.join("result.json").display().to_string(), rate, length)
    };
    let (high, high_rate, high_length) = run("high", "0.9,0.8,0.7");
    let (low, low_rate, low_length) = run("low", "0.5,0.5,0.5");
    let out = runner(&["compare", &high, &low]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |label: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in\n{text}"));
        line[label.len()..]
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<String>>()
    };
    let shows = |cell: &str, v: f64| cell.parse::<f64>().is_ok_and(|c| (c - v).abs() < 0.01);
    let rate = row("Server spec-decode acceptance rate");
    assert!(
        shows(&rate[0], high_rate) && shows(&rate[1], low_rate),
        "{rate:?}"
    );
    let length = row("Server spec-decode mean acceptance length");
    assert!(
        shows(&length[0], high_length) && shows(&length[1], low_length),
        "{length:?}"
    );
    // More accepted is better: the first run wins both rows.
    for cells in [&rate, &length] {
        assert_eq!(cells.last().map(String::as_str), Some("high"), "{cells:?}");
    }
}
