//! `runner trace analyze FILE`: what a trace will do before it is replayed, as text or
//! `--json`.

use std::fmt::Write as _;

use anyhow::Result;

use crate::commands::cli::TraceAnalyzeArgs;
use crate::workloads::trace;
use crate::workloads::trace::analysis::{self, PrefixReuse, TraceAnalysis};

pub fn analyze(a: TraceAnalyzeArgs) -> Result<()> {
    if a.block_tokens == Some(0) {
        anyhow::bail!("--block-tokens must be at least 1");
    }
    let trace = trace::read(&a.file)?;
    let result = analysis::analyze(&trace, a.block_tokens, &a.cache_blocks);
    if a.json {
        let mut value = serde_json::to_value(&result)?;
        value["file"] = a.file.display().to_string().into();
        crate::outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        crate::out!("{}", render(&a.file.display().to_string(), &result));
    }
    Ok(())
}

fn percent(f: f64) -> String {
    format!("{:.2} %", f * 100.0)
}

/// The analysis as aligned text lines.
fn render(file: &str, r: &TraceAnalysis) -> String {
    let mut rows: Vec<(String, String)> = vec![
        ("Trace".into(), format!("{file} ({})", r.format)),
        ("Requests".into(), r.requests.to_string()),
        ("Time span (s)".into(), format!("{:.3}", r.span_s)),
        (
            "Request rate (req/s)".into(),
            r.rate_per_s.map_or("-".into(), |v| format!("{v:.3}")),
        ),
    ];
    for (name, t) in [("Input", &r.input_tokens), ("Output", &r.output_tokens)] {
        rows.push((
            format!("{name} tokens"),
            format!("total {}, mean {:.1}", t.total, t.mean),
        ));
    }
    match &r.sessions {
        Some(s) => {
            rows.push((
                "Sessions".into(),
                format!(
                    "{} ({} root, {} child chats)",
                    s.count, s.roots, s.child_chats
                ),
            ));
            rows.push((
                "Turns per session".into(),
                format!("mean {:.2}, max {}", s.turns_mean, s.turns_max),
            ));
            rows.push(("Child chats".into(), s.child_chats.to_string()));
        }
        None => rows.push((
            "Sessions".into(),
            format!("unknown ({} has no session ids)", r.format),
        )),
    }
    match &r.prefix {
        Some(p) => prefix_rows(p, &mut rows),
        None => rows.push((
            "Prefix reuse".into(),
            "no hash ids: prefix reuse unknown".into(),
        )),
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for (k, v) in rows {
        let _ = writeln!(out, "{:<width$}{v}", format!("{k}:"));
    }
    out
}

fn prefix_rows(p: &PrefixReuse, rows: &mut Vec<(String, String)>) {
    rows.push((
        "Hash-id blocks".into(),
        format!(
            "total {}, distinct {}, seen before {} ({} tokens a block)",
            p.blocks,
            p.distinct,
            percent(p.seen_before),
            p.block_tokens
        ),
    ));
    for h in &p.hit_rates {
        let size = match h.cache_blocks {
            None => "unlimited".to_string(),
            Some(n) => format!("{n} blocks ({} tokens)", n.saturating_mul(p.block_tokens)),
        };
        rows.push((
            format!("Prefix-cache hit rate, {size}"),
            format!("{} ({} of {} blocks)", percent(h.rate), h.hits, h.blocks),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::trace::TraceFormat;

    #[test]
    fn a_trace_without_hash_ids_says_so() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.6805900,396,109\n";
        let t = trace::parse(std::path::Path::new("x.csv"), text).unwrap();
        assert_eq!(t.format, TraceFormat::Azure);
        let shown = render("x.csv", &analysis::analyze(&t, None, &[0]));
        assert!(
            shown.contains("no hash ids: prefix reuse unknown"),
            "{shown}"
        );
        assert!(shown.contains("Request rate (req/s):"), "{shown}");
        assert!(shown.contains("0.500"), "{shown}");
    }

    /// u64::MAX tokens (which wrapped the total to 9), a 1e308 timestamp (a span of 309
    /// digits) and a 3 MB cell (quoted whole) are each one short line naming the field.
    #[test]
    fn hostile_numbers_and_cells_are_refused_in_a_short_line() {
        let path = std::path::Path::new("t.jsonl");
        let refused = |text: &str| trace::parse(path, text).unwrap_err().to_string();
        assert_eq!(
            refused("{\"timestamp\": 0, \"input_length\": 18446744073709551615, \"output_length\": 1}\n"),
            "t.jsonl:1: field `input_length`: 18446744073709551615 tokens is more than any request's: at most 4294967296"
        );
        assert_eq!(
            refused("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 1e308, \"input_length\": 1, \"output_length\": 1}\n"),
            "t.jsonl:2: field `timestamp`: 1.000e305 s is past 1e10 s (the year 2286): give the trace's own times"
        );
        let cell = "9".repeat(3 << 20);
        let e = refused(&format!(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,{cell}x,1\n"
        ));
        assert!(e.len() < 400, "{} bytes", e.len());
        assert!(
            e.starts_with("t.jsonl:2: field `ContextTokens`: expected a token count, got `999")
                && e.ends_with("… (3145729 bytes)`"),
            "{e}"
        );
    }

    /// Totals saturate where a trace built in code holds counts past the reader's bound.
    #[test]
    fn token_totals_saturate() {
        let request = |tokens| trace::TraceRequest {
            at_s: 0.0,
            input_tokens: tokens,
            output_tokens: 1,
            hash_ids: None,
            chat: None,
        };
        let t = trace::Trace {
            format: TraceFormat::Azure,
            requests: vec![request(u64::MAX), request(10)],
        };
        let shown = render("x", &analysis::analyze(&t, None, &[0]));
        assert!(
            shown.contains("total 18446744073709551615, mean"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_field_is_named_with_its_line() {
        let text = "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n\n{\"timestamp\": 5, \"input_length\": \"x\", \"output_length\": 1}\n";
        let e = trace::parse(std::path::Path::new("t.jsonl"), text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.jsonl:3: field `input_length`: expected a non-negative integer"
        );
    }
}
