//! `runner compare`'s rows of the server's metrics: each known gauge's mean and maximum,
//! each counter's rate, the prefix-cache hit rate and each histogram's mean and
//! percentiles, where both results scraped them (result.json's `runner.server_metrics`).

use serde_json::{Map, Value};

use super::compare_row::Row;
use crate::metrics::catalogue::Better;

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
                ("p50_ms", "p50 (ms)", Better::Lower),
                ("p99_ms", "p99 (ms)", Better::Lower),
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
    out
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
}
