//! One scrape's text, parsed: every metric family summed over its label sets, except the
//! fractions (KV cache use, a hit rate), which are averaged: two engines each at 50 % use
//! hold half of their KV cache, not all of it. Scrapes of several targets combine by the
//! same rule.
//! A few families are also kept per value of one label ([`BY_LABEL`]), as
//! `name{label="value"}` beside their sum.
//!
//! The parser is the `prometheus-parse` crate. Its name pattern is `\w+`, which leaves out
//! the `:` that vLLM, SGLang and llama.cpp put in every name (`vllm:num_requests_running`;
//! the exposition format allows `[a-zA-Z_:][a-zA-Z0-9_:]*`), so each line's metric name has
//! its colons swapped for a letter no valid name can hold before parsing, and back after.

use std::collections::BTreeMap;

use prometheus_parse::{Scrape, Value};

use super::known;

use crate::workloads::scenario::spec::ServerValues;

/// Stands for `:` inside a metric name while the crate parses it: a Unicode letter (so
/// `\w` matches it) that is not ASCII, so no valid metric name contains it.
const COLON: char = 'ː';

/// Most metric families kept from one scrape: a hostile endpoint may list millions of names
/// within the body limit; a real server lists hundreds.
pub const MAX_FAMILIES: usize = 20_000;

/// vLLM's accepted draft tokens per position (`vllm/v1/spec_decode/metrics.py`) and its
/// label, read position by position (`spec_decode`).
pub const SPEC_PER_POSITION: (&str, &str) = (
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "position",
);

/// Families also kept per value of one label, under [`labelled`] names.
const BY_LABEL: &[(&str, &str)] = &[SPEC_PER_POSITION];

/// The name one label value of a [`BY_LABEL`] family is kept under: `name{label="value"}`.
pub fn labelled(name: &str, label: &str, value: &str) -> String {
    format!("{name}{{{label}=\"{value}\"}}")
}

/// How a family's value evolves, which decides how a phase summarises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Only grows (resets when the server restarts): a phase reports its delta and rate.
    Counter,
    Histogram,
}

/// One family: its value summed over label sets (a fraction's averaged); a histogram's
/// cumulative buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub kind: Kind,
    /// For a histogram, its observation count.
    pub value: f64,
    /// A histogram's buckets: upper bound (`le`) and cumulative count, ascending.
    pub buckets: Vec<(f64, f64)>,
    /// Label sets (of every endpoint) whose values made `value`: a fraction's weight when
    /// scrapes are combined.
    pub sets: u32,
}

/// One scrape: every family by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
    /// Endpoints whose scrapes it holds: 1 for a parsed one.
    pub endpoints: usize,
}

impl Exposition {
    /// Parses Prometheus text. Lines that are not samples, and non-finite values, are
    /// skipped; nothing here fails, so an HTML page parses to an empty exposition.
    pub fn parse(text: &str) -> Exposition {
        let lines = text.lines().map(|line| Ok(escape_name(line)));
        let Ok(scrape) = Scrape::parse(lines) else {
            return Exposition::default();
        };
        let mut families: BTreeMap<String, Family> = BTreeMap::new();
        for sample in scrape.samples {
            // Redacted where it enters: an endpoint may name a metric after the key.
            let name = crate::safeguards::redact::string(sample.metric.replace(COLON, ":"));
            if families.len() >= MAX_FAMILIES && !families.contains_key(&name) {
                continue;
            }
            let scalar = match sample.value {
                Value::Histogram(buckets) => {
                    let points = buckets.iter().map(|b| (b.less_than, b.count));
                    add_buckets(&mut families, name.clone(), points, 1);
                    None
                }
                // A summary's quantiles do not add up over label sets; its `_sum` and
                // `_count` arrive as samples of their own.
                Value::Summary(_) => None,
                Value::Gauge(v) => Some((Kind::Gauge, v)),
                Value::Counter(v) => Some((Kind::Counter, v)),
                Value::Untyped(v) => Some((untyped_kind(&name), v)),
            };
            if let Some((kind, v)) = scalar {
                let by_label = by_label(&name, &sample.labels)
                    .filter(|n| families.len() < MAX_FAMILIES || families.contains_key(n));
                if let Some(by_label) = by_label {
                    add_scalar(&mut families, by_label, kind, (v, 1));
                }
                add_scalar(&mut families, name, kind, (v, 1));
            }
        }
        // A histogram's `_sum` and `_count` only grow.
        let histograms: Vec<String> = families
            .iter()
            .filter(|(_, f)| f.kind == Kind::Histogram)
            .map(|(n, _)| n.clone())
            .collect();
        for base in histograms {
            for suffix in ["_sum", "_count"] {
                if let Some(f) = families.get_mut(&format!("{base}{suffix}")) {
                    f.kind = Kind::Counter;
                }
            }
        }
        Exposition::averaging_fractions(families, 1)
    }

    /// The scrapes of several endpoints as one (a fleet of replicas behind the run's
    /// targets): every family summed, fractions averaged over all their label sets.
    pub fn combine<'a>(parts: impl IntoIterator<Item = &'a Exposition>) -> Exposition {
        let mut families: BTreeMap<String, Family> = BTreeMap::new();
        let mut endpoints = 0;
        for part in parts {
            endpoints += part.endpoints;
            for (name, f) in &part.families {
                if families.len() >= MAX_FAMILIES && !families.contains_key(name) {
                    continue;
                }
                if f.kind == Kind::Histogram {
                    add_buckets(
                        &mut families,
                        name.clone(),
                        f.buckets.iter().copied(),
                        f.sets,
                    );
                } else {
                    let sum = if known::is_fraction(name) {
                        f.value * f64::from(f.sets)
                    } else {
                        f.value
                    };
                    add_scalar(&mut families, name.clone(), f.kind, (sum, f.sets));
                }
            }
        }
        Exposition::averaging_fractions(families, endpoints)
    }

    /// `families` (summed) with each fraction's sum turned into its mean.
    fn averaging_fractions(mut families: BTreeMap<String, Family>, endpoints: usize) -> Exposition {
        for (name, f) in &mut families {
            if f.kind != Kind::Histogram && f.sets > 1 && known::is_fraction(name) {
                f.value /= f64::from(f.sets);
            }
        }
        Exposition {
            families,
            endpoints,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }

    /// Every scalar family's value (histogram buckets left out: their `_sum` and
    /// `_count` are scalars of their own), by name.
    pub fn values(&self) -> ServerValues {
        self.families
            .iter()
            .filter(|(_, f)| f.kind != Kind::Histogram)
            .map(|(n, f)| (n.clone(), f.value))
            .collect()
    }

    /// One family's value, if it was scraped.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.families.get(name).map(|f| f.value)
    }
}

/// The name `name`'s sample is also kept under, for a [`BY_LABEL`] family whose label value
/// is short and plain (letters, digits, `_`, `.`, `-`: a server's own value, never a
/// name of its choosing).
fn by_label(name: &str, labels: &prometheus_parse::Labels) -> Option<String> {
    let &(_, label) = BY_LABEL.iter().find(|(family, _)| *family == name)?;
    let value = labels.get(label)?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if value.is_empty() || value.len() > 16 || !value.chars().all(plain) {
        return None;
    }
    Some(crate::safeguards::redact::string(labelled(
        name, label, value,
    )))
}

/// The prometheus-parse crate types samples by their `# TYPE` line, which names a
/// counter without its `_total` (Python's prometheus_client, which vLLM uses, writes
/// `# TYPE vllm:num_preemptions counter` above `vllm:num_preemptions_total`): such a
/// sample arrives untyped.
fn untyped_kind(name: &str) -> Kind {
    if name.ends_with("_total") {
        Kind::Counter
    } else {
        Kind::Gauge
    }
}

/// Adds `(sum, sets)`: the values of `sets` label sets, summed.
fn add_scalar(
    families: &mut BTreeMap<String, Family>,
    name: String,
    kind: Kind,
    (v, sets): (f64, u32),
) {
    // `_created` holds a timestamp per label set: summing them means nothing.
    if !v.is_finite() || name.ends_with("_created") {
        return;
    }
    families
        .entry(name)
        .and_modify(|f| {
            f.value += v;
            f.sets = f.sets.saturating_add(sets);
        })
        .or_insert(Family {
            kind,
            value: v,
            buckets: Vec::new(),
            sets,
        });
}

fn add_buckets(
    families: &mut BTreeMap<String, Family>,
    name: String,
    points: impl Iterator<Item = (f64, f64)>,
    sets: u32,
) {
    let family = families.entry(name).or_insert(Family {
        kind: Kind::Histogram,
        value: 0.0,
        buckets: Vec::new(),
        sets: 0,
    });
    family.sets = family.sets.saturating_add(sets);
    for (le, count) in points.filter(|(le, c)| !le.is_nan() && c.is_finite()) {
        match family.buckets.iter_mut().find(|(b, _)| *b == le) {
            Some(bucket) => bucket.1 += count,
            None => family.buckets.push((le, count)),
        }
    }
    family.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    family.value = family.buckets.last().map_or(0.0, |b| b.1);
}

/// `line` with the colons of its metric name (a sample's first word, or the name after
/// `# TYPE` / `# HELP`) replaced by [`COLON`].
fn escape_name(line: &str) -> String {
    let trimmed = line.trim_start();
    let (head, rest) = match ["# TYPE ", "# HELP "]
        .iter()
        .find(|p| trimmed.starts_with(**p))
    {
        Some(p) => trimmed.split_at(p.len()),
        None => ("", trimmed),
    };
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(rest.len());
    let (name, tail) = rest.split_at(end);
    format!("{head}{}{tail}", name.replace(':', &COLON.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece of vLLM 0.11's /metrics, as prometheus_client writes it.
    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 7.0
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e9
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 3.5
"#;

    #[test]
    fn colon_names_are_parsed_and_summed_over_label_sets() {
        let e = Exposition::parse(VLLM);
        assert_eq!(e.value("vllm:num_requests_running"), Some(5.0));
        let preemptions = &e.families["vllm:num_preemptions_total"];
        assert_eq!((preemptions.kind, preemptions.value), (Kind::Counter, 7.0));
        assert!(!e.families.contains_key("vllm:num_preemptions_created"));
        let ttft = &e.families["vllm:time_to_first_token_seconds"];
        assert_eq!(ttft.kind, Kind::Histogram);
        assert_eq!(
            ttft.buckets,
            vec![(0.1, 5.0), (1.0, 10.0), (f64::INFINITY, 12.0)]
        );
        assert_eq!(
            e.families["vllm:time_to_first_token_seconds_sum"].kind,
            Kind::Counter
        );
    }

    /// Two engines' KV cache use: half of the cache each is half of it, not all of it.
    const TWO_ENGINES_KV: &str = "vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.25\nvllm:num_requests_running{engine=\"0\"} 1\n";

    #[test]
    fn fractions_are_averaged_over_label_sets() {
        let e = Exposition::parse(TWO_ENGINES_KV);
        assert_eq!(e.value("vllm:kv_cache_usage_perc"), Some(0.375));
        assert_eq!(e.families["vllm:kv_cache_usage_perc"].sets, 2);
        assert_eq!(e.endpoints, 1);
    }

    #[test]
    fn endpoints_combine_as_one_fleet() {
        let (a, b) = (Exposition::parse(VLLM), Exposition::parse(TWO_ENGINES_KV));
        let third = Exposition::parse("vllm:kv_cache_usage_perc 1\n");
        let fleet = Exposition::combine([&a, &b, &third]);
        assert_eq!(fleet.endpoints, 3);
        assert_eq!(fleet.value("vllm:num_requests_running"), Some(6.0));
        // Weighted by label sets: (0.5 + 0.25 + 1) / 3, not the mean of 0.375 and 1.
        let kv = fleet.value("vllm:kv_cache_usage_perc").unwrap();
        assert!((kv - 1.75 / 3.0).abs() < 1e-15, "{kv}");
        let twice = Exposition::combine([&a, &a]);
        assert_eq!(twice.value("vllm:num_preemptions_total"), Some(14.0));
        assert_eq!(
            twice.families["vllm:num_preemptions_total"].kind,
            Kind::Counter
        );
        let ttft = &twice.families["vllm:time_to_first_token_seconds"].buckets;
        assert_eq!(ttft, &vec![(0.1, 10.0), (1.0, 20.0), (f64::INFINITY, 24.0)]);
        assert_eq!(twice.value("vllm:time_to_first_token_seconds"), Some(24.0));
        assert_eq!(Exposition::combine([&a]), a);
    }

    #[test]
    fn values_leave_out_buckets_and_keep_sum_and_count() {
        let names: Vec<String> = Exposition::parse(VLLM)
            .values()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "vllm:num_preemptions_total",
                "vllm:num_requests_running",
                "vllm:time_to_first_token_seconds_count",
                "vllm:time_to_first_token_seconds_sum",
            ]
        );
    }

    #[test]
    fn html_and_garbage_parse_to_nothing() {
        let html = "<!doctype html>\n<html><body><h1>Not Found</h1></body></html>\n";
        assert!(Exposition::parse(html).is_empty());
        assert!(Exposition::parse("\u{0}\u{ffff}{{{ }}} = NaN\n# TYPE\n").is_empty());
        let nan = "# TYPE g gauge\ng NaN\nh +Inf\n";
        assert!(Exposition::parse(nan).is_empty());
    }

    #[test]
    fn a_by_label_family_keeps_each_label_value_beside_its_sum() {
        let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos";
        let text = format!(
            "# TYPE {per_pos} counter\n\
             {per_pos}_total{{engine=\"0\",position=\"0\"}} 8.0\n\
             {per_pos}_total{{engine=\"0\",position=\"1\"}} 5.0\n\
             {per_pos}_total{{engine=\"1\",position=\"0\"}} 2.0\n\
             {per_pos}_total{{engine=\"1\",position=\"a b\"}} 100.0\n\
             vllm:num_requests_running{{position=\"0\"}} 1\n"
        );
        let e = Exposition::parse(&text);
        let name = format!("{per_pos}_total");
        let at = |p: &str| e.value(&labelled(&name, "position", p));
        assert_eq!(e.value(&name), Some(115.0));
        assert_eq!((at("0"), at("1")), (Some(10.0), Some(5.0)));
        assert_eq!(
            e.families[&labelled(&name, "position", "0")].kind,
            Kind::Counter
        );
        // A label value that is not plain is only in the sum; other families are not split.
        assert_eq!(at("a b"), None);
        assert_eq!(e.families.len(), 4);
        // Two endpoints add up position by position.
        let fleet = Exposition::combine([&e, &e]);
        assert_eq!(fleet.value(&labelled(&name, "position", "0")), Some(20.0));
    }

    #[test]
    fn plain_names_and_untyped_samples_parse_too() {
        let e = Exposition::parse("tgi_queue_size 4\nrequests_total{a=\"b\"} 9 1700000000000\n");
        assert_eq!(e.families["tgi_queue_size"].kind, Kind::Gauge);
        assert_eq!(e.value("tgi_queue_size"), Some(4.0));
        assert_eq!(e.families["requests_total"].kind, Kind::Counter);
    }
}
