//! The "Server metrics" section of each phase: the known metrics of the server in plain
//! words (text and markdown), and the client's TTFT set beside the server's own. Counters
//! show their increase over the phase and its rate; prefix-cache counters count tokens.

use crate::measuring::metrics::PhaseSummary;
use crate::servers::server_metrics::known::{self, Meaning};
use crate::servers::server_metrics::{Bucket, EndpointTtft, HistogramStat, ServerPhase};

/// One line of the section: a label and its value.
type Line = (String, String);

/// The section's lines: scrapes (and, with several targets, how many endpoints' figures
/// were combined), gauges (mean / max, and the time above a threshold),
/// counters (increase and rate), the prefix-cache hit rate, histograms (mean / p50 / p99)
/// and the client's TTFT against the server's.
pub fn lines(server: &ServerPhase, client: &PhaseSummary) -> Vec<Line> {
    let mut out: Vec<Line> = vec![("Scrapes:".into(), server.samples.to_string())];
    if server.endpoints > 1 {
        out.push((
            "Endpoints (summed; % averaged):".into(),
            server.endpoints.to_string(),
        ));
    }
    for g in &server.gauges {
        let fraction = known::is_fraction(&g.name);
        let show = |v: f64| {
            if fraction {
                format!("{:.1} %", v * 100.0)
            } else {
                format!("{v:.2}")
            }
        };
        out.push((
            format!("{} (mean / max):", capitalised(&g.meaning)),
            format!("{} / {}", show(g.mean), show(g.max)),
        ));
        if let Some(above) = &g.above {
            out.push((
                format!("Time with {} > {}:", g.meaning, show(above.threshold)),
                format!("{:.1} s", above.seconds),
            ));
        }
    }
    for c in &server.counters {
        out.push((
            format!("{}:", capitalised(&c.meaning)),
            format!("{:.0} ({:.2}/s)", c.delta, c.rate),
        ));
    }
    for d in &server.derived {
        out.push((
            format!("{} (phase):", capitalised(&d.meaning)),
            d.value
                .map_or("- (none in the phase)".into(), |v| format!("{v:.2}")),
        ));
    }
    if let Some(rate) = server.prefix_cache_hit_rate {
        out.push((
            "Prefix-cache hit rate:".into(),
            format!("{:.1} %", rate * 100.0),
        ));
    }
    for h in &server.histograms {
        out.push(histogram_line(h));
    }
    out.extend(ttft_split(server, client));
    out
}

/// "Server TTFT mean/p50/p99 (ms): 7241.53 / ≈8507 / ≈19286 (buckets 5000-10000,
/// 10000-20000)": the mean is exact (sum over count); the percentiles are interpolated
/// inside Prometheus buckets, so they are marked approximate and their buckets shown.
fn histogram_line(h: &HistogramStat) -> Line {
    let bucket = |b: &Option<Bucket>| match b {
        Some(Bucket {
            above,
            up_to: Some(up_to),
        }) => format!("{above}-{up_to}"),
        Some(Bucket { above, up_to: None }) => format!("above {above}"),
        None => "-".into(),
    };
    let one_bucket = h.p50_bucket.is_some() && h.p50_bucket == h.p99_bucket;
    let buckets = match one_bucket {
        true => format!("bucket {}", bucket(&h.p50_bucket)),
        false => format!(
            "buckets {}, {}",
            bucket(&h.p50_bucket),
            bucket(&h.p99_bucket)
        ),
    };
    let mean = h.mean_ms.map_or("-".into(), |v| format!("{v:.2}"));
    (
        format!("{} mean/p50/p99 (ms):", capitalised(&h.meaning)),
        format!(
            "{mean} / {} / {} ({buckets})",
            quantile(h.p50_ms, h.p50_bucket, one_bucket),
            quantile(h.p99_ms, h.p99_bucket, one_bucket)
        ),
    )
}

/// A percentile read from buckets: `≈` its interpolation where that says something, else
/// the bounds of its bucket. Inside a first bucket (from 0) or the +Inf one, or where p50
/// and p99 share one bucket (the mass sits in it), the interpolation is only a point on a
/// straight line through the bucket (issue 58 printed "≈150" for queue times of about 4 ms
/// in the bucket 0-300): the bucket's bounds are all that is known.
fn quantile(value: Option<f64>, bucket: Option<Bucket>, one_bucket: bool) -> String {
    let Some(v) = value else {
        return "-".into();
    };
    match bucket {
        Some(Bucket { up_to: None, above }) => format!("> {above}"),
        Some(Bucket {
            above,
            up_to: Some(up_to),
        }) if above <= 0.0 => format!("< {up_to}"),
        Some(Bucket {
            above,
            up_to: Some(up_to),
        }) if one_bucket => format!("{above}-{up_to}"),
        _ => format!("≈{v:.0}"),
    }
}

/// "Client TTFT mean 312 ms = server TTFT 300 (queue 180) + 12 outside the engine": the
/// server's TTFT counts from its arrival (so it holds the queue time); means add up where
/// percentiles do not.
fn ttft_split(server: &ServerPhase, client: &PhaseSummary) -> Option<Line> {
    let mean_of = |meaning| {
        server
            .histograms
            .iter()
            .find(|h| known::lookup(&h.name).is_some_and(|k| k.meaning == meaning))
            .and_then(|h| h.mean_ms)
    };
    let server_ttft = mean_of(Meaning::ServerTtft)?;
    if client.ttft.count == 0 {
        return None;
    }
    let each = &server.ttft_by_endpoint;
    if each.iter().any(|e| e.observed <= 0.0) {
        return partial_ttft_split(each, client);
    }
    let client_ttft = client.ttft.mean;
    let queue = mean_of(Meaning::ServerQueueTime)
        .map(|q| format!(" (queue {q:.2})"))
        .unwrap_or_default();
    Some((
        "Client TTFT mean (ms):".into(),
        format!(
            "{client_ttft:.2} = server {server_ttft:.2}{queue} + {:.2} outside the engine",
            client_ttft - server_ttft
        ),
    ))
}

/// With several targets of which some measured no first token (no TTFT histogram, or an
/// empty one), the split of the client's TTFT on the targets that did, against their own
/// server TTFT: over the fleet, the server's mean would leave out requests the client's
/// takes in.
fn partial_ttft_split(each: &[EndpointTtft], client: &PhaseSummary) -> Option<Line> {
    let (measured, silent): (Vec<&EndpointTtft>, Vec<&EndpointTtft>) =
        each.iter().partition(|e| e.observed > 0.0);
    let weighted = |pairs: &mut dyn Iterator<Item = (f64, f64)>| {
        let (sum, n) = pairs.fold((0.0, 0.0), |(s, n), (mean, count)| {
            (s + mean * count, n + count)
        });
        (n > 0.0).then(|| sum / n)
    };
    let server_ttft = weighted(
        &mut measured
            .iter()
            .filter_map(|e| Some((e.mean_ms?, e.observed))),
    )?;
    let targets: Vec<usize> = measured.iter().flat_map(|e| e.targets.clone()).collect();
    let client_ttft = weighted(&mut client.targets.iter().filter_map(|t| {
        let index: usize = t.tag.parse().ok()?;
        (targets.contains(&index) && t.ttft.count > 0).then_some((t.ttft.mean, t.ttft.count as f64))
    }))?;
    let list = |v: &mut dyn Iterator<Item = usize>| {
        v.map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
    };
    let without = list(&mut silent.iter().flat_map(|e| e.targets.clone()));
    Some((
        format!("Client TTFT mean, target {} (ms):", list(&mut targets.iter().copied())),
        format!(
            "{client_ttft:.2} = server {server_ttft:.2} + {:.2} outside the engine (target {without}: no server TTFT measured, left out)",
            client_ttft - server_ttft
        ),
    ))
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The section in the text report's layout: a 50-wide ruler, labels in 40 columns.
pub(super) fn render_section(server: &ServerPhase, client: &PhaseSummary) -> String {
    super::format::lines_section("Server metrics", &lines(server, client))
}

/// "Prefix cache (answers' usage): 61.0 % of 16592 prompt tokens (32 requests)": the
/// share the server's own answers said came from cache, where they said (nothing else).
pub(super) fn render_usage_cache(client: &PhaseSummary) -> String {
    let Some(cache) = &client.prefix_cache else {
        return String::new();
    };
    format!(
        "{:<40} {:.1} % of {} prompt tokens ({} requests)\n",
        "Prefix cache (answers' usage):",
        cache.hit_rate * 100.0,
        cache.prompt_tokens,
        cache.requests
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(p50: (f64, f64, Option<f64>), p99: (f64, f64, Option<f64>)) -> HistogramStat {
        HistogramStat {
            name: "vllm:request_queue_time_seconds".into(),
            meaning: "server queue time".into(),
            count: 100.0,
            mean_ms: Some(3.97),
            p50_ms: Some(p50.0),
            p90_ms: None,
            p99_ms: Some(p99.0),
            p50_bucket: Some(Bucket {
                above: p50.1,
                up_to: p50.2,
            }),
            p90_bucket: None,
            p99_bucket: Some(Bucket {
                above: p99.1,
                up_to: p99.2,
            }),
        }
    }

    /// Issue 58: "3.97 / ≈150 / ≈297 (buckets 0-300)" for queue times of about 4 ms:
    /// inside a first bucket the line gives its bound, not a midpoint.
    #[test]
    fn a_percentile_in_a_first_or_shared_bucket_is_its_bounds() {
        let first = histogram((150.0, 0.0, Some(300.0)), (297.0, 0.0, Some(300.0)));
        let (label, value) = histogram_line(&first);
        assert_eq!(label, "Server queue time mean/p50/p99 (ms):");
        assert_eq!(value, "3.97 / < 300 / < 300 (bucket 0-300)");
        let shared = histogram((375.0, 300.0, Some(450.0)), (448.0, 300.0, Some(450.0)));
        assert_eq!(
            histogram_line(&shared).1,
            "3.97 / 300-450 / 300-450 (bucket 300-450)"
        );
        let spread = histogram((8507.0, 5000.0, Some(10000.0)), (30000.0, 20000.0, None));
        assert_eq!(
            histogram_line(&spread).1,
            "3.97 / ≈8507 / > 20000 (buckets 5000-10000, above 20000)"
        );
        let apart = histogram((120.0, 0.0, Some(300.0)), (8507.0, 5000.0, Some(10000.0)));
        assert_eq!(
            histogram_line(&apart).1,
            "3.97 / < 300 / ≈8507 (buckets 0-300, 5000-10000)"
        );
    }
}
