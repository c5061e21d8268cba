//! A distribution's full state, serialisable and mergeable: the histogram in HdrHistogram's
//! compressed V2 format (base64, as HdrHistogram's interval logs store it) and the exact
//! moments beside it. Merging shards' states gives the histogram a single process would
//! have recorded, bucket for bucket, so merged percentiles keep the stated precision.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::StreamingStat;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatState {
    /// Microsecond histogram, HdrHistogram V2 + DEFLATE, base64.
    pub hdr_v2_deflate_base64: String,
    pub weight: u64,
    /// Σ value·weight in ns, Neumaier-compensated (`sum + comp`).
    pub sum_ns: f64,
    pub comp_ns: f64,
    /// Welford's running mean (ns) and sum of squared deviations (ns²).
    pub mean_ns: f64,
    pub m2: f64,
    /// Exact extremes in ns; absent when there are no samples.
    pub min_ns: Option<f64>,
    pub max_ns: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum StatStateError {
    #[error("histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not in HdrHistogram V2 format: {0:?}")]
    Histogram(hdrhistogram::serialization::DeserializeError),
    #[error("histograms cannot be added: {0:?}")]
    Add(hdrhistogram::AdditionError),
    #[error("its histogram holds {held} samples, its `weight` says {weight}")]
    Weight { held: u64, weight: u64 },
    #[error("`{field}`: {source}")]
    In {
        field: String,
        source: Box<StatStateError>,
    },
    /// Counts that no run could have written together.
    #[error("{0}")]
    Inconsistent(String),
    #[error("`{field}` overflows a 64-bit count when the shards are added ({a} + {b})")]
    Overflow { field: String, a: u64, b: u64 },
}

/// Wraps an error of the distribution or count `field`, naming it.
pub(crate) fn in_field(field: &str) -> impl FnOnce(StatStateError) -> StatStateError + '_ {
    move |e| StatStateError::In {
        field: field.to_string(),
        source: Box::new(e),
    }
}

/// Adds `b` to the count `field`, refusing a sum past `u64::MAX`: a merged count is exact
/// or refused, never wrapped.
pub(crate) fn add_count(field: &str, a: &mut u64, b: u64) -> Result<(), StatStateError> {
    *a = a.checked_add(b).ok_or_else(|| StatStateError::Overflow {
        field: field.to_string(),
        a: *a,
        b,
    })?;
    Ok(())
}

impl StreamingStat {
    pub(crate) fn state(&self) -> StatState {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.hist, &mut bytes)
            .expect("serialising a histogram into memory cannot fail");
        let any = self.weight > 0;
        StatState {
            hdr_v2_deflate_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            weight: self.weight,
            sum_ns: self.sum,
            comp_ns: self.comp,
            mean_ns: self.w_mean,
            m2: self.m2,
            min_ns: any.then_some(self.min_ns),
            max_ns: any.then_some(self.max_ns),
        }
    }

    pub(crate) fn from_state(state: &StatState) -> Result<StreamingStat, StatStateError> {
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(&state.hdr_v2_deflate_base64)?;
        let mut hist: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(StatStateError::Histogram)?;
        // A weight the histogram does not hold is a tampered or corrupt state.
        if hist.len() != state.weight {
            return Err(StatStateError::Weight {
                held: hist.len(),
                weight: state.weight,
            });
        }
        // Later merges may bring larger values.
        hist.auto(true);
        Ok(StreamingStat {
            hist,
            weight: state.weight,
            sum: state.sum_ns,
            comp: state.comp_ns,
            w_mean: state.mean_ns,
            m2: state.m2,
            min_ns: state.min_ns.unwrap_or(f64::INFINITY),
            max_ns: state.max_ns.unwrap_or(f64::NEG_INFINITY),
        })
    }

    /// Adds another distribution's samples (Chan et al.'s pairwise update for the variance).
    pub(crate) fn merge(&mut self, other: &StreamingStat) -> Result<(), StatStateError> {
        if other.weight == 0 {
            return Ok(());
        }
        let mut weight = self.weight;
        add_count("weight", &mut weight, other.weight)?;
        self.hist.add(&other.hist).map_err(StatStateError::Add)?;
        for x in [other.sum, other.comp] {
            self.add_to_sum(x);
        }
        let (na, nb) = (self.weight as f64, other.weight as f64);
        let n = na + nb;
        let delta = other.w_mean - self.w_mean;
        self.w_mean += delta * nb / n;
        self.m2 += other.m2 + delta * delta * na * nb / n;
        self.weight = weight;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_state_round_trips_losslessly() {
        let mut s = StreamingStat::new();
        for v in [0.0, 1.5e3, 2.5e6, 7.2e12] {
            s.record(v);
        }
        let state = s.state();
        let back = StreamingStat::from_state(&state).unwrap();
        assert_eq!(back.hist, s.hist);
        assert_eq!(back.state(), state);
        let empty = StreamingStat::new().state();
        assert_eq!((empty.min_ns, empty.weight), (None, 0));
        let json = serde_json::to_string(&empty).unwrap();
        let back = StreamingStat::from_state(&serde_json::from_str(&json).unwrap()).unwrap();
        assert_eq!(
            back.distribution(&[99.0]),
            StreamingStat::new().distribution(&[99.0])
        );
    }

    #[test]
    fn merged_parts_read_like_the_whole() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let values: Vec<f64> = (0..5000).map(|_| rng.random_range(1e3..5e9f64)).collect();
        let mut whole = StreamingStat::new();
        let mut parts: Vec<StreamingStat> = (0..4).map(|_| StreamingStat::new()).collect();
        for (i, &v) in values.iter().enumerate() {
            whole.record(v);
            parts[i % 4].record(v);
        }
        let mut merged = StreamingStat::new();
        for p in &parts {
            // Through the serialised form, as `runner merge` reads it.
            merged
                .merge(&StreamingStat::from_state(&p.state()).unwrap())
                .unwrap();
        }
        assert_eq!(merged.hist, whole.hist);
        let pcts = [1.0, 50.0, 90.0, 99.0, 99.9];
        let (a, b) = (merged.distribution(&pcts), whole.distribution(&pcts));
        assert_eq!((a.count, a.min, a.max), (b.count, b.min, b.max));
        assert_eq!(a.percentiles, b.percentiles);
        assert_eq!(a.median, b.median);
        assert!((a.mean - b.mean).abs() <= 1e-9 * b.mean);
        assert!((a.std - b.std).abs() <= 1e-9 * b.std);
    }

    #[test]
    fn a_weight_the_histogram_does_not_hold_is_refused() {
        let mut s = StreamingStat::new();
        s.record(1e6);
        let mut state = s.state();
        state.weight = u64::MAX;
        let e = StreamingStat::from_state(&state).unwrap_err();
        assert_eq!(
            e.to_string(),
            "its histogram holds 1 samples, its `weight` says 18446744073709551615"
        );
        // Weights that overflow when added are refused, not wrapped.
        let mut big = StreamingStat::new();
        big.record_weighted(1e6, u64::MAX);
        let e = big.merge(&s).unwrap_err();
        assert!(matches!(e, StatStateError::Overflow { .. }), "{e}");
        assert_eq!(big.count(), u64::MAX);
    }

    #[test]
    fn garbage_is_refused() {
        let mut state = StreamingStat::new().state();
        state.hdr_v2_deflate_base64 = "not base64!".into();
        assert!(matches!(
            StreamingStat::from_state(&state),
            Err(StatStateError::Base64(_))
        ));
        state.hdr_v2_deflate_base64 = "AAAA".into();
        assert!(matches!(
            StreamingStat::from_state(&state),
            Err(StatStateError::Histogram(_))
        ));
    }
}
