//! `runner bench serve`: vLLM's flags verbatim (each taken or a named gap, checked against
//! the release's own parser), vLLM's result file and block (checked against files vLLM's
//! client wrote), and `--emit-scenario` round-trips: the emitted scenario, run with the
//! printed command, sends the same request stream (the same digest) as the flags.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::*;

fn bench_fixture(name: &str) -> String {
    repo()
        .join("tests/fixtures/bench_serve")
        .join(name)
        .display()
        .to_string()
}

fn read_json(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A simulator fast enough for a few dozen requests in milliseconds.
fn fast_sim() -> SimProcess {
    SimProcess::start(&[
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "1",
        "--sim-itl-ms",
        "1",
    ])
}

fn port_of(sim: &SimProcess) -> String {
    sim.url.rsplit(':').next().expect("a port").to_string()
}

/// A value to give a flag of vLLM's type in the parity check, and the flags it needs.
fn sample(name: &str, kind: &str) -> Vec<String> {
    let custom = bench_fixture("custom.jsonl");
    let v: &[&str] = match name {
        "--dataset-name" => &["random"],
        "--dataset-path" => &[custom.as_str(), "--dataset-name", "custom"],
        "--backend" => &["openai"],
        "--endpoint" => &["/v1/completions"],
        "--tokenizer" => &["o200k_base"],
        "--tokenizer-mode" => &["auto"],
        "--lora-assignment" => &["random"],
        "--ramp-up-strategy" => &[
            "linear",
            "--ramp-up-start-rps",
            "1",
            "--ramp-up-end-rps",
            "2",
        ],
        "--percentile-metrics" => &["ttft,e2el"],
        "--metric-percentiles" => &["50,99"],
        "--random-range-ratio" => &["0.5"],
        "--header" => &["x-a=1"],
        "--metadata" => &["k=v"],
        "--goodput" => &["ttft:100"],
        "--lora-modules" => &["a"],
        "--extra-body" | "--chat-template-kwargs" | "--random-mm-limit-mm-per-prompt" => {
            &["{\"a\": 1}"]
        }
        _ => match kind {
            "store_true" | "BooleanOptionalAction" => &[],
            "int" => &["4"],
            "float" => &["0.5"],
            _ => &["x"],
        },
    };
    std::iter::once(name.to_string())
        .chain(v.iter().map(|s| s.to_string()))
        .collect()
}

#[test]
fn parity_every_vllm_flag_is_taken_or_a_named_gap() {
    let fixture = read_json(
        &repo()
            .join("tests/fixtures/vllm_bench_serve_flags.json")
            .display()
            .to_string(),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let emit = dir.path().join("s.rhai").display().to_string();
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let upstream = fixture["flags"].as_array().expect("flags");
    let kept = fixture["kept_after_upstream_removal"]
        .as_array()
        .expect("kept");
    for f in upstream.iter().chain(kept) {
        let name = f["name"].as_str().expect("name");
        let ours = f["ours"].as_str().unwrap_or("taken");
        let mut args = vec![
            "bench".to_string(),
            "serve".into(),
            "--dry-run".into(),
            "--emit-scenario".into(),
            emit.clone(),
        ];
        args.extend(sample(name, f["type"].as_str().unwrap_or("str")));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = runner(&argv);
        let err = stderr(&out);
        match ours {
            "taken" => assert_eq!(out.status.code(), Some(0), "{name} should be taken: {err}"),
            _ => {
                assert_eq!(
                    out.status.code(),
                    Some(2),
                    "{name} should be refused: {err}"
                );
                assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
                assert!(err.contains(&format!("`{name}` is not supported")), "{err}");
                eprintln!("gap {name}: {}", err.trim_end());
            }
        }
        listed.insert(name.to_string(), ours.to_string());
    }
    // The binary's own lists: a flag it has that upstream dropped (or that the fixture
    // calls a gap while the binary takes it) fails here until the fixture is updated.
    let help = stdout(&runner(&["bench", "serve", "--help"]));
    let (taken, refused) = help
        .split_once("Refused")
        .expect("help lists the refused flags");
    let taken: Vec<&str> = taken
        .split("The runner's own")
        .next()
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("--"))
        .collect();
    let refused: Vec<&str> = refused
        .lines()
        .filter_map(|l| l.trim().split(':').next())
        .filter(|n| n.starts_with("--"))
        .collect();
    for name in &taken {
        assert_eq!(
            listed.get(*name).map(String::as_str),
            Some("taken"),
            "{name} is taken but the fixture does not say so"
        );
    }
    for name in &refused {
        assert_eq!(
            listed.get(*name).map(String::as_str),
            Some("gap"),
            "{name} is a gap but the fixture does not say so"
        );
    }
    assert_eq!(
        taken.len() + refused.len(),
        listed.len(),
        "the binary and the fixture list the same flags"
    );
}

#[test]
fn unknown_and_unsupported_flags_exit_2_with_one_line() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--no-such-flag", "1"], "--no-such-flag", "--help"),
        (
            &["--num-prompt", "3"],
            "--num-prompt",
            "write flags in full",
        ),
        (
            &["--hf-split", "train"],
            "--hf-split",
            "use --dataset-name custom",
        ),
        (
            &["--dataset-name", "hf"],
            "--dataset-name",
            "use --dataset-name custom",
        ),
        (
            &["--dataset-name", "random-mm"],
            "random-mm",
            "use --dataset-name random",
        ),
        (&["--plot-timeline"], "--plot-timeline", "--output DIR"),
        (&["--num-prompts", "many"], "--num-prompts", "an integer"),
    ];
    for (args, names, instead) in cases {
        let mut all = vec!["bench", "serve", "--dry-run"];
        all.extend_from_slice(args);
        let out = runner(&all);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
        assert!(
            err.starts_with("error: ") && err.contains(names) && err.contains(instead),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// vLLM's Python file with the keys vLLM's Rust client (vllm-project/vllm-bench) writes
/// besides, for the same flags: `max_model_len` (null without its `--max-model-len`, a
/// flag vLLM 0.33's parser lacks), `input_throughput`, and `p90_` of each metric (its
/// `src/config.rs` adds 90 to the percentiles; keys from its `src/output/json.rs`).
fn with_vllm_bench_keys(mut theirs: Value) -> Value {
    let map = theirs.as_object_mut().expect("a JSON object");
    map.insert("max_model_len".into(), Value::Null);
    map.insert("input_throughput".into(), serde_json::json!(1.5));
    for metric in ["ttft", "tpot", "itl", "e2el"] {
        if map.contains_key(&format!("mean_{metric}_ms")) {
            map.insert(format!("p90_{metric}_ms"), serde_json::json!(1.5));
        }
    }
    theirs
}

/// `ours` has the keys of `theirs` and each key's type, where an empty list of theirs
/// (`list[]`) stands for a list of any element type: against the zero-delay server
/// vLLM's client reads every chunk of an answer at once and records no inter-token
/// gap (its `itls` are empty lists), where ours records each chunk's.
fn assert_same_shape(ours: &BTreeMap<String, String>, theirs: &BTreeMap<String, String>) {
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "zero-delay server: key set"
    );
    for (key, t) in theirs {
        let o = &ours[key];
        let same = match t.split_once("[]") {
            Some((head, tail)) => o.starts_with(&format!("{head}[")) && o.ends_with(tail),
            None => o == t,
        };
        assert!(same, "zero-delay server: {key} is {o}, vLLM's is {t}");
    }
    assert_eq!(theirs["itls"], "list[list[]]", "the fixture's empty gaps");
}

/// Each key's JSON type, and a list's element type (`list[float]`).
fn types(v: &Value) -> BTreeMap<String, String> {
    fn kind(v: &Value) -> String {
        match v {
            Value::Null => "null".into(),
            Value::Bool(_) => "bool".into(),
            Value::Number(n) if n.is_f64() => "float".into(),
            Value::Number(_) => "int".into(),
            Value::String(_) => "str".into(),
            Value::Array(a) => format!("list[{}]", a.first().map(kind).unwrap_or_default()),
            Value::Object(_) => "dict".into(),
        }
    }
    let map = v.as_object().expect("a JSON object");
    map.iter().map(|(k, v)| (k.clone(), kind(v))).collect()
}

/// Runs `runner bench serve` against `sim` with vLLM's flags `flags` and returns its
/// stdout and the vLLM result file it wrote.
fn bench_saved(sim: &SimProcess, flags: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let result_dir = dir.path().display().to_string();
    let port = port_of(sim);
    let mut args = vec![
        "bench",
        "serve",
        "--port",
        &port,
        "--model",
        "sim/llm-9b",
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--num-prompts",
        "20",
        "--save-result",
        "--result-dir",
        &result_dir,
        "--result-filename",
        "r.json",
    ];
    args.extend_from_slice(flags);
    let out = runner(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    (
        stdout(&out),
        read_json(&dir.path().join("r.json").display().to_string()),
    )
}

#[test]
fn save_result_has_vllms_keys_types_and_block() {
    let sim = fast_sim();
    for (flags, fixture) in [
        (&[][..], "vllm_result.json"),
        (&["--save-detailed"][..], "vllm_result_detailed.json"),
        (
            &[
                "--max-concurrency",
                "4",
                "--request-rate",
                "1000",
                "--percentile-metrics",
                "ttft,tpot,itl,e2el",
            ][..],
            "vllm_result_block.json",
        ),
    ] {
        let (text, ours) = bench_saved(&sim, flags);
        let theirs = with_vllm_bench_keys(read_json(&bench_fixture(fixture)));
        assert_eq!(types(&ours), types(&theirs), "{fixture}: key set and types");
        // Issue 58: the tokenizer that counted (no --tokenizer: o200k_base), not the model.
        assert_eq!(ours["tokenizer_id"], "o200k_base", "{fixture}");
        if fixture == "vllm_result_detailed.json" {
            // Issue 58: every answer's text, where each was "".
            let texts = ours["generated_texts"].as_array().expect("texts");
            assert_eq!(texts.len(), 20);
            assert!(
                texts
                    .iter()
                    .all(|t| !t.as_str().unwrap_or_default().is_empty()),
                "{texts:?}"
            );
            // The same against a zero-delay server (every chunk at once, ITLs of 0),
            // beside the file vLLM's client wrote against that server.
            let zero = SimProcess::start(&["--sim-profile", "zero"]);
            let (_, ours) = bench_saved(&zero, flags);
            let theirs = read_json(&bench_fixture("vllm_result_detailed_zero.json"));
            assert_same_shape(&types(&ours), &types(&with_vllm_bench_keys(theirs)));
        }
        if fixture == "vllm_result_block.json" {
            assert_eq!(
                block_labels(&text),
                block_labels(
                    &std::fs::read_to_string(bench_fixture("vllm_block.txt")).expect("block")
                )
            );
        }
    }
}

/// `--metric-percentiles 50,99`: vLLM's Python client writes p50 and p99, vllm-bench
/// p90 besides; ours writes all three, p90 between the other two.
#[test]
fn save_result_writes_vllm_benchs_p90_beside_the_percentiles_asked() {
    let sim = fast_sim();
    let (_, ours) = bench_saved(&sim, &["--metric-percentiles", "50,99"]);
    // vLLM's default --percentile-metrics: ttft,tpot,itl.
    assert!(ours.get("p90_e2el_ms").is_none(), "{ours}");
    for metric in ["ttft", "tpot", "itl"] {
        let at = |p: &str| {
            ours[format!("p{p}_{metric}_ms")]
                .as_f64()
                .unwrap_or_else(|| panic!("p{p}_{metric}_ms: {ours}"))
        };
        // p50 and p99 come from the run's streaming estimate (within half a bucket of
        // numpy's), p90 from the requests exactly: 2 % of slack.
        let (p50, p90, p99) = (at("50"), at("90"), at("99"));
        assert!(
            p50 <= p90 * 1.02 && p90 <= p99 * 1.02 && p90 > 0.0,
            "{metric}: {p50} {p90} {p99}"
        );
    }
    let input = ours["input_throughput"].as_f64().expect("input_throughput");
    let expected = ours["total_input_tokens"].as_f64().expect("tokens")
        / ours["duration"].as_f64().expect("duration");
    assert!(
        (input - expected).abs() <= 1e-9 * expected,
        "{input} {expected}"
    );
    assert!(ours["max_model_len"].is_null(), "{ours}");
}

/// The labels of the `Serving Benchmark Result` block, in order, without the values.
fn block_labels(text: &str) -> Vec<String> {
    let start = text
        .find("============ Serving Benchmark Result")
        .expect("the block");
    let mut labels = vec![];
    for line in text[start..].lines() {
        let label = match line.split_once(':') {
            Some((l, _)) => format!("{l}:"),
            None => line.trim_end().to_string(),
        };
        let end = label.starts_with("=====") && !label.contains("Serving");
        labels.push(label);
        if end {
            break;
        }
    }
    labels
}

/// The request digest a run with `--output dir` recorded.
fn digest_in(dir: &Path) -> String {
    let result = read_json(&dir.join("result.json").display().to_string());
    let digest = result["runner"]["request_digest"]
        .as_str()
        .expect("a request digest");
    assert!(
        digest.starts_with("sha256:") || digest.len() == 64,
        "{digest}"
    );
    digest.to_string()
}

fn round_trip(sim: &SimProcess, flags: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let emit = dir.path().join("emitted.rhai").display().to_string();
    let first = dir.path().join("first");
    let first_s = first.display().to_string();
    let port = port_of(sim);
    let mut args = vec![
        "bench",
        "serve",
        "--port",
        &port,
        "--num-prompts",
        "12",
        "--emit-scenario",
        &emit,
        "--output",
        &first_s,
    ];
    args.extend_from_slice(flags);
    let out = runner(&args);
    let err = stderr(&out);
    assert!(out.status.success(), "{flags:?}: {err}");
    let line = err
        .lines()
        .find_map(|l| l.split_once("run it with: runner "))
        .expect("the printed command")
        .1;
    let second = dir.path().join("second");
    let mut again: Vec<String> = line.split_whitespace().map(String::from).collect();
    again.extend([
        "--quiet".into(),
        "--output".into(),
        second.display().to_string(),
    ]);
    let argv: Vec<&str> = again.iter().map(String::as_str).collect();
    let out = runner(&argv);
    assert!(out.status.success(), "{line}: {}", stderr(&out));
    assert_eq!(
        digest_in(&first),
        digest_in(&second),
        "{flags:?}: the emitted scenario sends the same stream"
    );
}

#[test]
fn emitted_scenarios_round_trip_for_every_dataset() {
    let sim = fast_sim();
    let sharegpt = bench_fixture("sharegpt.json");
    let sonnet = bench_fixture("sonnet.txt");
    let custom = bench_fixture("custom.jsonl");
    round_trip(
        &sim,
        &[
            "--random-input-len",
            "24",
            "--random-output-len",
            "4",
            "--random-range-ratio",
            "0.5",
            "--random-prefix-len",
            "8",
            "--request-rate",
            "500",
            "--burstiness",
            "0.7",
        ],
    );
    round_trip(
        &sim,
        &[
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            &sharegpt,
            "--max-concurrency",
            "3",
        ],
    );
    round_trip(
        &sim,
        &[
            "--dataset-name",
            "sonnet",
            "--dataset-path",
            &sonnet,
            "--sonnet-input-len",
            "80",
            "--sonnet-prefix-len",
            "30",
            "--sonnet-output-len",
            "4",
        ],
    );
    round_trip(
        &sim,
        &[
            "--dataset-name",
            "custom",
            "--dataset-path",
            &custom,
            "--custom-output-len",
            "4",
            "--skip-chat-template",
            "--num-warmups",
            "2",
        ],
    );
    round_trip(
        &sim,
        &[
            "--dataset-name",
            "prefix_repetition",
            "--prefix-repetition-prefix-len",
            "16",
            "--prefix-repetition-suffix-len",
            "8",
            "--prefix-repetition-num-prefixes",
            "3",
            "--output-len",
            "4",
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "200",
            "--ramp-up-end-rps",
            "800",
        ],
    );
}

/// The client's figure minus the server's, request by request, in ms.
fn errors_ms(client_s: &[f64], server_ms: &[f64]) -> Vec<f64> {
    assert_eq!(client_s.len(), server_ms.len(), "one per request");
    client_s
        .iter()
        .zip(server_ms)
        .map(|(c, s)| c * 1e3 - s)
        .collect()
}

/// The client's figures are the server's, in seconds: none below the server's by more
/// than `floor_ms`, the median within 5 ms (the timing tests' bound is 0.5 ms:
/// tests/timing/client_error.rs; a loaded machine once put a fresh connection's first
/// chunk 8.5 ms late) and none over a second. A file in ms, or one divided twice, is a
/// thousand times off.
fn assert_the_servers(what: &str, errors: &[f64], floor_ms: f64) {
    let mut e = errors.to_vec();
    e.sort_by(f64::total_cmp);
    let (low, median, high) = (e[0], e[e.len() / 2], e[e.len() - 1]);
    tell(&format!(
        "{what}: client - server, ms: min {low:.3}, median {median:.3}, max {high:.3}"
    ));
    assert!(low >= floor_ms, "{what}: {low:.3} ms below the server's");
    assert!(median.abs() <= 5.0, "{what}: median {median:.3} ms off");
    assert!(high <= 1000.0, "{what}: {high:.3} ms over the server's");
}

/// The send log's chunk times (ms from each request's arrival), in vLLM's request order:
/// a request id ends with its index (`…-0-7`).
fn sent_in_request_order(sim: &SimProcess) -> Vec<Vec<f64>> {
    let mut sent: Vec<(u64, Vec<f64>)> = sim
        .lines()
        .iter()
        .map(|l| {
            let id = l["request_id"].as_str().expect("request_id");
            let index = id.rsplit('-').next().and_then(|i| i.parse().ok());
            let chunks = l["chunk_ms"].as_array().expect("chunk_ms");
            let ms = chunks.iter().map(|c| c.as_f64().expect("ms")).collect();
            (index.unwrap_or_else(|| panic!("{id}")), ms)
        })
        .collect();
    sent.sort_by_key(|(i, _)| *i);
    assert!(sent.iter().enumerate().all(|(n, (i, _))| *i == n as u64));
    sent.into_iter().map(|(_, ms)| ms).collect()
}

fn floats(v: &Value) -> Vec<f64> {
    let list = v.as_array().expect("a list");
    list.iter().map(|x| x.as_f64().expect("a number")).collect()
}

/// `--save-result --save-detailed` against the fixed profile (TTFT 30 ms, 10 ms between
/// tokens) with its send log: each request's `ttfts`, `latencies` and `itls` (seconds,
/// as vLLM writes them) are what the server did, request by request by its own log (not
/// the nominal delays, which a loaded machine's timers miss), so the check holds beside
/// other work.
#[test]
fn save_result_arrays_are_the_servers_times_in_seconds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = [
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "30",
        "--sim-itl-ms",
        "10",
    ];
    let sim = SimProcess::logging(dir.path(), "sent", &profile);
    let (_, ours) = bench_saved(&sim, &["--save-detailed", "--max-concurrency", "4"]);
    let sent = sent_in_request_order(&sim);
    assert_eq!(sent.len(), 20, "every request is logged");
    assert!(sent.iter().all(|c| c.len() == 8), "8 chunks each");
    // The server never sends ahead of its timetable (host/src/servers/sim/tests.rs): a
    // late first chunk shortens the span, as the deadlines are absolute.
    assert!(
        sent.iter().all(|c| c[0] >= 30.0 && c[7] >= 100.0),
        "{sent:?}"
    );
    let first: Vec<f64> = sent.iter().map(|c| c[0]).collect();
    let last: Vec<f64> = sent.iter().map(|c| c[7]).collect();
    let ttft = errors_ms(&floats(&ours["ttfts"]), &first);
    assert_the_servers("ttfts", &ttft, -0.02);
    let e2el = errors_ms(&floats(&ours["latencies"]), &last);
    assert_the_servers("latencies", &e2el, -0.02);
    // A request's gaps add up to its span from first to last chunk: the difference of two
    // reads' errors, so either side of the server's.
    let itls: Vec<Vec<f64>> = ours["itls"]
        .as_array()
        .expect("itls")
        .iter()
        .map(floats)
        .collect();
    assert!(itls.iter().all(|g| g.len() == 7), "7 gaps each: {itls:?}");
    let spans: Vec<f64> = itls.iter().map(|g| g.iter().sum()).collect();
    let server_spans: Vec<f64> = sent.iter().map(|c| c[7] - c[0]).collect();
    let gaps = errors_ms(&spans, &server_spans);
    assert_the_servers("itls, summed per request", &gaps, -1000.0);
}

/// `--extra-body` naming a field the runner owns or builds from the dataset flags is
/// refused before anything is sent: `"stream": false` would make every TTFT the whole
/// response time, in silence.
#[test]
fn extra_body_fields_the_runner_owns_exit_2_with_one_line() {
    for (body, field) in [
        (r#"{"stream": false}"#, "`stream` is the runner's own"),
        (
            r#"{"top_k": 5, "stream_options": {"include_usage": false}}"#,
            "`stream_options` is the runner's own",
        ),
        (
            r#"{"max_tokens": 9}"#,
            "`max_tokens` is built from the dataset flags",
        ),
    ] {
        let out = runner(&["bench", "serve", "--dry-run", "--extra-body", body]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{body}: {err}");
        assert!(
            err.starts_with("error: `--extra-body`: ") && err.contains(field),
            "{body}: {err}"
        );
    }
    // Fields of the server's own still go through.
    let out = runner(&[
        "bench",
        "serve",
        "--dry-run",
        "--extra-body",
        r#"{"model": "m", "top_k": 5}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// 160,000 custom prompts load within the setup call's 60 s (they did not when each push
/// walked the whole array: Rhai's size check), and four of them are sent.
#[test]
fn a_custom_dataset_of_160000_prompts_loads() {
    let sim = fast_sim();
    let dir = tempfile::tempdir().expect("temp dir");
    let dataset = dir.path().join("big.jsonl");
    let lines: String = (0..160_000)
        .map(|i| format!("{{\"prompt\": \"question {i}: what is {i} plus one?\"}}\n"))
        .collect();
    std::fs::write(&dataset, lines).unwrap();
    let (port, path) = (port_of(&sim), dataset.display().to_string());
    let out_dir = dir.path().join("out").display().to_string();
    let out = runner(&[
        "bench",
        "serve",
        "--port",
        &port,
        "--model",
        "sim/llm-9b",
        "--dataset-name",
        "custom",
        "--dataset-path",
        &path,
        "--num-prompts",
        "4",
        "--custom-output-len",
        "2",
        "--output",
        &out_dir,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(records_in(&dir.path().join("out")).len(), 4);
}

/// An error in the generated scenario names the user's dataset, never the temporary
/// file the scenario was written to (gone when the line is read).
#[test]
fn an_error_in_the_generated_scenario_names_the_dataset_not_a_temporary_file() {
    let sim = fast_sim();
    let dir = tempfile::tempdir().expect("temp dir");
    let dataset = dir.path().join("bad.jsonl");
    std::fs::write(
        &dataset,
        "{\"prompt\": \"fine\"}\n{\"text\": \"no prompt\"}\n",
    )
    .unwrap();
    let (port, path) = (port_of(&sim), dataset.display().to_string());
    let out = runner(&[
        "bench",
        "serve",
        "--port",
        &port,
        "--model",
        "sim/llm-9b",
        "--dataset-name",
        "custom",
        "--dataset-path",
        &path,
        "--num-prompts",
        "2",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line: {err}"));
    assert!(
        line.contains(&format!("from --dataset-path {path}"))
            && line.contains("line 2 is not")
            && !line.contains("vllm_bench_serve.rhai"),
        "{line}"
    );
}
