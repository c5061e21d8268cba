//! Whether a phase's saved state (a shard's shard.json) holds counts one run could have
//! written: every count within what its histograms hold and within the requests sent,
//! no sum past `u64::MAX`. `runner merge` refuses a state that fails, naming the count,
//! rather than adding a tampered or corrupt count into a wrapped or impossible total.

use super::PhaseState;
use crate::measuring::metrics::catalogue::{self, Bound};
use crate::measuring::metrics::stat::{in_field, StatState, StatStateError};
use crate::measuring::metrics::tags::TagState;

fn inconsistent(message: String) -> StatStateError {
    StatStateError::Inconsistent(message)
}

/// The sum of named counts, or the error naming them.
fn sum(parts: &[(&str, u64)]) -> Result<u64, StatStateError> {
    parts
        .iter()
        .try_fold(0u64, |acc, (_, v)| acc.checked_add(*v))
        .ok_or_else(|| {
            let names: Vec<String> = parts.iter().map(|(n, v)| format!("`{n}` ({v})")).collect();
            inconsistent(format!("{} overflow a 64-bit count", names.join(" + ")))
        })
}

/// `value` of `field` is at most `limit`, which is `what`.
fn at_most(field: &str, value: u64, what: &str, limit: u64) -> Result<(), StatStateError> {
    if value > limit {
        return Err(inconsistent(format!(
            "`{field}` is {value}, more than {what} ({limit})"
        )));
    }
    Ok(())
}

/// What the catalogue says the histogram saved as `key` may hold.
fn bound(key: &str) -> Bound {
    catalogue::accumulated()
        .find(|(_, a)| a.state_key == key)
        .map_or(Bound::Unchecked, |(_, a)| a.bound)
}

/// Checks a phase's state: see the module's documentation.
pub(super) fn check(s: &PhaseState) -> Result<(), StatStateError> {
    let sent = sum(&[
        ("completed", s.completed),
        ("failed", s.failed),
        ("cancelled", s.cancelled),
    ])?;
    // Every request the phase finished recorded its send lateness, whatever its outcome.
    for (key, st) in s.latencies.iter() {
        if bound(key) == Bound::EveryRequest && st.weight != sent {
            return Err(inconsistent(format!(
                "`completed` + `failed` + `cancelled` is {sent}, but the `{key}` histogram holds {} requests",
                st.weight
            )));
        }
    }
    let kinds: Vec<(&str, u64)> = s.failures.iter().map(|f| (f.kind.key(), f.count)).collect();
    let failures = sum(&kinds)?;
    if failures != s.failed {
        return Err(inconsistent(format!(
            "`failures` add up to {failures}, but `failed` is {}",
            s.failed
        )));
    }
    at_most("retried", s.retried, "the requests sent", sent)?;
    let done = "`completed`";
    for (field, value) in [("good", s.good), ("usage_requests", s.usage_requests)] {
        at_most(field, value, done, s.completed)?;
    }
    let waited = s.completed + s.cancelled;
    for (key, st) in s.latencies.iter() {
        match bound(key) {
            Bound::Completed => at_most(key, st.weight, done, s.completed)?,
            Bound::CompletedOrCancelled => {
                at_most(key, st.weight, "`completed` + `cancelled`", waited)?
            }
            Bound::Chunks => at_most(key, st.weight, "`chunks`", s.chunks)?,
            Bound::EveryRequest | Bound::Unchecked => {}
        }
    }
    let per_second = s
        .tokens_per_second
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
    at_most(
        "tokens_per_second",
        per_second,
        "`chunk_tokens`",
        s.chunk_tokens,
    )?;
    check_intervals(s, sent)?;
    for (field, tags) in [("tags", &s.tags), ("targets", &s.targets)] {
        for t in tags {
            check_tag(t, sent).map_err(in_field(&format!("{field}.{}", t.tag)))?;
        }
    }
    check_answer_and_clock(s, sent)
}

/// The send and end times: as many of each, no more than the requests sent, ascending,
/// and the k-th end after the k-th send (as `[sent, end)` intervals have).
fn check_intervals(s: &PhaseState, sent: u64) -> Result<(), StatStateError> {
    let (starts, ends) = (&s.starts_ns, &s.ends_ns);
    if starts.len() != ends.len() {
        return Err(inconsistent(format!(
            "`starts_ns` has {} times, `ends_ns` {}",
            starts.len(),
            ends.len()
        )));
    }
    at_most("starts_ns", starts.len() as u64, "the requests sent", sent)?;
    for (field, v) in [("starts_ns", starts), ("ends_ns", ends)] {
        if v.windows(2).any(|w| w[0] > w[1]) {
            return Err(inconsistent(format!("`{field}` is not in ascending order")));
        }
    }
    if let Some(k) = starts.iter().zip(ends).position(|(a, b)| b <= a) {
        return Err(inconsistent(format!(
            "`ends_ns`[{k}] ({}) is not after `starts_ns`[{k}] ({})",
            ends[k], starts[k]
        )));
    }
    Ok(())
}

/// One tag's (or target's) counts: within the phase's requests and its histograms.
fn check_tag(t: &TagState, sent: u64) -> Result<(), StatStateError> {
    let own = sum(&[
        ("completed", t.completed),
        ("failed", t.failed),
        ("cancelled", t.cancelled),
    ])?;
    at_most(
        "completed + failed + cancelled",
        own,
        "the phase's requests",
        sent,
    )?;
    let waited = t.completed + t.cancelled;
    at_most("ttft", t.ttft.weight, "`completed` + `cancelled`", waited)?;
    at_most("tpot", t.tpot.weight, "`completed`", t.completed)?;
    at_most("e2el", t.e2el.weight, "`completed`", t.completed)
}

/// The answer split and the clocks' counts: within the requests and chunks they count.
fn check_answer_and_clock(s: &PhaseState, sent: u64) -> Result<(), StatStateError> {
    let a = &s.answer;
    at_most(
        "answer.reasoning_requests",
        a.reasoning_requests,
        "`completed`",
        s.completed,
    )?;
    let ttfa = a.ttfa.as_ref().map_or(0, |t| t.weight);
    at_most("answer.ttfa", ttfa, "`completed`", s.completed)?;
    let endpoints: Vec<(&str, u64)> = a
        .endpoints
        .iter()
        .map(|e| (e.endpoint.as_str(), e.requests))
        .collect();
    at_most(
        "answer.endpoints",
        sum(&endpoints)?,
        "the requests sent",
        sent,
    )?;
    let c = &s.clock;
    let chunks = sum(&[
        ("clock.kernel_chunks", c.kernel_chunks),
        ("clock.read_chunks", c.read_chunks),
    ])?;
    at_most(
        "clock.kernel_chunks + read_chunks",
        chunks,
        "`chunks`",
        s.chunks,
    )?;
    let sends = sum(&[
        ("clock.socket_write_sends", c.socket_write_sends),
        ("clock.handoff_sends", c.handoff_sends),
    ])?;
    at_most(
        "clock.socket_write_sends + handoff_sends",
        sends,
        "the requests sent",
        sent,
    )?;
    let weight = |st: &Option<StatState>| st.as_ref().map_or(0, |t| t.weight);
    at_most(
        "clock.client_delay",
        weight(&c.client_delay),
        "`clock.kernel_chunks`",
        c.kernel_chunks,
    )?;
    at_most(
        "clock.send_write",
        weight(&c.send_write),
        "`clock.socket_write_sends`",
        c.socket_write_sends,
    )
}
