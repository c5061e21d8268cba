//! `--sim-spec-decode`: a draft model for the `default` profile. Each decode step of a
//! sequence verifies k draft tokens; position i is accepted with its probability once every
//! earlier one was (a rejected token ends the draft, as in rejection sampling), and the step
//! yields the accepted tokens plus the target model's own (the bonus token), so a sequence
//! finishes in fewer steps. The step that ends a prefill samples one token and drafts nothing.
//!
//! The acceptance is drawn from a ChaCha stream per sequence (the model's seed, the
//! sequence's admission number), so a run is reproducible whatever the batch around it.
//! The steps are counted in vLLM's spec-decode counters (`vllm/v1/spec_decode/metrics.py`:
//! drafts, draft tokens, accepted tokens, accepted tokens per position), counted as the
//! steps happen. Not modelled: the drafter's own time and the verification's extra compute
//! (a step costs what a plain decode step costs), though the k draft tokens of each
//! decoding sequence do count in the step's token budget, as in vLLM.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Most draft tokens per step (vLLM's `num_speculative_tokens` is a handful).
pub const MAX_K: usize = 16;

/// Seed of every sequence's acceptance stream.
const SEED: u64 = 0x5EED_D2AF;

/// The draft model: for each draft position, the probability that its token is accepted
/// given every earlier one was.
#[derive(Clone, Debug, PartialEq)]
pub struct DraftModel {
    accept: Arc<[f64]>,
}

/// `--sim-spec-decode P1,P2,…`: one acceptance probability (0 to 1) per draft position.
pub fn parse(s: &str) -> Result<DraftModel, String> {
    let accept = s
        .split(',')
        .map(|p| match p.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
            _ => Err(format!(
                "`{}` is not a probability between 0 and 1 (expected one per draft position, like 0.8,0.6,0.4)",
                p.trim()
            )),
        })
        .collect::<Result<Vec<f64>, String>>()?;
    if accept.len() > MAX_K {
        return Err(format!("{} draft positions; at most {MAX_K}", accept.len()));
    }
    Ok(DraftModel {
        accept: accept.into(),
    })
}

impl DraftModel {
    /// Draft tokens per step.
    pub fn k(&self) -> usize {
        self.accept.len()
    }

    /// The share of drafts whose token at each position is accepted: the product of the
    /// probabilities up to it (what vLLM's per-position acceptance estimates).
    pub fn expected_per_position(&self) -> Vec<f64> {
        self.accept
            .iter()
            .scan(1.0, |all, p| {
                *all *= p;
                Some(*all)
            })
            .collect()
    }

    /// Accepted tokens of one draft.
    fn draw(&self, rng: &mut ChaCha8Rng) -> usize {
        self.accept
            .iter()
            .take_while(|&&p| rng.random::<f64>() < p)
            .count()
    }
}

/// Hands each admitted sequence its own acceptance stream.
pub struct Drafter {
    model: DraftModel,
    admitted: u64,
}

impl Drafter {
    /// The drafter of `model`; `metrics` exports its counters from now on (at zero).
    pub fn new(model: DraftModel, metrics: &SpecMetrics) -> Drafter {
        metrics.enable(model.k());
        Drafter { model, admitted: 0 }
    }

    pub fn k(&self) -> usize {
        self.model.k()
    }

    /// The next admitted sequence's drafts.
    pub fn stream(&mut self) -> Drafts {
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        rng.set_stream(self.admitted);
        self.admitted += 1;
        Drafts {
            model: self.model.clone(),
            rng,
        }
    }
}

/// One sequence's draft model and acceptance stream.
pub struct Drafts {
    model: DraftModel,
    rng: ChaCha8Rng,
}

impl Drafts {
    /// One verifying step: the tokens it yields (accepted + the bonus token), counted in
    /// `tally`.
    pub fn step(&mut self, tally: &mut Tally) -> usize {
        let accepted = self.model.draw(&mut self.rng);
        tally.observe(self.model.k(), accepted);
        1 + accepted
    }
}

/// Spec-decode counts, of one step or since the server started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub drafts: u64,
    pub draft_tokens: u64,
    pub accepted: u64,
    /// Drafts whose token at each position was accepted.
    pub per_position: Vec<u64>,
}

impl Tally {
    /// A draft of `k` tokens of which the first `accepted` were accepted (vLLM's
    /// `SpecDecodingStats.observe_draft`).
    fn observe(&mut self, k: usize, accepted: usize) {
        self.drafts += 1;
        self.draft_tokens += k as u64;
        self.accepted += accepted as u64;
        if self.per_position.len() < k {
            self.per_position.resize(k, 0);
        }
        for n in &mut self.per_position[..accepted.min(k)] {
            *n += 1;
        }
    }

    fn add(&mut self, other: &Tally) {
        self.drafts += other.drafts;
        self.draft_tokens += other.draft_tokens;
        self.accepted += other.accepted;
        for (i, n) in other.per_position.iter().enumerate() {
            if let Some(total) = self.per_position.get_mut(i) {
                *total += n;
            }
        }
    }
}

/// The server's spec-decode counters, in `/metrics` once a drafter is configured.
#[derive(Default)]
pub struct SpecMetrics {
    totals: Mutex<Option<Tally>>,
}

impl SpecMetrics {
    fn enable(&self, k: usize) {
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        *totals = Some(Tally {
            per_position: vec![0; k],
            ..Tally::default()
        });
    }

    /// Adds one step's drafts (one lock per step, not per sequence).
    pub fn add(&self, step: &Tally) {
        if step.drafts == 0 {
            return;
        }
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(totals) = totals.as_mut() {
            totals.add(step);
        }
    }

    /// The counters as vLLM writes them (nothing without a drafter).
    pub fn render(&self, out: &mut String, labels: &str) {
        let totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = totals.as_ref() else {
            return;
        };
        let counters = [
            ("drafts", "Number of spec decoding drafts.", t.drafts),
            ("draft_tokens", "Number of draft tokens.", t.draft_tokens),
            ("accepted_tokens", "Number of accepted tokens.", t.accepted),
        ];
        for (name, help, value) in counters {
            let name = format!("vllm:spec_decode_num_{name}");
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name}_total{{{labels}}} {}", value as f64);
        }
        let name = "vllm:spec_decode_num_accepted_tokens_per_pos";
        let _ = writeln!(
            out,
            "# HELP {name} Accepted tokens per draft position.\n# TYPE {name} counter"
        );
        for (i, n) in t.per_position.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_total{{{labels},position=\"{i}\"}} {}",
                *n as f64
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_lists_one_probability_per_position() {
        let m = parse("0.8, 0.6,0.4").expect("three positions");
        assert_eq!(m.k(), 3);
        let expected = m.expected_per_position();
        let want = [0.8, 0.48, 0.192];
        assert!(expected
            .iter()
            .zip(want)
            .all(|(a, b)| (a - b).abs() < 1e-12));
        for bad in [
            "",
            "0.8,",
            "1.5",
            "-0.1",
            "NaN",
            "a",
            &vec!["0.5"; 17].join(","),
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse("1,1").map(|m| m.k()), Ok(2));
    }

    #[test]
    fn only_the_default_profile_takes_a_draft_model() {
        use crate::servers::sim::{SimArgs, Timing};
        let args = |profile: &str| SimArgs {
            profile: profile.into(),
            spec_decode: parse("0.7").ok(),
            ..SimArgs::default()
        };
        match args("default").to_config().map(|c| c.timing) {
            Ok(Timing::Batching(p)) => assert_eq!(p.spec_decode.map(|m| m.k()), Some(1)),
            other => panic!("{other:?}"),
        }
        for profile in ["fixed", "zero"] {
            let e = args(profile)
                .to_config()
                .expect_err("no decode steps to draft for");
            assert!(e.to_string().contains("--sim-spec-decode"), "{e}");
        }
    }

    #[test]
    fn draws_follow_the_probabilities_and_a_rejection_ends_the_draft() {
        let model = parse("0.8,0.6,0.4").expect("model");
        let metrics = SpecMetrics::default();
        let mut drafter = Drafter::new(model, &metrics);
        let mut tally = Tally::default();
        let mut yielded = 0;
        for _ in 0..200 {
            let mut seq = drafter.stream();
            for _ in 0..100 {
                yielded += seq.step(&mut tally);
            }
        }
        // 20,000 drafts: a share's standard error is at most 0.0036.
        assert_eq!((tally.drafts, tally.draft_tokens), (20_000, 60_000));
        assert_eq!(yielded as u64, tally.drafts + tally.accepted);
        let shares: Vec<f64> = tally
            .per_position
            .iter()
            .map(|&n| n as f64 / tally.drafts as f64)
            .collect();
        for (got, want) in shares.iter().zip([0.8, 0.48, 0.192]) {
            assert!((got - want).abs() < 0.02, "{shares:?}");
        }
        // Position i is accepted only when i - 1 was.
        assert!(tally.per_position.windows(2).all(|w| w[0] >= w[1]));
        let sum: u64 = tally.per_position.iter().sum();
        assert_eq!(sum, tally.accepted);
    }

    #[test]
    fn a_sequences_stream_depends_on_its_admission_number_only() {
        let model = parse("0.5,0.5,0.5,0.5").expect("model");
        let metrics = SpecMetrics::default();
        let draws = |skip: usize| {
            let mut d = Drafter::new(model.clone(), &metrics);
            let mut seq = (0..=skip).map(|_| d.stream()).last().expect("a stream");
            let mut tally = Tally::default();
            (0..50).map(|_| seq.step(&mut tally)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3));
        assert_ne!(draws(3), draws(4));
    }

    #[test]
    fn the_counters_are_vllms() {
        let metrics = SpecMetrics::default();
        let mut out = String::new();
        metrics.render(&mut out, "engine=\"0\"");
        assert_eq!(out, "", "no drafter, no counters");
        let _drafter = Drafter::new(parse("0.9,0.9").expect("model"), &metrics);
        let mut step = Tally::default();
        step.observe(2, 2);
        step.observe(2, 0);
        step.observe(2, 1);
        metrics.add(&step);
        metrics.render(&mut out, "engine=\"0\"");
        for line in [
            "vllm:spec_decode_num_drafts_total{engine=\"0\"} 3",
            "vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} 6",
            "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 3",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 2",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"1\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "no {line} in\n{out}");
        }
    }
}
