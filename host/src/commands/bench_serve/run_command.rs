//! The `runner run` command line that runs the generated scenario as the flags asked:
//! the one bench serve runs itself, and the one it prints for the emitted file.

use std::path::Path;

use super::options::BenchOptions;
use super::vllm_json::percentile_word;

/// The phase the generated scenario measures (`--profile` profiles it).
pub const PHASE: &str = "bench_serve";

/// `run SCENARIO …`: every flag that shapes the request stream or where it goes.
pub fn run_args(o: &BenchOptions, scenario: &Path) -> Vec<String> {
    let r = &o.run;
    let mut a: Vec<String> = vec!["run".into(), scenario.display().to_string()];
    let mut flag = |name: &str, value: String| {
        a.push(name.into());
        a.push(value);
    };
    flag("--target", r.target.clone());
    flag("--seed", o.workload.seed.to_string());
    flag("--tokenizer", r.tokenizer.clone());
    flag("--api", r.api.into());
    let percentiles: Vec<String> = r
        .metric_percentiles
        .iter()
        .map(|p| percentile_word(*p))
        .collect();
    flag("--percentiles", percentiles.join(","));
    if let Some(model) = &r.model_name {
        flag("--model", model.clone());
    }
    for h in &r.headers {
        flag("--header", h.clone());
    }
    for g in &r.goodput {
        flag("--goodput", g.clone());
    }
    if let Some(prefix) = &r.request_id_prefix {
        flag("--request-id-prefix", prefix.clone());
    }
    if r.profile {
        flag("--profile-phase", PHASE.into());
    }
    if let Some(dir) = o.workload.dataset.path().and_then(Path::parent) {
        flag("--data-dir", dir.display().to_string());
    }
    // vLLM's `generated_texts`: the run keeps the answers' text only when asked.
    if o.save.save_detailed {
        a.push("--keep-answer-text".into());
    }
    a
}

/// The arguments as one shell line, each quoted where the shell would split or expand it.
pub fn shell_line(args: &[String]) -> String {
    let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    format!("runner {}", quoted.join(" "))
}

fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
    match plain {
        true => a.to_string(),
        false => format!("'{}'", a.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_what_the_shell_would_split() {
        let args = ["run".to_string(), "a b".into(), "it's".into(), "x:1".into()];
        assert_eq!(shell_line(&args), r"runner run 'a b' 'it'\''s' x:1");
    }
}
