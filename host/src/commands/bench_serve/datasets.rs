//! Each vLLM dataset as Rhai: its parameters, and a `requests()` that returns the list of
//! `#{ prompt, input_tokens, output_len }` the way vLLM's sampler builds it (lengths,
//! prefixes, filters and shuffles), from the run's seeded generator and tokenizer.

use super::options::Dataset;
use super::rhai_literal::{param, rhai_str};

/// The dataset's lines of `describe()`'s params.
pub fn params(d: &Dataset) -> String {
    match d {
        Dataset::Random {
            input_len,
            output_len,
            range_ratio,
            prefix_len,
        } => [
            param(
                "input_len",
                input_len.to_string(),
                "--random-input-len (--input-len)",
            ),
            param(
                "output_len",
                output_len.to_string(),
                "--random-output-len (--output-len)",
            ),
            param(
                "range_ratio",
                format!("{range_ratio:?}"),
                "--random-range-ratio: lengths drawn from [len*(1-r), len*(1+r)]",
            ),
            param(
                "prefix_len",
                prefix_len.to_string(),
                "--random-prefix-len: tokens of one prefix before every prompt",
            ),
        ]
        .concat(),
        Dataset::ShareGpt { path, output_len } => [
            param(
                "dataset",
                path_literal(path),
                "--dataset-path: a ShareGPT JSON file",
            ),
            param(
                "output_len",
                output_len.map_or(-1, |v| v as i64).to_string(),
                "--sharegpt-output-len; -1 = the length of the dataset's answer",
            ),
        ]
        .concat(),
        Dataset::Custom { path, output_len } => [
            param(
                "dataset",
                path_literal(path),
                "--dataset-path: JSONL, one #{ prompt } object a line",
            ),
            param(
                "output_len",
                output_len.to_string(),
                "--custom-output-len (--output-len)",
            ),
        ]
        .concat(),
        Dataset::Sonnet { .. } => sonnet_params(d),
        Dataset::PrefixRepetition { .. } => prefix_repetition_params(d),
    }
}

fn path_literal(p: &std::path::Path) -> String {
    rhai_str(&p.display().to_string())
}

fn sonnet_params(d: &Dataset) -> String {
    let Dataset::Sonnet {
        path,
        input_len,
        output_len,
        prefix_len,
    } = d
    else {
        return String::new();
    };
    [
        param(
            "dataset",
            path_literal(path),
            "--dataset-path: a text file of poem lines",
        ),
        param("input_len", input_len.to_string(), "--sonnet-input-len"),
        param("output_len", output_len.to_string(), "--sonnet-output-len"),
        param("prefix_len", prefix_len.to_string(), "--sonnet-prefix-len"),
    ]
    .concat()
}

fn prefix_repetition_params(d: &Dataset) -> String {
    let Dataset::PrefixRepetition {
        prefix_len,
        suffix_len,
        num_prefixes,
        output_len,
    } = d
    else {
        return String::new();
    };
    [
        param(
            "prefix_len",
            prefix_len.to_string(),
            "--prefix-repetition-prefix-len",
        ),
        param(
            "suffix_len",
            suffix_len.to_string(),
            "--prefix-repetition-suffix-len",
        ),
        param(
            "num_prefixes",
            num_prefixes.to_string(),
            "--prefix-repetition-num-prefixes: num_prompts / num_prefixes requests share each",
        ),
        param(
            "output_len",
            output_len.to_string(),
            "--prefix-repetition-output-len (--output-len)",
        ),
    ]
    .concat()
}

/// The dataset's `requests()` function.
pub fn loader(d: &Dataset) -> &'static str {
    match d {
        Dataset::Random { .. } => RANDOM,
        Dataset::ShareGpt { .. } => SHAREGPT,
        Dataset::Sonnet { .. } => SONNET,
        Dataset::Custom { .. } => CUSTOM,
        Dataset::PrefixRepetition { .. } => PREFIX_REPETITION,
    }
}

const RANDOM: &str = r#"
// vLLM's random dataset: one shared prefix, then input and output lengths drawn
// uniformly from [len * (1 - range_ratio), len * (1 + range_ratio)].
fn requests() {
    let r = param("range_ratio");
    let in_lo = (param("input_len").to_float() * (1.0 - r)).floor().to_int();
    let in_hi = (param("input_len").to_float() * (1.0 + r)).ceiling().to_int();
    let out_lo = (param("output_len").to_float() * (1.0 - r)).floor().to_int();
    let out_hi = (param("output_len").to_float() * (1.0 + r)).ceiling().to_int();
    if out_lo < 1 { out_lo = 1; }
    if out_hi < out_lo { out_hi = out_lo; }
    let prefix = if param("prefix_len") > 0 { synthetic_text(param("prefix_len")) } else { "" };
    let reqs = [];
    for i in 0..param("num_prompts") {
        let n = rand_int(in_lo, in_hi);
        reqs.push(#{ prompt: prefix + synthetic_text(n), input_tokens: param("prefix_len") + n, output_len: rand_int(out_lo, out_hi) });
    }
    reqs
}
"#;

const SHAREGPT: &str = r#"
// vLLM's sharegpt dataset: the conversations shuffled, then the first human turn of each
// is the prompt and the length of the first answer is max_tokens; pairs under 4 tokens
// or over 1024 (prompt) / 2048 (prompt + answer) are skipped.
fn requests() {
    let entries = read_json(param("dataset"));
    if type_of(entries) != "array" { throw "the ShareGPT file is not a JSON array of conversations"; }
    if param("shuffle") && entries.len() > 1 { entries = shuffled(entries); }
    let fixed = param("output_len");
    let reqs = [];
    for conv in entries {
        if reqs.len() >= param("num_prompts") { break; }
        let turns = if type_of(conv) == "map" { conv.conversations } else { () };
        if type_of(turns) != "array" || turns.len() < 2 { continue; }
        if type_of(turns[0]) != "map" || type_of(turns[1]) != "map" { continue; }
        if type_of(turns[0].value) != "string" || type_of(turns[1].value) != "string" { continue; }
        let prompt = turns[0].value;
        let prompt_len = count_tokens(prompt);
        let out = if fixed >= 0 { fixed } else { count_tokens(turns[1].value) };
        if prompt_len < 4 || (fixed < 0 && out < 4) { continue; }
        if prompt_len > 1024 || prompt_len + out > 2048 { continue; }
        reqs.push(#{ prompt: prompt, input_tokens: prompt_len, output_len: out });
    }
    reqs
}
"#;

const SONNET: &str = r#"
// vLLM's sonnet dataset: "Pick as many lines as you can from these poem lines:" and the
// file's first lines as a prefix shared by every prompt, then lines drawn at random
// until the prompt is about input_len tokens.
fn requests() {
    let lines = [];
    for line in read_text(param("dataset")).split("\n") {
        let t = line;
        t.trim();
        if t.len() > 0 { lines.push(line + "\n"); }
    }
    if lines.is_empty() { throw "the sonnet file has no line"; }
    let base = "Pick as many lines as you can from these poem lines:\n";
    let base_len = count_tokens(base);
    let total = 0;
    for line in lines { total += count_tokens(line); }
    let avg = total.to_float() / lines.len().to_float();
    let num_input = ((param("input_len") - base_len).to_float() / avg).round().to_int();
    let num_prefix = ((param("prefix_len") - base_len).to_float() / avg).round().to_int();
    if num_prefix < 0 { num_prefix = 0; }
    if num_prefix > lines.len() { num_prefix = lines.len(); }
    if num_input < num_prefix { throw "sonnet: input_len must be at least prefix_len"; }
    let prefix = base;
    for i in 0..num_prefix { prefix += lines[i]; }
    let reqs = [];
    for i in 0..param("num_prompts") {
        let prompt = prefix;
        for k in 0..(num_input - num_prefix) { prompt += choice(lines); }
        reqs.push(#{ prompt: prompt, input_tokens: count_tokens(prompt), output_len: param("output_len") });
    }
    reqs
}
"#;

const CUSTOM: &str = r#"
// vLLM's custom dataset: JSONL, each line an object with a `prompt`; shuffled, then the
// first num_prompts, each answered with output_len tokens.
fn requests() {
    let prompts = [];
    for line in read_text(param("dataset")).split("\n") {
        let t = line;
        t.trim();
        if t.len() == 0 { continue; }
        let row = parse_json(t);
        if type_of(row) != "map" || type_of(row.prompt) != "string" {
            throw `each line of the custom dataset must be a JSON object with a string "prompt", line ${prompts.len() + 1} is not`;
        }
        prompts.push(row.prompt);
    }
    if param("shuffle") && prompts.len() > 1 { prompts = shuffled(prompts); }
    if prompts.len() > param("num_prompts") { prompts.truncate(param("num_prompts")); }
    let reqs = [];
    for p in prompts {
        reqs.push(#{ prompt: p, input_tokens: count_tokens(p), output_len: param("output_len") });
    }
    reqs
}
"#;

const PREFIX_REPETITION: &str = r#"
// vLLM's prefix_repetition dataset: num_prefixes prefixes, each shared by
// num_prompts / num_prefixes prompts with their own suffix, in shuffled order.
fn requests() {
    let per = param("num_prompts") / param("num_prefixes");
    if per < 1 { throw "prefix_repetition: num_prompts must be at least num_prefixes"; }
    let len = param("prefix_len") + param("suffix_len");
    let reqs = [];
    for g in 0..param("num_prefixes") {
        let prefix = synthetic_text(param("prefix_len"));
        for i in 0..per {
            reqs.push(#{ prompt: prefix + synthetic_text(param("suffix_len")), input_tokens: len, output_len: param("output_len") });
        }
    }
    if param("shuffle") && reqs.len() > 1 { reqs = shuffled(reqs); }
    reqs
}
"#;
