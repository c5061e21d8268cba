//! A shard's session figures are checked before they are merged: against the shard's own
//! records (shard.json's states are rebuilt from requests.jsonl record for record,
//! `shard_file::phase_states`, so each listed session's requests and failures, and the
//! phase's requests that named a session, are exactly what the records say), and against
//! the other shards (a session runs whole on one shard: `--shard` splits sessions by root,
//! so one id in two shards is a shard claiming another's session, whose requests the merge
//! would add, doubling "max requests per session").

use std::collections::HashMap;

use super::shard_file::{read_jsonl, RECORDS_FILE};
use super::{shown, LoadedShard, MergeError};
use crate::measuring::metrics::RequestRecord;
use crate::safeguards::display::excerpt;

/// Requests and failures of one session in one shard's records.
#[derive(Default)]
struct Counted {
    requests: u64,
    failed: u64,
}

/// Each phase's sessions in `s`'s records: (phase, session id) → counts, and each phase's
/// requests that named a session.
type Tally = (HashMap<(usize, String), Counted>, HashMap<usize, u64>);

fn tally(s: &LoadedShard) -> Result<Tally, MergeError> {
    let (mut by_session, mut by_phase) = (HashMap::new(), HashMap::new());
    for r in read_jsonl::<RequestRecord>(&s.dir.join(RECORDS_FILE))? {
        let r = r?;
        let Some(id) = r.session.session else {
            continue;
        };
        let c: &mut Counted = by_session.entry((r.phase, id)).or_default();
        c.requests += 1;
        c.failed += u64::from(r.error.is_some());
        *by_phase.entry(r.phase).or_default() += 1;
    }
    Ok((by_session, by_phase))
}

/// Refuses a shard whose session figures are not its records', and a session two shards
/// both claim.
pub fn check(shards: &[LoadedShard]) -> Result<(), MergeError> {
    // (phase, session id) → the index of the shard that holds it.
    let mut owner: HashMap<(usize, &str), usize> = HashMap::new();
    for (i, s) in shards.iter().enumerate() {
        let (counted, requests) = tally(s)?;
        for (p, phase) in s.file.phases.iter().enumerate() {
            let refused = |what: String| MergeError::Sessions {
                dir: shown(&s.dir),
                shard: s.file.shard.to_string(),
                phase: phase.info.name.clone(),
                what,
            };
            let state = &phase.state.sessions;
            let listed = state
                .sessions
                .iter()
                .fold(0u64, |t, x| t.saturating_add(x.requests));
            let recorded = requests.get(&p).copied().unwrap_or(0);
            if state.requests != recorded
                || listed.checked_add(state.overflow_requests) != Some(recorded)
            {
                return Err(refused(format!(
                    "shard.json counts {} session requests ({listed} in its sessions, {} past their cap), its {RECORDS_FILE} {recorded}",
                    state.requests, state.overflow_requests
                )));
            }
            for t in &state.sessions {
                let c = counted.get(&(p, t.session.clone()));
                let (requests, failed) = c.map_or((0, 0), |c| (c.requests, c.failed));
                if (t.requests, t.failed) != (requests, failed) {
                    return Err(refused(format!(
                        "shard.json gives session `{}` {} requests ({} failed), its {RECORDS_FILE} {requests} ({failed} failed)",
                        excerpt(&t.session),
                        t.requests,
                        t.failed
                    )));
                }
                if let Some(&first) = owner.get(&(p, t.session.as_str())) {
                    return Err(refused(format!(
                        "session `{}` is also in shard {} ({}): a session runs whole on one shard",
                        excerpt(&t.session),
                        shards[first].file.shard,
                        shown(&shards[first].dir)
                    )));
                }
                owner.insert((p, t.session.as_str()), i);
            }
        }
    }
    Ok(())
}
