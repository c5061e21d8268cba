//! `--sim KEY=VALUE`: what-if overrides of the batching engine (the `default` profile's or
//! a twin's), in vLLM's own words where vLLM has one (`max_num_seqs`,
//! `max_num_batched_tokens`, `num_gpu_blocks` × `block_size`), plus the replicas behind a
//! router. Parsed and checked before the server starts, so a mistake is one line naming
//! the key and what is allowed, and each applied override is kept for the reports.

use std::fmt;
use std::str::FromStr;

use super::error::SimError;

/// Every key `--sim` takes, in the order the help and the errors list them.
pub const KEYS: [&str; 10] = [
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_tokens",
    "num_gpu_blocks",
    "block_size",
    "prefill_us_per_token",
    "decode_step_ms",
    "decode_us_per_seq",
    "replicas",
    "router",
];

/// vLLM's default KV block size (`--block-size` 16 on CUDA), used with `num_gpu_blocks`.
const VLLM_BLOCK_SIZE: usize = 16;
/// More replicas than this is a typing mistake, not a what-if (each is a task and a cache).
pub const MAX_REPLICAS: usize = 256;
/// An hour in µs: the bound of the per-token and per-sequence costs, as for the flags.
const MAX_US: f64 = 3_600_000_000.0;
/// An hour in ms.
const MAX_MS: f64 = 3_600_000.0;

/// The `--sim` values, parsed; later occurrences of a key replace earlier ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WhatIf {
    /// `(key, value)` in the order first given, each value as the last occurrence wrote it.
    given: Vec<(String, String)>,
}

/// How a request picks its replica (`router`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterPolicy {
    RoundRobin,
    LeastLoaded,
}

impl FromStr for RouterPolicy {
    /// What is allowed, for the one-line error.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "round-robin" => Ok(RouterPolicy::RoundRobin),
            "least-loaded" => Ok(RouterPolicy::LeastLoaded),
            _ => Err("expected round-robin, least-loaded".to_string()),
        }
    }
}

impl fmt::Display for RouterPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouterPolicy::RoundRobin => "round-robin",
            RouterPolicy::LeastLoaded => "least-loaded",
        })
    }
}

/// The engine parameters `--sim` sets (named as `BatchParams`'s fields); `None`: the profile's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineOverrides {
    pub max_seqs: Option<usize>,
    pub max_batched_tokens: Option<usize>,
    pub kv_tokens: Option<usize>,
    pub prefill_us_per_token: Option<f64>,
    pub decode_step_ms: Option<f64>,
    pub decode_us_per_seq: Option<f64>,
}

/// How many engines serve, and how a request picks one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    pub count: usize,
    pub router: RouterPolicy,
}

impl Default for Replicas {
    fn default() -> Self {
        Replicas {
            count: 1,
            router: RouterPolicy::RoundRobin,
        }
    }
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> SimError {
    SimError::Override {
        item: format!("{key}={value}"),
        reason: reason.into(),
    }
}

impl WhatIf {
    /// Parses `KEY=VALUE` items (clap has split comma-separated lists already).
    pub fn parse(items: &[String]) -> Result<WhatIf, SimError> {
        let mut given: Vec<(String, String)> = Vec::new();
        for item in items {
            let Some((key, value)) = item.split_once('=') else {
                return Err(SimError::Override {
                    item: item.trim().to_string(),
                    reason: format!("expected KEY=VALUE, one of the keys {}", KEYS.join(", ")),
                });
            };
            let (key, value) = (key.trim(), value.trim());
            if !KEYS.contains(&key) {
                return Err(bad(
                    key,
                    value,
                    format!("unknown key; the keys are {}", KEYS.join(", ")),
                ));
            }
            match given.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value.to_string(),
                None => given.push((key.to_string(), value.to_string())),
            }
        }
        let what_if = WhatIf { given };
        // Every value is checked here, whatever the profile, so a typo is caught at once.
        what_if.engine()?;
        what_if.replicas()?;
        Ok(what_if)
    }

    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// The first override given as `KEY=VALUE`, for the error that a profile has no use for it.
    pub fn first(&self) -> Option<String> {
        self.given.first().map(|(k, v)| format!("{k}={v}"))
    }

    /// `(key, value)` of every override, for the reports.
    pub fn applied(&self) -> &[(String, String)] {
        &self.given
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The engine parameters given, checked; the cross-checks (budget ≥ slots) are the caller's.
    pub fn engine(&self) -> Result<EngineOverrides, SimError> {
        let whole = |key: &str| {
            self.get(key)
                .map(|v| count(key, v, 1, usize::MAX))
                .transpose()
        };
        let cost = |key: &str, max: f64, unit: &str| {
            self.get(key).map(|v| number(key, v, max, unit)).transpose()
        };
        Ok(EngineOverrides {
            max_seqs: whole("max_num_seqs")?,
            // The chunked-prefill budget of a step: `batch` splits a long prompt by it.
            max_batched_tokens: whole("max_num_batched_tokens")?,
            kv_tokens: self.kv_tokens()?,
            prefill_us_per_token: cost("prefill_us_per_token", MAX_US, "µs")?,
            decode_step_ms: cost("decode_step_ms", MAX_MS, "ms")?,
            decode_us_per_seq: cost("decode_us_per_seq", MAX_US, "µs")?,
        })
    }

    /// The KV capacity `kv_tokens` or `num_gpu_blocks` × `block_size` sets, if either does.
    fn kv_tokens(&self) -> Result<Option<usize>, SimError> {
        let (tokens, blocks, size) = (
            self.get("kv_tokens"),
            self.get("num_gpu_blocks"),
            self.get("block_size"),
        );
        match (tokens, blocks, size) {
            (Some(v), Some(_), _) => Err(bad(
                "kv_tokens",
                v,
                "give kv_tokens or num_gpu_blocks, not both: each sets the KV capacity",
            )),
            (_, None, Some(v)) => Err(bad(
                "block_size",
                v,
                "block_size only sizes num_gpu_blocks (the capacity is num_gpu_blocks × block_size); give both, or kv_tokens alone",
            )),
            (Some(v), None, None) => Ok(Some(count("kv_tokens", v, 1, usize::MAX)?)),
            (None, Some(b), size) => {
                let blocks = count("num_gpu_blocks", b, 1, usize::MAX)?;
                let size = match size {
                    Some(s) => count("block_size", s, 1, 1 << 20)?,
                    None => VLLM_BLOCK_SIZE,
                };
                let tokens = blocks.checked_mul(size).ok_or_else(|| {
                    bad("num_gpu_blocks", b, "num_gpu_blocks × block_size overflows")
                })?;
                Ok(Some(tokens))
            }
            (None, None, None) => Ok(None),
        }
    }

    /// The replicas and their router (one replica, round-robin, unless given).
    pub fn replicas(&self) -> Result<Replicas, SimError> {
        let mut r = Replicas::default();
        if let Some(v) = self.get("replicas") {
            r.count = count("replicas", v, 1, MAX_REPLICAS)?;
        }
        if let Some(v) = self.get("router") {
            r.router = v
                .parse()
                .map_err(|allowed: String| bad("router", v, allowed))?;
        }
        Ok(r)
    }
}

fn count(key: &str, value: &str, min: usize, max: usize) -> Result<usize, SimError> {
    let range = if max == usize::MAX {
        format!("a whole number of at least {min}")
    } else {
        format!("a whole number from {min} to {max}")
    };
    match value.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(bad(key, value, format!("expected {range}"))),
    }
}

fn number(key: &str, value: &str, max: f64, unit: &str) -> Result<f64, SimError> {
    match value.parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(x),
        _ => Err(bad(
            key,
            value,
            format!("expected a number of {unit} from 0 to {max}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what_if(items: &[&str]) -> Result<WhatIf, SimError> {
        WhatIf::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn keys_in_vllms_words_override_the_engine() {
        let w = what_if(&[
            "max_num_seqs=512",
            "max_num_batched_tokens=16384",
            "num_gpu_blocks=1000",
            "block_size=32",
            "decode_step_ms=2.5",
            "replicas=2",
            "router=least-loaded",
        ])
        .expect("valid");
        let p = w.engine().expect("applies");
        assert_eq!(
            (
                p.max_seqs,
                p.max_batched_tokens,
                p.kv_tokens,
                p.decode_step_ms
            ),
            (Some(512), Some(16384), Some(32_000), Some(2.5))
        );
        assert_eq!(p.prefill_us_per_token, None);
        let r = w.replicas().expect("replicas");
        assert_eq!((r.count, r.router), (2, RouterPolicy::LeastLoaded));
        // Without block_size, vLLM's 16.
        let p = what_if(&["num_gpu_blocks=10"]).expect("valid");
        assert_eq!(p.engine().map(|p| p.kv_tokens).ok(), Some(Some(160)));
    }

    #[test]
    fn the_last_value_of_a_key_wins_and_the_order_of_keys_is_kept() {
        let w = what_if(&["replicas=2", "max_num_seqs=4", "replicas=3"]).expect("valid");
        let applied: Vec<String> = w
            .applied()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(applied, ["replicas=3", "max_num_seqs=4"]);
        assert!(what_if(&[]).expect("none").is_empty());
    }

    #[test]
    fn mistakes_are_one_line_naming_the_key_and_what_is_allowed() {
        let cases: [(&[&str], &[&str]); 8] = [
            (
                &["max_seqs=4"],
                &["max_seqs", "max_num_seqs, max_num_batched_tokens"],
            ),
            (&["max_num_seqs=0"], &["max_num_seqs", "at least 1"]),
            (&["max_num_seqs"], &["KEY=VALUE"]),
            (&["decode_step_ms=-1"], &["decode_step_ms", "from 0 to"]),
            (&["replicas=1000"], &["replicas", "from 1 to 256"]),
            (&["router=random"], &["router", "round-robin, least-loaded"]),
            (
                &["kv_tokens=5", "num_gpu_blocks=5"],
                &["kv_tokens", "not both"],
            ),
            (&["block_size=32"], &["block_size", "num_gpu_blocks"]),
        ];
        for (items, needles) in cases {
            let e = what_if(items).expect_err("refused").to_string();
            assert!(!e.contains('\n'), "{e}");
            for n in needles {
                assert!(e.contains(n), "{items:?}: {e}");
            }
        }
    }
}
