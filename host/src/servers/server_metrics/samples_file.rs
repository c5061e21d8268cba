//! server_metrics.jsonl: one JSON object per scrape, written as it is taken:
//! `{"t_s": seconds since the run began, "phase": index or null (between phases),
//! "values": {name: value, ...}, "buckets": {histogram: [[le, cumulative count], ...]}}`,
//! values summed over label sets; `le` is a string, as the exposition writes it (`+Inf`).
//! With several endpoints (one per target) `values` and `buckets` combine them (sums,
//! fractions averaged), and `"endpoints": [{"endpoint": index, "url", "values",
//! "buckets"}, ...]` holds what each endpoint scraped at that moment gave.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::exposition::{Exposition, Kind};

pub struct SamplesFile {
    out: BufWriter<File>,
}

impl SamplesFile {
    pub fn create(path: &Path) -> std::io::Result<SamplesFile> {
        Ok(SamplesFile {
            out: BufWriter::new(File::create(path)?),
        })
    }

    /// Writes one scrape and flushes it, so the file is whole up to the last scrape
    /// however the run ends.
    pub fn write(
        &mut self,
        t_s: f64,
        phase: Option<usize>,
        e: &Exposition,
        each: &[(usize, &str, &Exposition)],
    ) -> std::io::Result<()> {
        let mut sample = sample_json(t_s, phase, e);
        if !each.is_empty() {
            let endpoints = each.iter().map(|&(i, url, e)| {
                let mut one = families_json(e);
                one.insert("endpoint".into(), json!(i));
                one.insert("url".into(), json!(url));
                Value::Object(one)
            });
            sample["endpoints"] = Value::Array(endpoints.collect());
        }
        let line = serde_json::to_string(&sample)?;
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

fn sample_json(t_s: f64, phase: Option<usize>, e: &Exposition) -> Value {
    let mut sample = families_json(e);
    sample.insert("t_s".into(), json!((t_s * 1e6).round() / 1e6));
    sample.insert("phase".into(), json!(phase));
    Value::Object(sample)
}

/// `values` and `buckets` of one exposition.
fn families_json(e: &Exposition) -> Map<String, Value> {
    let mut values = Map::new();
    let mut buckets = Map::new();
    for (name, family) in &e.families {
        if family.kind == Kind::Histogram {
            let points = family
                .buckets
                .iter()
                .map(|(le, count)| json!([le_text(*le), count]))
                .collect();
            buckets.insert(name.clone(), Value::Array(points));
        } else {
            values.insert(name.clone(), json!(family.value));
        }
    }
    Map::from_iter([
        ("values".to_string(), Value::Object(values)),
        ("buckets".to_string(), Value::Object(buckets)),
    ])
}

fn le_text(le: f64) -> String {
    if le.is_infinite() {
        "+Inf".into()
    } else {
        le.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_holds_values_and_buckets() {
        let e = Exposition::parse(
            "# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 2\nh_count 3\ng 4\n",
        );
        let line = sample_json(1.5, Some(2), &e);
        assert_eq!(line["t_s"], 1.5);
        assert_eq!(line["phase"], 2);
        assert_eq!(line["values"]["g"], 4.0);
        assert_eq!(line["values"]["h_count"], 3.0);
        assert_eq!(line["buckets"]["h"], json!([["0.5", 1.0], ["+Inf", 3.0]]));
    }
}
