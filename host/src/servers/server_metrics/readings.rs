//! What a phase's scrapes mean where a metric is not what its exposition type says
//! (`known::Reading`), and the prefix-cache hit rate in each engine's own terms.
//!
//! Both are taken between the phase's baseline scrape and its last one, from counters
//! where the engine has them: an average over the phase, never an average of averages.

use serde::{Deserialize, Serialize};

use super::exposition::Exposition;
use super::known::{self, Meaning, Reading};

/// A figure of the phase derived from a gauge that is not a level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct DerivedStat {
    /// The gauge's name.
    pub name: String,
    pub meaning: String,
    /// Its value over the phase; `None` when nothing it counts happened in the phase.
    pub value: Option<f64>,
    /// How the value was taken, in words.
    pub from: String,
}

/// The phase's value of every known gauge that is an average since start or since the
/// previous scrape, in catalogue order.
pub fn derived(base: &Exposition, latest: &Exposition) -> Vec<DerivedStat> {
    let mut out = Vec::new();
    for k in known::KNOWN {
        if !latest.families.contains_key(k.name) {
            continue;
        }
        let (value, from) = match k.reading {
            Reading::AsExposed => continue,
            Reading::SinceStart { count } => (
                since_start(k.name, count, base, latest),
                format!("its average since start, weighted by {count} over the phase"),
            ),
            Reading::SinceLastScrape { amount, seconds } => (
                ratio_of_increases(amount, seconds, base, latest),
                format!("increase of {amount} over that of {seconds}"),
            ),
        };
        out.push(DerivedStat {
            name: k.name.to_string(),
            meaning: k.words.to_string(),
            value,
            from,
        });
    }
    out
}

/// A counter's increase between two scrapes; after a restart (it went down), its value.
fn increase(name: &str, base: &Exposition, latest: &Exposition) -> Option<f64> {
    let now = latest.value(name)?;
    let was = base.value(name).unwrap_or(0.0);
    Some(if now >= was { now - was } else { now })
}

/// An average since start over the phase: the increase of `average × count` over that of
/// `count`.
fn since_start(name: &str, count: &str, base: &Exposition, latest: &Exposition) -> Option<f64> {
    let (g1, n1) = (latest.value(name)?, latest.value(count)?);
    let (g0, n0) = match (base.value(name), base.value(count)) {
        // Restarted in between: everything since start is in the phase.
        (Some(g0), Some(n0)) if n0 <= n1 => (g0, n0),
        _ => (0.0, 0.0),
    };
    let decodes = n1 - n0;
    (decodes > 0.0).then(|| (g1 * n1 - g0 * n0) / decodes)
}

fn ratio_of_increases(
    amount: &str,
    per: &str,
    base: &Exposition,
    latest: &Exposition,
) -> Option<f64> {
    let amount = increase(amount, base, latest)?;
    let per = increase(per, base, latest)?;
    (per > 0.0).then(|| amount / per)
}

/// The share of prompt tokens the engine took from its prefix cache over the phase, from
/// whichever counters it has: vLLM's hits over queries, SGLang's cached over prompt tokens
/// (which count them), llama.cpp's cached over cached plus computed (its prompt-token
/// counter leaves the cached ones out).
/// `counters`: each known counter's name and increase over the phase.
pub fn prefix_cache_hit_rate(counters: &[(&str, f64)]) -> Option<f64> {
    let delta = |name: &str| counters.iter().find(|c| c.0 == name).map(|c| c.1);
    let first = |meaning: Meaning| {
        counters
            .iter()
            .find(|c| known::lookup(c.0).is_some_and(|k| k.meaning == meaning))
            .map(|c| c.1)
    };
    let (hits, queries) = if let (Some(hits), Some(queries)) = (
        first(Meaning::PrefixCacheHits),
        first(Meaning::PrefixCacheQueries),
    ) {
        (hits, queries)
    } else if let Some(cached) = delta("llamacpp:prompt_tokens_cached_total") {
        (cached, cached + delta("llamacpp:prompt_tokens_total")?)
    } else {
        (
            delta("sglang:cached_tokens_total")?,
            delta("sglang:prompt_tokens_total")?,
        )
    };
    (queries > 0.0).then(|| hits / queries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llamacpp(busy: f64, decodes: f64, tokens: f64, seconds: f64, gauge: f64) -> Exposition {
        Exposition::parse(&format!(
            "# TYPE llamacpp:n_busy_slots_per_decode gauge\nllamacpp:n_busy_slots_per_decode {busy}\n\
             # TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total {decodes}\n\
             # TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {tokens}\n\
             # TYPE llamacpp:tokens_predicted_seconds_total counter\nllamacpp:tokens_predicted_seconds_total {seconds}\n\
             # TYPE llamacpp:predicted_tokens_seconds gauge\nllamacpp:predicted_tokens_seconds {gauge}\n"
        ))
    }

    #[test]
    fn averages_since_start_and_since_the_last_scrape_are_taken_over_the_phase() {
        // 100 decodes at 4 busy slots before; then 50 at 1 busy slot: lifetime 3.0.
        let base = llamacpp(4.0, 100.0, 1000.0, 10.0, 55.0);
        let latest = llamacpp(3.0, 150.0, 1600.0, 13.0, 7.8);
        let got = derived(&base, &latest);
        let value = |name: &str| got.iter().find(|d| d.name == name).and_then(|d| d.value);
        assert_eq!(value("llamacpp:n_busy_slots_per_decode"), Some(1.0));
        // 600 tokens in 3 busy seconds, whatever the gauge read at the last scrape.
        assert_eq!(value("llamacpp:predicted_tokens_seconds"), Some(200.0));
        // No decode in the phase: no value, not a division by zero.
        assert_eq!(
            derived(&latest, &latest)[0].value,
            None,
            "{:?}",
            derived(&latest, &latest)
        );
        // A restart in between: the phase is everything since it.
        let restarted = llamacpp(2.0, 10.0, 50.0, 1.0, 50.0);
        let got = derived(&latest, &restarted);
        assert_eq!(got[0].value, Some(2.0));
        assert_eq!(got[1].value, Some(50.0));
    }

    fn counter(name: &str, delta: f64) -> (&str, f64) {
        (name, delta)
    }

    #[test]
    fn each_engine_gives_its_hit_rate_in_its_own_terms() {
        let vllm = [
            counter("vllm:prefix_cache_queries_total", 100.0),
            counter("vllm:prefix_cache_hits_total", 60.0),
        ];
        assert_eq!(prefix_cache_hit_rate(&vllm), Some(0.6));
        // llama.cpp's prompt tokens leave the cached ones out.
        let llama = [
            counter("llamacpp:prompt_tokens_total", 40.0),
            counter("llamacpp:prompt_tokens_cached_total", 60.0),
        ];
        assert_eq!(prefix_cache_hit_rate(&llama), Some(0.6));
        // SGLang's count them.
        let sglang = [
            counter("sglang:prompt_tokens_total", 100.0),
            counter("sglang:cached_tokens_total", 60.0),
        ];
        assert_eq!(prefix_cache_hit_rate(&sglang), Some(0.6));
        assert_eq!(prefix_cache_hit_rate(&[counter("x", 1.0)]), None);
        let idle = [
            counter("llamacpp:prompt_tokens_total", 0.0),
            counter("llamacpp:prompt_tokens_cached_total", 0.0),
        ];
        assert_eq!(prefix_cache_hit_rate(&idle), None);
    }
}
