//! With several targets, what each endpoint's own histograms say of a phase: the server
//! TTFT of each, so the client's TTFT is split only against the targets that measured it.
//! Summed over the fleet, a target that exports empty histograms (or none) drew the
//! server's mean from the others' requests while the client's mean took them all:
//! `25.27 = 10.31 server + 14.96 outside the engine`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::exposition::Exposition;
use super::known::{self, Meaning};

/// One endpoint's server TTFT over a phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct EndpointTtft {
    /// The endpoint's index (server_metrics.jsonl's `endpoints[].endpoint`).
    pub endpoint: usize,
    /// The targets it serves (their indices in the header's `targets`).
    pub targets: Vec<usize>,
    /// First tokens its TTFT histogram observed in the phase (0: none, or no histogram).
    pub observed: f64,
    /// Their mean, ms; `None` without observations.
    pub mean_ms: Option<f64>,
}

/// Each endpoint's server TTFT between `base` and `latest` (each endpoint's last scrape
/// before the phase and its last in it); empty with fewer than two endpoints.
pub fn ttft(
    base: &[Option<Arc<Exposition>>],
    latest: &[Option<Arc<Exposition>>],
    targets: &[Vec<usize>],
) -> Vec<EndpointTtft> {
    if latest.len() < 2 {
        return Vec::new();
    }
    latest
        .iter()
        .enumerate()
        .map(|(i, now)| {
            let before = base.get(i).cloned().flatten();
            let (observed, mean_ms) = now
                .as_deref()
                .and_then(|now| mean_ttft(before.as_deref(), now))
                .unwrap_or((0.0, None));
            EndpointTtft {
                endpoint: i,
                targets: targets.get(i).cloned().unwrap_or_default(),
                observed,
                mean_ms,
            }
        })
        .collect()
}

/// The first known server-TTFT histogram's observations and mean (ms) from `before` to
/// `now`; a count that went down (a restart) counts from zero.
fn mean_ttft(before: Option<&Exposition>, now: &Exposition) -> Option<(f64, Option<f64>)> {
    let k = known::first_of(Meaning::ServerTtft, |n| now.families.contains_key(n))?;
    let delta = |suffix: &str| {
        let name = format!("{}{suffix}", k.name);
        let v = now.value(&name)?;
        let was = before.and_then(|b| b.value(&name)).unwrap_or(0.0);
        Some(if v >= was { v - was } else { v })
    };
    let (count, sum) = (delta("_count")?, delta("_sum")?);
    Some((count, (count > 0.0).then(|| sum / count * 1000.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(count: f64, sum: f64) -> Option<Arc<Exposition>> {
        Some(Arc::new(Exposition::parse(&format!(
            "# TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {count}\n\
             vllm:time_to_first_token_seconds_count {count}\n\
             vllm:time_to_first_token_seconds_sum {sum}\n"
        ))))
    }

    #[test]
    fn each_endpoint_counts_its_own_first_tokens() {
        let base = [scrape(2.0, 0.25), scrape(0.0, 0.0), None];
        let latest = [scrape(12.0, 1.25), scrape(0.0, 0.0), None];
        let targets = [vec![0], vec![1], vec![2]];
        let got = ttft(&base, &latest, &targets);
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].observed, got[0].mean_ms), (10.0, Some(100.0)));
        assert_eq!((got[1].observed, got[1].mean_ms), (0.0, None));
        assert_eq!((got[2].observed, got[2].targets.clone()), (0.0, vec![2]));
        assert!(ttft(&base[..1], &latest[..1], &targets).is_empty());
    }
}
