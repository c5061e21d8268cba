//! Sharded runs: shard `I` of `N` takes a deterministic slice of the one seeded schedule,
//! with no communication after start.
//!
//! Every shard runs the scenario's whole request generation with the same seed and keeps
//! the global request indices of its stripe: in a phase split among `k` shards, shard `i`
//! owns the indices `g` with `g mod k == i`. This is k6's execution-segment striping for
//! `N` equal segments, so the union over the shards is exactly the single-machine stream.
//!
//! `k` is `N`, except under a concurrency limit `c < N` (a closed loop of width 2 on 4
//! shards): then only shards `0..c` take part, one slot each, so every slot of the single
//! run exists exactly once. Integer budgets are split the same way, the remainder to the
//! lowest indices: the shares always sum to the global value.
//!
//! Shard indices are 0-based, like Kubernetes' `JOB_COMPLETION_INDEX`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::measuring::engine::RequestStripe;
use crate::workloads::scenario::{ArrivalSpec, PhaseSpec};

/// Environment variable with the number of shards, for job engines that give only an index
/// (a Kubernetes Indexed Job sets `JOB_COMPLETION_INDEX`, not the completion count).
pub const SHARDS_ENV: &str = "RUNNER_SHARDS";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based.
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ShardError {
    #[error("--shard expects I/N with 0 <= I < N (0-based, e.g. 0/4 .. 3/4), got `{0}`")]
    Syntax(String),
    #[error("{source_name}: shard index {index} is out of range for {count} shards (indices are 0-based: 0..{last})", last = count.saturating_sub(1))]
    OutOfRange {
        source_name: String,
        index: u64,
        count: u64,
    },
    #[error("{name} is not a whole number: `{value}`")]
    NotANumber { name: String, value: String },
    #[error(
        "JOB_COMPLETION_INDEX is set but the number of shards is not: pass --shards N or set {SHARDS_ENV}"
    )]
    MissingCount,
    #[error(
        "--start-at expects an RFC 3339 time (2026-11-21T18:00:00Z) or unix seconds, got `{0}`"
    )]
    StartAt(String),
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(s.to_string());
        let (i, n) = s.trim().split_once('/').ok_or_else(syntax)?;
        let index: u64 = i.trim().parse().map_err(|_| syntax())?;
        let count: u64 = n.trim().parse().map_err(|_| syntax())?;
        Shard::new(index, count, "--shard").map_err(|_| syntax())
    }
}

impl Shard {
    /// A validated shard; `source_name` says where the numbers came from, for the error.
    pub fn new(index: u64, count: u64, source_name: &str) -> Result<Shard, ShardError> {
        if count == 0 || index >= count || count > u64::from(u32::MAX) {
            return Err(ShardError::OutOfRange {
                source_name: source_name.to_string(),
                index,
                count,
            });
        }
        Ok(Shard {
            index: index as u32,
            count: count as u32,
        })
    }

    /// The shard of this process. Precedence: `--shard I/N`; then a Kubernetes Indexed Job
    /// (`JOB_COMPLETION_INDEX`, with N from `--shards` or `RUNNER_SHARDS`); then a Slurm
    /// array (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN`, N = `SLURM_ARRAY_TASK_COUNT`);
    /// otherwise not sharded. `env` reads a variable (the process environment in the CLI).
    pub fn resolve(
        flag: Option<Shard>,
        count_flag: Option<u64>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Shard>, ShardError> {
        if let Some(s) = flag {
            return Ok(Some(s));
        }
        let number = |name: &str| -> Result<Option<u64>, ShardError> {
            match env(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| ShardError::NotANumber {
                        name: name.to_string(),
                        value: v,
                    }),
            }
        };
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = match count_flag {
                Some(n) => n,
                None => number(SHARDS_ENV)?.ok_or(ShardError::MissingCount)?,
            };
            return Shard::new(index, count, "JOB_COMPLETION_INDEX").map(Some);
        }
        if let (Some(id), Some(count)) = (
            number("SLURM_ARRAY_TASK_ID")?,
            number("SLURM_ARRAY_TASK_COUNT")?,
        ) {
            // Arrays are often numbered from 1 (`--array=1-4`): count from the first task.
            let first = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let index = id.checked_sub(first).ok_or(ShardError::OutOfRange {
                source_name: "SLURM_ARRAY_TASK_ID".into(),
                index: id,
                count,
            })?;
            let count = count_flag.unwrap_or(count);
            return Shard::new(index, count, "SLURM_ARRAY_TASK_ID").map(Some);
        }
        Ok(None)
    }

    /// How many shards a phase is split among: all of them, or as many as it has
    /// concurrency slots when that is fewer.
    pub fn participants(&self, spec: &PhaseSpec) -> u64 {
        let n = u64::from(self.count);
        spec.concurrency_limit().map_or(n, |c| c.clamp(1, n))
    }

    /// Whether global request `index` of a phase split among `k` shards is this shard's.
    pub fn owns(&self, k: u64, index: u64) -> bool {
        u64::from(self.index) < k && index % k == u64::from(self.index)
    }

    /// This shard's part of an integer quantity split among `k` shards: the requests of
    /// `0..total` in its stripe, equally its concurrency slots.
    pub fn share(&self, k: u64, total: u64) -> u64 {
        let i = u64::from(self.index);
        if i >= k {
            return 0;
        }
        total / k + u64::from(i < total % k)
    }

    /// The phase as this shard runs it: its share of the concurrency limits. The request
    /// budget needs no change: `max_requests` counts global indices, so the shard stops
    /// where the single run would, having sent exactly its stripe of them.
    pub fn phase(&self, spec: &PhaseSpec) -> PhaseSpec {
        let k = self.participants(spec);
        let mut spec = spec.clone();
        if let ArrivalSpec::Closed { concurrency } = &mut spec.arrival {
            *concurrency = self.share(k, *concurrency);
        }
        spec.max_concurrency = spec.max_concurrency.map(|m| self.share(k, m));
        spec
    }
}

/// What the engine needs to run one shard: which shard, and how many shards each phase is
/// split among (computed from the phases as the scenario declared them, before this
/// shard's concurrency share is applied).
#[derive(Clone, Debug, PartialEq)]
pub struct ShardPlan {
    pub shard: Shard,
    pub participants: Vec<u64>,
}

impl ShardPlan {
    /// The plan, and the phases as this shard runs them.
    pub fn new(shard: Shard, phases: &[PhaseSpec]) -> (ShardPlan, Vec<PhaseSpec>) {
        let plan = ShardPlan {
            shard,
            participants: phases.iter().map(|p| shard.participants(p)).collect(),
        };
        (plan, phases.iter().map(|p| shard.phase(p)).collect())
    }
}

impl RequestStripe for ShardPlan {
    fn takes_part(&self, phase: usize) -> bool {
        self.participants
            .get(phase)
            .is_some_and(|&k| u64::from(self.shard.index) < k)
    }

    fn owns(&self, phase: usize, index: u64) -> bool {
        self.participants
            .get(phase)
            .is_some_and(|&k| self.shard.owns(k, index))
    }
}

/// A wall-clock instant all shards start at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartAt(pub SystemTime);

impl std::str::FromStr for StartAt {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<StartAt, ShardError> {
        let t = s.trim();
        if let Ok(secs) = t.parse::<f64>() {
            // Out of a Duration's or a SystemTime's range: refused below, never a panic.
            let at = Duration::try_from_secs_f64(secs)
                .ok()
                .and_then(|d| UNIX_EPOCH.checked_add(d));
            if let Some(at) = at {
                return Ok(StartAt(at));
            }
        }
        let dt = chrono::DateTime::parse_from_rfc3339(t)
            .map_err(|_| ShardError::StartAt(s.to_string()))?;
        let nanos = dt
            .timestamp_nanos_opt()
            .filter(|&n| n >= 0)
            .ok_or_else(|| ShardError::StartAt(s.to_string()))?;
        Ok(StartAt(UNIX_EPOCH + Duration::from_nanos(nanos as u64)))
    }
}

impl StartAt {
    /// Sleeps until the instant (at once if it has passed); returns how late this process
    /// actually woke, in ms (negative never: a start after the instant counts as late).
    pub fn wait(&self) -> f64 {
        if let Ok(ahead) = self.0.duration_since(SystemTime::now()) {
            std::thread::sleep(ahead);
        }
        self.offset_ms(SystemTime::now())
    }

    /// Milliseconds from the instant to `now`; negative when `now` is early.
    pub fn offset_ms(&self, now: SystemTime) -> f64 {
        match now.duration_since(self.0) {
            Ok(late) => late.as_secs_f64() * 1e3,
            Err(e) => -e.duration().as_secs_f64() * 1e3,
        }
    }

    /// RFC 3339 with nanoseconds, for the shard's identity file.
    pub fn rfc3339(&self) -> String {
        chrono::DateTime::<chrono::Utc>::from(self.0)
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn phase(arrival: ArrivalSpec, max_concurrency: Option<u64>) -> PhaseSpec {
        PhaseSpec {
            name: "p".into(),
            arrival,
            max_concurrency,
            max_requests: None,
            max_duration: None,
            warmup: false,
            sessions: None,
            control: Default::default(),
            steady_window: None,
        }
    }

    #[test]
    fn parses_and_validates_i_of_n() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(" 0 / 1 ".parse(), Ok(Shard { index: 0, count: 1 }));
        for bad in ["4/4", "1/0", "-1/4", "a/4", "3", "1/2/3", ""] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(!e.contains('\n') && e.contains("0-based"), "{bad}: {e}");
        }
    }

    #[test]
    fn resolution_order_flag_then_kubernetes_then_slurm() {
        let flag = Some(Shard { index: 1, count: 2 });
        let k8s = [("JOB_COMPLETION_INDEX", "3"), (SHARDS_ENV, "8")];
        let slurm = [
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "6"),
        ];
        let all: Vec<_> = k8s.iter().chain(&slurm).copied().collect();
        assert_eq!(Shard::resolve(flag, None, env(&all)), Ok(flag));
        assert_eq!(
            Shard::resolve(None, None, env(&all)),
            Ok(Some(Shard { index: 3, count: 8 }))
        );
        assert_eq!(
            Shard::resolve(None, Some(4), env(&k8s)),
            Ok(Some(Shard { index: 3, count: 4 }))
        );
        // Slurm arrays numbered from 1: task 5 of 1..=6 is index 4.
        assert_eq!(
            Shard::resolve(None, None, env(&slurm)),
            Ok(Some(Shard { index: 4, count: 6 }))
        );
        assert_eq!(Shard::resolve(None, None, env(&[])), Ok(None));
        assert_eq!(
            Shard::resolve(None, None, env(&[("JOB_COMPLETION_INDEX", "0")])),
            Err(ShardError::MissingCount)
        );
        let e = Shard::resolve(None, Some(3), env(&[("JOB_COMPLETION_INDEX", "3")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("JOB_COMPLETION_INDEX") && e.contains("0..2"),
            "{e}"
        );
        assert!(matches!(
            Shard::resolve(None, None, env(&[("JOB_COMPLETION_INDEX", "x")])),
            Err(ShardError::NotANumber { .. })
        ));
    }

    #[test]
    fn stripes_cover_every_index_exactly_once() {
        for n in 1..=7u32 {
            for limit in [None, Some(1), Some(2), Some(5), Some(100)] {
                let spec = phase(ArrivalSpec::Poisson { rate: 1.0 }, limit);
                let shards: Vec<Shard> = (0..n).map(|i| Shard { index: i, count: n }).collect();
                for g in 0..200 {
                    let owners = shards
                        .iter()
                        .filter(|s| s.owns(s.participants(&spec), g))
                        .count();
                    assert_eq!(owners, 1, "n={n} limit={limit:?} g={g}");
                }
                for total in [0, 1, 3, 10, 1001] {
                    let sum: u64 = shards
                        .iter()
                        .map(|s| s.share(s.participants(&spec), total))
                        .sum();
                    let owned = |s: &Shard| {
                        (0..total)
                            .filter(|&g| s.owns(s.participants(&spec), g))
                            .count() as u64
                    };
                    assert_eq!(sum, total);
                    for s in &shards {
                        assert_eq!(s.share(s.participants(&spec), total), owned(s));
                    }
                }
            }
        }
    }

    #[test]
    fn concurrency_is_split_with_the_remainder_to_the_lowest_shards() {
        let closed = phase(ArrivalSpec::Closed { concurrency: 10 }, None);
        let widths: Vec<u64> = (0..4)
            .map(|i| Shard { index: i, count: 4 }.phase(&closed))
            .map(|p| p.concurrency_limit().unwrap_or(0))
            .collect();
        assert_eq!(widths, vec![3, 3, 2, 2]);
        // Narrower than the shard count: one slot each on the first two, none on the rest.
        let narrow = phase(ArrivalSpec::Closed { concurrency: 2 }, Some(2));
        let widths: Vec<u64> = (0..4)
            .map(|i| Shard { index: i, count: 4 }.phase(&narrow))
            .map(|p| p.concurrency_limit().unwrap_or(0))
            .collect();
        assert_eq!(widths, vec![1, 1, 0, 0]);
        // An open loop without a cap keeps no cap.
        let open = phase(ArrivalSpec::Poisson { rate: 3.0 }, None);
        assert_eq!(Shard { index: 1, count: 4 }.phase(&open), open);
    }

    #[test]
    fn start_at_reads_rfc3339_and_unix_seconds() {
        let a: StartAt = "2026-11-21T18:00:00Z".parse().unwrap();
        let b: StartAt = "1795284000".parse().unwrap();
        let c: StartAt = "2026-11-21T19:00:00.5+01:00".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(c.0.duration_since(a.0).unwrap(), Duration::from_millis(500));
        assert_eq!(a.rfc3339(), "2026-11-21T18:00:00.000000000Z");
        assert_eq!(a.offset_ms(a.0 + Duration::from_millis(7)), 7.0);
        assert_eq!(a.offset_ms(a.0 - Duration::from_millis(3)), -3.0);
        for bad in ["tomorrow", "-5", "2026-13-01T00:00:00Z", ""] {
            assert!(matches!(
                bad.parse::<StartAt>(),
                Err(ShardError::StartAt(_))
            ));
        }
        // A past instant does not wait.
        let past = StartAt(UNIX_EPOCH + Duration::from_secs(1));
        assert!(past.wait() > 0.0);
    }
}
