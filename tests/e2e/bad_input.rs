//! Bad command lines, files and scenarios: each gets one line on stderr that says what is
//! wrong, a non-zero exit code (2 for a command line clap refuses, 1 for everything found
//! later), and never a panic or a backtrace, even with RUST_BACKTRACE=1.
//!
//! `cargo test -p runner --test e2e bad_input -- --nocapture` prints the table of inputs,
//! messages and exit codes (the issue note quotes it).

use std::path::Path;
use std::process::Command;

use crate::support::*;

struct Case {
    what: &'static str,
    args: Vec<String>,
    code: i32,
    needles: &'static [&'static str],
}

fn case(what: &'static str, args: &[&str], code: i32, needles: &'static [&'static str]) -> Case {
    Case {
        what,
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        needles,
    }
}

/// Files that are broken on purpose, written fresh for each run.
fn write_bad_files(dir: &Path) {
    std::fs::write(dir.join("not_utf8.rhai"), b"\xff\xfe\x00 fn describe() {}").unwrap();
    std::fs::write(dir.join("tokenizer.json"), "{\"model\": ").unwrap();
    std::fs::write(dir.join("not_json.json"), "[{\"conversations\": [").unwrap();
    // Entries that are not conversations at all.
    std::fs::write(
        dir.join("sharegpt_broken.json"),
        r#"[42, {"conversations": "x"}, {"conversations": [1, 2]}]"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("a_directory.json")).unwrap();
}

/// The files the cases name: the bundled scenarios, the broken files of
/// [`write_bad_files`] in `dir`, and the broken scenarios of tests/fixtures.
struct Inputs {
    dir: String,
    throughput: String,
    sharegpt: String,
    not_utf8: String,
    tokenizer: String,
    not_json: String,
    broken: String,
    directory: String,
    huge: String,
    no_prompt: String,
    wrong_type: String,
    prompt_number: String,
    bad_max: String,
    syntax: String,
    runtime: String,
    endless: String,
}

impl Inputs {
    fn new(dir: &str) -> Inputs {
        let file = |name: &str| format!("{dir}/{name}");
        Inputs {
            dir: dir.to_string(),
            throughput: scenario("throughput.rhai"),
            sharegpt: scenario("sharegpt.rhai"),
            not_utf8: file("not_utf8.rhai"),
            tokenizer: file("tokenizer.json"),
            not_json: file("not_json.json"),
            broken: file("sharegpt_broken.json"),
            directory: file("a_directory.json"),
            huge: fixture("huge_string.rhai"),
            no_prompt: fixture("no_prompt.rhai"),
            wrong_type: fixture("wrong_type.rhai"),
            prompt_number: fixture("prompt_number.rhai"),
            bad_max: fixture("bad_request.rhai"),
            syntax: fixture("syntax_error.rhai"),
            runtime: fixture("runtime_error.rhai"),
            endless: fixture("endless.rhai"),
        }
    }
}

fn cases(dir: &str) -> Vec<Case> {
    let inputs = Inputs::new(dir);
    [
        command_line_cases(&inputs),
        run_flag_cases(&inputs),
        file_cases(&inputs),
        guest_cases(&inputs),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The command line's own mistakes: flags, parameters and their values.
fn command_line_cases(inputs: &Inputs) -> Vec<Case> {
    let t = inputs.throughput.as_str();
    vec![
        case(
            "unknown flag",
            &[t, "--bogus"],
            2,
            &["unexpected argument '--bogus'"],
        ),
        case("no scenario", &["run"], 2, &["<SCENARIO>"]),
        case(
            "-p without =",
            &[t, "-p", "requests"],
            2,
            &["expected NAME=VALUE"],
        ),
        case(
            "unknown -p name",
            &[t, "-p", "request=5"],
            1,
            &["unknown parameter `request`"],
        ),
        case(
            "-p of the wrong type",
            &[t, "-p", "requests=many"],
            1,
            &["`requests`", "must be an integer"],
        ),
        case(
            "-p float given text",
            &[t, "-p", "rate=fast"],
            1,
            &["`rate`", "must be a number"],
        ),
        case(
            "-p out of range",
            &[t, "-p", "requests=-3"],
            1,
            &["max_requests", "non-negative"],
        ),
    ]
}

/// Flags of a run that parse but cannot be used: timeouts, limits, the target, outputs.
fn run_flag_cases(inputs: &Inputs) -> Vec<Case> {
    let t = inputs.throughput.as_str();
    let not_json = &inputs.not_json;
    vec![
        case(
            "--api not an endpoint",
            &[t, "--api", "grpc"],
            2,
            &["possible values: completions, chat"],
        ),
        case(
            "zero --request-timeout",
            &[t, "--request-timeout", "0"],
            2,
            &["above zero"],
        ),
        case(
            "bad --first-token-timeout",
            &[t, "--first-token-timeout", "soon"],
            2,
            &["expected a duration"],
        ),
        case(
            "--max-error-rate above 1",
            &[t, "--max-error-rate", "1.5"],
            2,
            &["fraction of failed requests"],
        ),
        case(
            "bad --percentiles",
            &[t, "--percentiles", "50,abc"],
            1,
            &["--percentiles", "abc"],
        ),
        case(
            "bad --goodput",
            &[t, "--goodput", "ttft:abc"],
            1,
            &["--goodput", "abc"],
        ),
        case(
            "invalid URL",
            &[t, "--target", "not a url"],
            1,
            &["invalid target URL `not a url`"],
        ),
        case(
            "URL with a bad port",
            &[t, "--target", "http://127.0.0.1:99999"],
            1,
            &["invalid target URL"],
        ),
        case(
            "URL of another scheme",
            &[t, "--target", "ftp://127.0.0.1"],
            1,
            &["invalid target URL"],
        ),
        case(
            "--data-dir missing",
            &[t, "--data-dir", "/nonexistent/dir"],
            1,
            &["/nonexistent/dir", "not a directory"],
        ),
        case(
            "--output is a file",
            &[t, "--output", not_json],
            1,
            &["cannot create output directory"],
        ),
    ]
}

fn file_cases(inputs: &Inputs) -> Vec<Case> {
    let (t, s, dir) = (
        inputs.throughput.as_str(),
        inputs.sharegpt.as_str(),
        inputs.dir.as_str(),
    );
    let Inputs {
        not_utf8,
        tokenizer,
        not_json,
        broken,
        directory,
        ..
    } = inputs;
    vec![
        case(
            "scenario file missing",
            &["/nonexistent/x.rhai"],
            1,
            &["not found"],
        ),
        case(
            "scenario not UTF-8",
            &[not_utf8],
            1,
            &["not_utf8.rhai", "cannot read the scenario", "UTF-8"],
        ),
        case(
            "unknown tokenizer name",
            &[t, "--tokenizer", "gpt9"],
            1,
            &["unknown tokenizer `gpt9`"],
        ),
        case(
            "tokenizer file missing",
            &[t, "--tokenizer", "/nonexistent/tokenizer.json"],
            1,
            &["tokenizer file not found"],
        ),
        case(
            "tokenizer file not a tokenizer",
            &[t, "--tokenizer", tokenizer],
            1,
            &["not a usable Hugging Face tokenizer.json"],
        ),
        case(
            "dataset file missing",
            &[s, "-p", "dataset=/nonexistent/sg.json", "--data-dir", dir],
            1,
            &["cannot read `/nonexistent/sg.json`"],
        ),
        case(
            "dataset is a directory",
            &[s, "-p", &format!("dataset={directory}"), "--data-dir", dir],
            1,
            &["cannot read", "directory"],
        ),
        case(
            "dataset outside allowed dirs",
            &[s, "-p", &format!("dataset={not_json}")],
            1,
            &["outside what this scenario may read", "--data-dir"],
        ),
        case(
            "dataset not JSON",
            &[s, "-p", &format!("dataset={not_json}"), "--data-dir", dir],
            1,
            &["not valid JSON"],
        ),
        case(
            "ShareGPT entry not a conversation",
            &[s, "-p", &format!("dataset={broken}"), "--data-dir", dir],
            1,
            &["sharegpt.rhai:", "error in `phases`"],
        ),
    ]
}

/// Scenarios that fail in their own code or return what the runner cannot send.
fn guest_cases(inputs: &Inputs) -> Vec<Case> {
    let Inputs {
        huge,
        no_prompt,
        wrong_type,
        prompt_number,
        bad_max,
        syntax,
        runtime,
        endless,
        ..
    } = inputs;
    vec![
        case(
            "Rhai syntax error",
            &[syntax],
            1,
            &["syntax_error.rhai:6:13", "syntax error"],
        ),
        case(
            "Rhai runtime error",
            &[runtime],
            1,
            &["runtime_error.rhai:6:", "next_request", "no_such_method"],
        ),
        case(
            "endless loop",
            &[endless],
            1,
            &["endless.rhai", "operations"],
        ),
        case(
            "huge string",
            &[huge],
            1,
            &["huge_string.rhai", "next_request", "size limit"],
        ),
        case(
            "negative max_tokens",
            &[bad_max],
            1,
            &["`max_tokens` must be a positive integer, got -5"],
        ),
        case(
            "none of prompt, messages and inputs",
            &[no_prompt],
            1,
            &["none of `prompt`, `messages` and `inputs`"],
        ),
        case(
            "max_tokens of the wrong type",
            &[wrong_type],
            1,
            &["`max_tokens` must be a positive integer, got the string \"ten\""],
        ),
        case(
            "prompt of the wrong type",
            &[prompt_number],
            1,
            &["`prompt` must be a string or an array of token ids"],
        ),
    ]
}

#[test]
fn each_bad_input_gets_one_clear_line_and_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    write_bad_files(dir.path());
    let d = dir.path().display().to_string();
    let mut table = String::from("| input | message | exit |\n|---|---|---|\n");
    let mut failures = Vec::new();
    let cases = cases(&d);
    let small_tokenizer = repo()
        .join("tests/fixtures/tokenizer/wordlevel.json")
        .display()
        .to_string();
    // Four at a time: each one loads a tokenizer before it fails.
    let outputs: Vec<std::process::Output> = cases
        .chunks(4)
        .flat_map(|group| {
            let children: Vec<_> = group
                .iter()
                .map(|c| {
                    // A tiny tokenizer loads at once; the cases about tokenizers bring theirs.
                    let tokenizer: &[&str] = if c.args.iter().any(|a| a == "--tokenizer") {
                        &[]
                    } else {
                        &["--tokenizer", &small_tokenizer]
                    };
                    Command::new(env!("CARGO_BIN_EXE_runner"))
                        .args(&c.args)
                        .args(tokenizer)
                        .arg("-q")
                        .env_remove("OPENAI_API_KEY")
                        .env("RUST_BACKTRACE", "1")
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .expect("the runner starts")
                })
                .collect();
            children
                .into_iter()
                .map(|ch| ch.wait_with_output().expect("the runner exits"))
                .collect::<Vec<_>>()
        })
        .collect();
    for (c, out) in cases.iter().zip(outputs) {
        let err = stderr(&out);
        let code = out.status.code();
        let line = err.trim_end();
        let ok = code == Some(c.code)
            && line.lines().count() == 1
            && line.starts_with("error: ")
            && !err.contains("panicked")
            && !err.contains("backtrace")
            && c.needles.iter().all(|n| line.contains(n));
        if !ok {
            failures.push(format!(
                "{}: exit {code:?} (want {}), stderr:\n{err}",
                c.what, c.code
            ));
        }
        let shown = line
            .replace(&d, "$TMP")
            .replace(&repo().display().to_string(), ".");
        table += &format!(
            "| {} | `{}` | {} |\n",
            c.what,
            shown.replace('|', "\\|"),
            code.unwrap_or(-1)
        );
    }
    eprintln!("{table}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
