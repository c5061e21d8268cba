//! `runner compare`'s rows of the server's metrics: each known gauge's mean and maximum,
//! each counter's rate, the prefix-cache hit rate and each histogram's mean and
//! percentiles, where both results scraped them (result.json's `runner.server_metrics`).
//! A histogram's percentiles are interpolated inside Prometheus buckets (vLLM's TTFT
//! buckets jump from 40 to 60 to 80 ms), so they are shown but never name a winner: the
//! true values may lie anywhere in their buckets and can point the other way than the
//! client's own. The mean (sum over count) is exact and does.

use serde_json::{Map, Value};

use super::row::Row;
use crate::measuring::metrics::catalogue::Better;

/// The server rows of a pair of phases (nothing unless both were scraped).
pub fn rows(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<Row> {
    let section = |m: &Map<String, Value>| m.get("runner")?.get("server_metrics").cloned();
    let (Some(a), Some(b)) = (section(a), section(b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut row = |key: String, label: String, better: Better, x: Option<f64>, y: Option<f64>| {
        if let (Some(a), Some(b)) = (x, y) {
            out.push(Row {
                coarse: key.ends_with(":p50_ms") || key.ends_with(":p99_ms"),
                key,
                label,
                a,
                b,
                better,
            });
        }
    };
    let fields = [
        (
            "gauges",
            &[
                ("mean", "mean", Better::Neither),
                ("max", "max", Better::Neither),
            ][..],
        ),
        ("counters", &[("rate", "per s", Better::Neither)][..]),
        (
            "histograms",
            &[
                ("mean_ms", "mean (ms)", Better::Lower),
                // From buckets: coarse, no winner (the module's comment).
                ("p50_ms", "p50 ≈ (ms, from buckets)", Better::Lower),
                ("p99_ms", "p99 ≈ (ms, from buckets)", Better::Lower),
            ][..],
        ),
    ];
    for (list, stats) in fields {
        for item in a[list].as_array().into_iter().flatten() {
            let name = item["name"].as_str().unwrap_or_default();
            let other = b[list]
                .as_array()
                .and_then(|all| all.iter().find(|o| o["name"] == name));
            let Some(other) = other else { continue };
            let meaning = item["meaning"].as_str().unwrap_or(name);
            // "server TTFT" is already the server's: "Server TTFT", not "Server server TTFT".
            let meaning = meaning.strip_prefix("server ").unwrap_or(meaning);
            for (field, words, better) in stats {
                row(
                    format!("server:{name}:{field}"),
                    format!("Server {meaning} {words}"),
                    *better,
                    item[*field].as_f64(),
                    other[*field].as_f64(),
                );
            }
        }
    }
    row(
        "server:prefix_cache_hit_rate".into(),
        "Server prefix-cache hit rate".into(),
        Better::Higher,
        a["prefix_cache_hit_rate"].as_f64(),
        b["prefix_cache_hit_rate"].as_f64(),
    );
    out.extend(section_rows(
        &a,
        &b,
        "spec_decode",
        "Server spec-decode",
        &SPEC_DECODE,
    ));
    out.extend(section_rows(&a, &b, "energy", "Energy", &ENERGY));
    out
}

/// A section's rows: field, words and which way is better.
type SectionRows = [(&'static str, &'static str, Better)];

/// Speculative decoding (servers/server_metrics/spec_decode.rs): more accepted is better.
const SPEC_DECODE: [(&str, &str, Better); 2] = [
    ("acceptance_rate", "acceptance rate", Better::Higher),
    (
        "mean_acceptance_length",
        "mean acceptance length",
        Better::Higher,
    ),
];

/// Energy (servers/server_metrics/energy.rs): fewer joules per output token is better.
const ENERGY: [(&str, &str, Better); 3] = [
    ("joules_per_token", "joules per output token", Better::Lower),
    (
        "tokens_per_joule",
        "output tokens per joule",
        Better::Higher,
    ),
    ("mean_watts", "mean power (W)", Better::Neither),
];

/// The rows of the server section's own `section` object (`spec_decode`, `energy`),
/// where both results have it: exact figures, never coarse.
fn section_rows(
    a: &Value,
    b: &Value,
    section: &str,
    words: &str,
    fields: &SectionRows,
) -> Vec<Row> {
    let (a, b) = (&a[section], &b[section]);
    fields
        .iter()
        .filter_map(|&(field, what, better)| {
            Some(Row {
                key: format!("server:{section}:{field}"),
                label: format!("{words} {what}"),
                a: a[field].as_f64()?,
                b: b[field].as_f64()?,
                better,
                coarse: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn phase(waiting_max: f64, hit_rate: f64) -> Map<String, Value> {
        let v = json!({ "runner": { "server_metrics": {
            "samples": 3,
            "gauges": [{ "name": "vllm:num_requests_waiting", "meaning": "requests waiting",
                         "last": 0.0, "mean": 1.0, "max": waiting_max, "above": null }],
            "counters": [], "histograms": [],
            "prefix_cache_hit_rate": hit_rate,
        }}});
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn both_sides_scraped_give_rows_and_one_side_gives_none() {
        let rows = rows(&phase(4.0, 0.5), &phase(9.0, 0.7));
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Server requests waiting mean",
                "Server requests waiting max",
                "Server prefix-cache hit rate"
            ]
        );
        assert_eq!((rows[1].a, rows[1].b), (4.0, 9.0));
        assert_eq!(rows[2].b_wins(), Some(true));
        assert!(super::rows(&phase(1.0, 0.1), &Map::new()).is_empty());
    }

    /// A phase whose server drafted with `rate` and `length`.
    fn drafted(rate: f64, length: f64) -> Map<String, Value> {
        let v = json!({ "runner": { "server_metrics": {
            "samples": 3, "gauges": [], "counters": [], "histograms": [],
            "prefix_cache_hit_rate": null,
            "spec_decode": { "source": "counters", "drafts": 10.0, "draft_tokens": 30.0,
                             "accepted_tokens": 15.0, "acceptance_rate": rate,
                             "mean_acceptance_length": length, "per_position": [] },
        }}});
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn spec_decode_rows_set_both_sides_and_the_higher_wins() {
        let rows = rows(&drafted(0.4, 2.2), &drafted(0.6, 2.8));
        let got: Vec<(&str, f64, f64, Option<bool>)> = rows
            .iter()
            .map(|r| (r.label.as_str(), r.a, r.b, r.b_wins()))
            .collect();
        assert_eq!(
            got,
            [
                ("Server spec-decode acceptance rate", 0.4, 0.6, Some(true)),
                (
                    "Server spec-decode mean acceptance length",
                    2.2,
                    2.8,
                    Some(true)
                ),
            ]
        );
        // One side without a drafter: no row.
        assert!(super::rows(&drafted(0.4, 2.2), &ttft(1.0, 1.0)).is_empty());
    }

    /// A phase that used `joules` for 100 output tokens over 10 s.
    fn energy(joules: f64) -> Map<String, Value> {
        let v = json!({ "runner": { "server_metrics": {
            "samples": 0, "gauges": [], "counters": [], "histograms": [],
            "prefix_cache_hit_rate": null,
            "energy": { "exporters": 1, "scrapes": 10, "source": "counter", "joules": joules,
                        "seconds": 10.0, "mean_watts": joules / 10.0, "output_tokens": 100,
                        "joules_per_token": joules / 100.0, "tokens_per_joule": 100.0 / joules },
        }}});
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn energy_rows_set_both_sides_and_fewer_joules_per_token_win() {
        let rows = rows(&energy(200.0), &energy(100.0));
        let got: Vec<(&str, f64, f64, Option<bool>)> = rows
            .iter()
            .map(|r| (r.label.as_str(), r.a, r.b, r.b_wins()))
            .collect();
        assert_eq!(
            got,
            [
                ("Energy joules per output token", 2.0, 1.0, Some(true)),
                ("Energy output tokens per joule", 0.5, 1.0, Some(true)),
                ("Energy mean power (W)", 20.0, 10.0, None),
            ]
        );
        assert!(super::rows(&energy(1.0), &ttft(1.0, 1.0)).is_empty());
    }

    /// A phase whose server TTFT histogram has `mean` and `p50` (ms).
    fn ttft(mean: f64, p50: f64) -> Map<String, Value> {
        let v = json!({ "runner": { "server_metrics": {
            "samples": 3, "gauges": [], "counters": [],
            "histograms": [{ "name": "vllm:time_to_first_token_seconds",
                             "meaning": "server TTFT", "count": 10.0,
                             "mean_ms": mean, "p50_ms": p50, "p90_ms": p50, "p99_ms": p50 }],
            "prefix_cache_hit_rate": null,
        }}});
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn histogram_rows_say_server_once_and_percentiles_name_no_winner() {
        // The means point one way, the bucket-interpolated medians the other.
        let rows = rows(&ttft(50.0, 55.0), &ttft(45.0, 58.0));
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Server TTFT mean (ms)",
                "Server TTFT p50 ≈ (ms, from buckets)",
                "Server TTFT p99 ≈ (ms, from buckets)"
            ]
        );
        assert_eq!(rows[0].b_wins(), Some(true), "the exact mean decides");
        assert!(rows[1].coarse && rows[2].coarse && !rows[0].coarse);
        assert_eq!(rows[1].b_wins(), None);
    }
}
