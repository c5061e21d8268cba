//! result.json of real runs against the JSON Schema committed in schema/result.schema.json
//! (derived from the Rust types of host/src/outputs/report/result_file.rs): a single-phase run, a
//! multi-phase run with a warm-up, notes and thresholds, and a merged sharded run.

use std::path::Path;

use crate::support::{repo, runner, scenario, stderr, stdout};

/// Two measured phases after a warm-up, tagged requests, a note, a declared threshold.
const MULTI: &str = r#"
fn describe() {
    #{ name: "schema-multi", description: "warm-up, two phases, tags, a note", params: [
        #{ name: "seed", value: 5, help: "seed" } ], thresholds: ["error_rate<0.5"] }
}
fn phases() {
    [#{ name: "warm", warmup: true, arrival: #{ process: "closed", concurrency: 2 }, max_requests: 4 },
     #{ name: "one", arrival: #{ process: "poisson", rate: 200.0 }, max_requests: 12 },
     #{ name: "two", arrival: #{ process: "closed", concurrency: 3 }, max_requests: 9 }]
}
fn next_request(phase, index) {
    let n = rand_int(10, 80);
    #{ prompt: synthetic_text(n), input_tokens: n, max_tokens: 4, ignore_eos: true,
       tag: if n > 40 { "long" } else { "short" } }
}
fn stop(s) { note("answer", 42); false }
"#;

const FAST: [&str; 6] = [
    "--sim-profile",
    "fixed",
    "--sim-ttft-ms",
    "2",
    "--sim-itl-ms",
    "1",
];

pub fn validator() -> jsonschema::Validator {
    let path = repo().join("schema/result.schema.json");
    let text = std::fs::read_to_string(&path).expect("the committed schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

/// Runs `runner ARGS…` (successfully) and returns its `--output` result.json.
fn result_of(args: &[&str], dir: &Path) -> serde_json::Value {
    let out = runner(args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    serde_json::from_str(&text).expect("result.json is JSON")
}

pub fn assert_valid(v: &jsonschema::Validator, what: &str, result: &serde_json::Value) {
    let errors: Vec<String> = v
        .iter_errors(result)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {}", errors.join("\n"));
}

#[test]
fn results_of_real_runs_follow_the_committed_schema() {
    let v = validator();
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = |name: &str| tmp.path().join(name);
    let dir = |name: &str| out(name).display().to_string();

    let mut args = vec![
        scenario("throughput.rhai"),
        "-p".into(),
        "requests=20".into(),
    ];
    args.extend(["--threshold".into(), "p99_ttft_ms<60000".into()]);
    args.extend(["--output".into(), dir("single")]);
    args.extend(FAST.iter().map(|s| s.to_string()));
    let single = result_of(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &out("single"),
    );
    assert!(single.get("phases").is_none() && single.get("completed").is_some());
    assert_valid(&v, "single phase", &single);

    let script = out("multi.rhai");
    std::fs::write(&script, MULTI).expect("write scenario");
    let script = script.display().to_string();
    let mut args = vec![script.as_str(), "--output"];
    let multi_dir = dir("multi");
    args.push(&multi_dir);
    args.extend(FAST);
    let multi = result_of(&args, &out("multi"));
    assert_eq!(multi["phases"].as_array().map(Vec::len), Some(2));
    assert!(multi["warmup_phases"].is_array() && multi["scenario_result"].is_object());
    assert_valid(&v, "multi-phase", &multi);

    let shard_dirs: Vec<String> = (0..2).map(|i| dir(&format!("shard-{i}"))).collect();
    for (i, d) in shard_dirs.iter().enumerate() {
        let shard = format!("{i}/2");
        let mut args = vec![script.as_str(), "--shard", &shard, "--output", d, "-q"];
        args.extend(FAST);
        let o = runner(&args);
        assert!(o.status.success(), "shard {shard}: {}", stderr(&o));
    }
    let merged_dir = dir("merged");
    let mut args = vec!["merge", "-q", "--output", &merged_dir];
    args.extend(shard_dirs.iter().map(String::as_str));
    let merged = result_of(&args, &out("merged"));
    assert_eq!(merged["shards"]["count"], serde_json::json!(2));
    assert_valid(&v, "merged", &merged);

    // The schema is not vacuous: a result with a misspelt metric key fails it.
    let mut wrong = single.clone();
    wrong["completed_requests"] = serde_json::json!(1);
    assert!(!v.is_valid(&wrong), "an unknown key passed the schema");
}
