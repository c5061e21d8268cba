//! The merged phases' steady state. A shard's state does not carry the per-request rows
//! the window's figures need (`metrics::steady_state`), so they are read again from each
//! shard's requests.jsonl, once per shard, into each phase's merged accumulator: the
//! window is then found over the merged requests in flight (the sum over the shards,
//! against the whole run's cap), as one process would have found it. Times are taken from
//! a common phase start, as the merged send and end times are (the shards started
//! together with `--start-at`).

use super::shard_file::{read_jsonl, RECORDS_FILE};
use super::{LoadedShard, MergeError};
use crate::measuring::metrics::{PhaseAccumulator, RequestRecord};

/// Adds every shard's records to the steady state of their phase in `phases` (`acc`
/// picks a phase's accumulator); a record of a phase past the last is left out.
pub(super) fn feed<T>(
    shards: &[LoadedShard],
    phases: &mut [T],
    acc: impl Fn(&mut T) -> &mut PhaseAccumulator,
) -> Result<(), MergeError> {
    for s in shards {
        for r in read_jsonl::<RequestRecord>(&s.dir.join(RECORDS_FILE))? {
            let r = r?;
            if let Some(phase) = phases.get_mut(r.phase) {
                acc(phase).record_steady(&r);
            }
        }
    }
    Ok(())
}
