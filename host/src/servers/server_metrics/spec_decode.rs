//! Speculative decoding over one phase, from the server's acceptance counters: the deltas
//! between the phase's baseline scrape and its last one.
//!
//! - vLLM (`vllm/v1/spec_decode/metrics.py`): `vllm:spec_decode_num_drafts` (one per
//!   sequence per verifying step), `…num_draft_tokens`, `…num_accepted_tokens`, and
//!   `…num_accepted_tokens_per_pos{position="0".."k-1"}` (a draft whose first `a` tokens
//!   were accepted adds one to positions 0 to a-1). Its definitions, used here: acceptance
//!   rate = accepted / draft tokens; mean acceptance length = 1 + accepted / drafts ("by
//!   convention, mean acceptance length includes the bonus token"); per-position
//!   acceptance = accepted at the position / drafts.
//! - llama.cpp: the same three totals under `llamacpp:`, no per-position counter.
//! - SGLang exports no counters, only gauges of the last logging interval:
//!   `sglang:spec_accept_length` ((accepted + bonus) / verifying steps, the same
//!   convention as vLLM's length: `python/sglang/srt/managers/scheduler.py` adds
//!   `num_accepted_tokens + bs` over `bs` steps) and `sglang:spec_accept_rate`; the phase
//!   gets their mean over its scrapes.
//!
//! A phase in which no draft was made has no section.

use serde::{Deserialize, Serialize};

use super::exposition::{labelled, Exposition, SPEC_PER_POSITION};

/// Draft positions read per phase: vLLM's `num_speculative_tokens` is a handful; a hostile
/// endpoint cannot make the report list more.
pub const MAX_POSITIONS: usize = 64;

/// One engine's counter names.
struct Counters {
    drafts: &'static str,
    draft_tokens: &'static str,
    accepted: &'static str,
    per_position: Option<&'static str>,
}

const COUNTERS: [Counters; 2] = [
    Counters {
        drafts: "vllm:spec_decode_num_drafts_total",
        draft_tokens: "vllm:spec_decode_num_draft_tokens_total",
        accepted: "vllm:spec_decode_num_accepted_tokens_total",
        per_position: Some(PER_POSITION),
    },
    Counters {
        drafts: "llamacpp:spec_decode_num_drafts_total",
        draft_tokens: "llamacpp:spec_decode_num_draft_tokens_total",
        accepted: "llamacpp:spec_decode_num_accepted_tokens_total",
        per_position: None,
    },
];

/// vLLM's accepted tokens per draft position, kept per `position` by the parser.
const PER_POSITION: &str = SPEC_PER_POSITION.0;
/// The label it carries.
const POSITION_LABEL: &str = SPEC_PER_POSITION.1;

const SGLANG_LENGTH: &str = "sglang:spec_accept_length";
const SGLANG_RATE: &str = "sglang:spec_accept_rate";

/// Where a phase's figures come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SpecDecodeSource {
    /// Counter deltas over the phase (vLLM, llama.cpp): exact.
    Counters,
    /// The mean of per-interval gauges over the phase's scrapes (SGLang).
    Gauges,
}

/// One phase's speculative decoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(deny_unknown_fields))]
pub struct SpecDecode {
    pub source: SpecDecodeSource,
    /// Draft rounds in the phase (one per sequence per verifying step); counters only.
    pub drafts: Option<f64>,
    /// Tokens proposed by the drafter; counters only.
    pub draft_tokens: Option<f64>,
    /// Draft tokens the target model accepted; counters only.
    pub accepted_tokens: Option<f64>,
    /// Accepted / draft tokens, 0 to 1.
    pub acceptance_rate: Option<f64>,
    /// Tokens a sequence gains per verifying step, the bonus token included:
    /// 1 + accepted / drafts.
    pub mean_acceptance_length: Option<f64>,
    /// Per draft position, the share of drafts whose token there was accepted (0 to 1);
    /// empty where the server counts no positions (llama.cpp, SGLang).
    #[serde(default)]
    pub per_position: Vec<f64>,
}

/// The phase's speculative decoding from its baseline and last scrapes, else from the
/// mean of SGLang's gauges over its scrapes (`gauge_mean`); `None` when no draft was made.
pub fn of_phase(
    base: &Exposition,
    latest: &Exposition,
    gauge_mean: impl Fn(&str) -> Option<f64>,
) -> Option<SpecDecode> {
    COUNTERS
        .iter()
        .find_map(|names| from_counters(names, base, latest))
        .or_else(|| from_gauges(gauge_mean))
}

fn from_counters(names: &Counters, base: &Exposition, latest: &Exposition) -> Option<SpecDecode> {
    let totals = [names.drafts, names.draft_tokens, names.accepted];
    let now = totals.map(|n| latest.value(n));
    let [Some(_), Some(_), Some(_)] = now else {
        return None;
    };
    let now = now.map(|v| v.unwrap_or(0.0));
    let before = totals.map(|n| base.value(n).unwrap_or(0.0));
    // A server that restarted counts from zero: one of its totals went back. All of them
    // then count from zero, so the three stay one consistent set.
    let restarted = now.iter().zip(&before).any(|(n, b)| n < b);
    let delta = |now: f64, before: f64| if restarted { now } else { now - before };
    let [drafts, draft_tokens, accepted] = [0, 1, 2].map(|i| delta(now[i], before[i]));
    if drafts <= 0.0 {
        return None;
    }
    let per_position = names.per_position.map_or_else(Vec::new, |family| {
        positions(family, latest)
            .map(|at| {
                let now = latest.value(&at).unwrap_or(0.0);
                let before = base.value(&at).unwrap_or(0.0);
                // The position's own reset (a counter that went back) counts from zero too.
                let d = if restarted || now < before {
                    now
                } else {
                    now - before
                };
                d / drafts
            })
            .collect()
    });
    Some(SpecDecode {
        source: SpecDecodeSource::Counters,
        drafts: Some(drafts),
        draft_tokens: Some(draft_tokens),
        accepted_tokens: Some(accepted),
        acceptance_rate: (draft_tokens > 0.0).then(|| accepted / draft_tokens),
        mean_acceptance_length: Some(1.0 + accepted / drafts),
        per_position,
    })
}

/// The per-position series of `family` the latest scrape holds: positions 0, 1, … up to
/// the first one missing.
fn positions<'a>(family: &'a str, latest: &'a Exposition) -> impl Iterator<Item = String> + 'a {
    (0..MAX_POSITIONS)
        .map(move |i| labelled(family, POSITION_LABEL, &i.to_string()))
        .take_while(move |name| latest.value(name).is_some())
}

/// SGLang's gauges, when its accept length was above zero (it exports 0 without a drafter).
fn from_gauges(gauge_mean: impl Fn(&str) -> Option<f64>) -> Option<SpecDecode> {
    let length = gauge_mean(SGLANG_LENGTH).filter(|l| *l > 0.0)?;
    Some(SpecDecode {
        source: SpecDecodeSource::Gauges,
        drafts: None,
        draft_tokens: None,
        accepted_tokens: None,
        acceptance_rate: gauge_mean(SGLANG_RATE).filter(|r| *r > 0.0),
        mean_acceptance_length: Some(length),
        per_position: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM's spec-decode counters as prometheus_client writes them, with `per_pos` for
    /// positions 0, 1, ….
    fn vllm(drafts: u64, draft_tokens: u64, accepted: u64, per_pos: &[u64]) -> Exposition {
        let mut text = String::new();
        let l = "engine=\"0\",model_name=\"m\"";
        for (name, v) in [
            ("drafts", drafts),
            ("draft_tokens", draft_tokens),
            ("accepted_tokens", accepted),
        ] {
            text += &format!("# TYPE vllm:spec_decode_num_{name} counter\n");
            text += &format!("vllm:spec_decode_num_{name}_total{{{l}}} {v}.0\n");
            text += &format!("vllm:spec_decode_num_{name}_created{{{l}}} 1.7e9\n");
        }
        text += "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n";
        for (i, v) in per_pos.iter().enumerate() {
            text += &format!(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total{{{l},position=\"{i}\"}} {v}.0\n"
            );
        }
        Exposition::parse(&text)
    }

    fn none(_: &str) -> Option<f64> {
        None
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_phase_is_its_counters_deltas() {
        // Before: 10 drafts of 3. In the phase: 100 drafts, 300 tokens, 150 accepted,
        // of which 80 at position 0, 50 at 1, 20 at 2.
        let base = vllm(10, 30, 12, &[6, 4, 2]);
        let latest = vllm(110, 330, 162, &[86, 54, 22]);
        let s = of_phase(&base, &latest, none).expect("drafts were made");
        assert_eq!(s.source, SpecDecodeSource::Counters);
        assert_eq!(
            (s.drafts, s.draft_tokens, s.accepted_tokens),
            (Some(100.0), Some(300.0), Some(150.0))
        );
        assert_eq!(s.acceptance_rate, Some(0.5));
        assert_eq!(s.mean_acceptance_length, Some(2.5));
        assert_eq!(s.per_position, vec![0.8, 0.5, 0.2]);
    }

    #[test]
    fn a_server_restart_counts_from_zero() {
        // The server restarted during the phase: its totals are below the baseline's.
        let base = vllm(1000, 3000, 2000, &[900, 700, 400]);
        let latest = vllm(40, 120, 60, &[30, 20, 10]);
        let s = of_phase(&base, &latest, none).expect("drafts after the restart");
        assert_eq!((s.drafts, s.accepted_tokens), (Some(40.0), Some(60.0)));
        assert_eq!(s.acceptance_rate, Some(0.5));
        assert_eq!(s.mean_acceptance_length, Some(2.5));
        assert_eq!(s.per_position, vec![0.75, 0.5, 0.25]);
    }

    #[test]
    fn without_per_position_counters_the_totals_still_give_rate_and_length() {
        let text = |d: u64, t: u64, a: u64| {
            format!(
                "llamacpp:spec_decode_num_drafts_total {d}\nllamacpp:spec_decode_num_draft_tokens_total {t}\n\
                 llamacpp:spec_decode_num_accepted_tokens_total {a}\n"
            )
        };
        let base = Exposition::parse(&text(5, 80, 40));
        let latest = Exposition::parse(&text(25, 400, 100));
        let s = of_phase(&base, &latest, none).expect("llama.cpp drafted");
        assert_eq!(s.acceptance_rate, Some(60.0 / 320.0));
        assert_eq!(s.mean_acceptance_length, Some(4.0));
        assert!(s.per_position.is_empty());
        // vLLM without its per-position family (an older release) likewise.
        let s = of_phase(&vllm(0, 0, 0, &[]), &vllm(10, 30, 15, &[]), none).expect("drafted");
        assert!(s.per_position.is_empty());
        assert_eq!(s.acceptance_rate, Some(0.5));
    }

    #[test]
    fn no_draft_in_the_phase_and_no_counters_give_no_section() {
        let same = vllm(50, 150, 70, &[30, 25, 15]);
        assert_eq!(of_phase(&same, &same, none), None);
        let plain = Exposition::parse("vllm:num_requests_running 3\n");
        assert_eq!(of_phase(&plain, &plain, none), None);
        // A missing baseline counts from zero; a missing total means no section.
        assert!(of_phase(&plain, &same, none).is_some());
        let partial = Exposition::parse("vllm:spec_decode_num_drafts_total 9\n");
        assert_eq!(of_phase(&plain, &partial, none), None);
    }

    #[test]
    fn sglang_gives_its_gauges_means() {
        let plain = Exposition::default();
        let gauges = |name: &str| match name {
            SGLANG_LENGTH => Some(2.4),
            SGLANG_RATE => Some(0.35),
            _ => None,
        };
        let s = of_phase(&plain, &plain, gauges).expect("SGLang drafted");
        assert_eq!(s.source, SpecDecodeSource::Gauges);
        assert_eq!(s.mean_acceptance_length, Some(2.4));
        assert_eq!(s.acceptance_rate, Some(0.35));
        assert_eq!(s.drafts, None);
        // Without a drafter SGLang's gauge stays 0.
        let idle = |name: &str| (name == SGLANG_LENGTH).then_some(0.0);
        assert_eq!(of_phase(&plain, &plain, idle), None);
    }

    #[test]
    fn hostile_counters_give_no_panic_and_at_most_64_positions() {
        let mut text = String::from(
            "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_draft_tokens_total 0\n\
             vllm:spec_decode_num_accepted_tokens_total 5\n",
        );
        for i in 0..200 {
            text += &format!("{PER_POSITION}{{position=\"{i}\"}} 1\n");
        }
        let latest = Exposition::parse(&text);
        let s = of_phase(&Exposition::default(), &latest, none).expect("drafts");
        assert_eq!(s.acceptance_rate, None, "no draft tokens: no rate");
        assert_eq!(s.per_position.len(), MAX_POSITIONS);
        assert!(close(s.per_position[0], 0.1));
    }
}
