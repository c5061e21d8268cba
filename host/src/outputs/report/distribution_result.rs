//! A latency distribution as result.json writes it. Kept out of `json.rs` because
//! `targets.rs`, which `json.rs` calls for the per-target results, writes the same shape.

use super::result_file::DistributionResult;
use crate::measuring::metrics::catalogue::percentile_key;
use crate::measuring::metrics::Distribution;

/// `d` under result.json's keys: `mean_ms`, `median_ms`, ... and one `p{p}_ms` per percentile.
pub(crate) fn distribution_result(d: &Distribution) -> DistributionResult {
    DistributionResult {
        count: d.count,
        mean_ms: d.mean,
        median_ms: d.median,
        std_ms: d.std,
        min_ms: d.min,
        max_ms: d.max,
        percentiles: d
            .percentiles
            .iter()
            .map(|&(p, v)| (format!("{}_ms", percentile_key(p)), v))
            .collect(),
    }
}
