//! The engine steps a phase's records reveal. A continuous-batching engine emits one token
//! for every decoding sequence at the end of each step, so the gap between two chunks of
//! one stream is one step, and the chunks of other streams that arrive with the second
//! say what that step held: the streams that were decoding, and the streams whose first
//! token came then (their prompts were prefilled in it). Each step is kept once. A step
//! that only prefilled (no stream had a token before it: closed loops of equal answers
//! run in lockstep, so every prompt of theirs is prefilled in such a step) is timed from
//! the later of the chunk before it and the first send of its requests.
//!
//! Where the server times each prompt itself (llama.cpp's `timings.prompt_ms`), the steps
//! that prefilled come from its clock instead: llama.cpp computes a new prompt (up to its
//! batch size, 2048 tokens) in one step together with a token of every decoding slot
//! (`update_slots` in tools/server/server.cpp), so `prompt_ms` is that step's length,
//! free of the client's scheduling, and it is there even when no other stream decoded
//! (a concurrency-1 run then prices prompt tokens on its own).

use super::{ObservedPhase, ObservedRequest};

/// Chunks of one step arrive within this share of the typical step (the median gap) of
/// each other; the rest of the gap separates them from the next step's.
const SAME_STEP_SHARE: f64 = 0.25;
/// The window never narrows below this, for very short steps.
const MIN_WINDOW_NS: u64 = 20_000;

/// One engine step.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStep {
    pub gap_ms: f64,
    /// Streams that got a token in it and had one before.
    pub decoding: usize,
    /// New prompt tokens of the streams whose first token came at its end.
    pub prefill_tokens: u64,
    /// Sequences in it: decoding + prefilled.
    pub running: usize,
    /// Streams the client had sent before the step began that still had tokens to come.
    pub in_flight: usize,
}

#[derive(Clone, Copy)]
struct Arrival {
    t: u64,
    req: usize,
    first: bool,
}

/// Every step of `phase` that a single-token chunk ends, once each.
pub fn of(phase: &ObservedPhase) -> Vec<EngineStep> {
    let reqs = &phase.requests;
    let Some(window) = same_step_window(reqs) else {
        return Vec::new();
    };
    let mut arrivals: Vec<Arrival> = reqs
        .iter()
        .enumerate()
        .flat_map(|(req, r)| {
            r.chunks
                .iter()
                .enumerate()
                .map(move |(k, &(t, _))| Arrival {
                    t,
                    req,
                    first: k == 0,
                })
        })
        .collect();
    arrivals.sort_by_key(|a| a.t);
    let clock = Clock::new(reqs, window);
    let server_timed = reqs.iter().all(|r| r.server_prompt_ms.is_some());
    let mut steps = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        for k in 1..r.chunks.len() {
            let ((t0, _), (t1, tokens)) = (r.chunks[k - 1], r.chunks[k]);
            if tokens != 1 {
                continue;
            }
            let end = StepEnd {
                stream: i,
                t0,
                t1,
                // Where the server times the prompts, a step near a first chunk is left
                // out, not priced: the whole window keeps out every step that may have
                // computed a prompt (llama.cpp's are spread on a busy machine).
                firsts_within: if server_timed {
                    window
                } else {
                    firsts_window(window, t0, t1, r.chunks.get(k + 1).map(|c| c.0))
                },
            };
            let lo = arrivals.partition_point(|a| a.t < t1.saturating_sub(window));
            let hi = arrivals.partition_point(|a| a.t <= t1.saturating_add(window));
            if let Some(step) = step_of(&end, &arrivals[lo..hi], reqs, &clock) {
                if !(server_timed && step.prefill_tokens > 0) {
                    steps.push(step);
                }
            }
        }
    }
    if server_timed {
        steps.extend(prefills(reqs, &arrivals, &clock));
    } else {
        steps.extend(prefills_alone(reqs, &arrivals, &clock));
    }
    steps
}

/// The window for first chunks around a step's end at `t1` (a stream's chunk after one at
/// `t0`, before one at `next`), never reaching halfway to the stream's chunk before or
/// after: on a loaded machine a step that ended late is followed by one as much shorter
/// (the simulator's steps chain on deadlines; a server's late delivery is made up the
/// same way), and a first chunk within the window of both would have its prompt priced in
/// both. Decoding streams' chunks are counted over the whole window: a server that writes
/// a step's chunks in turn (llama.cpp's HTTP thread, late on a busy machine) spreads them.
fn firsts_window(window: u64, t0: u64, t1: u64, next: Option<u64>) -> u64 {
    let after = next.map_or(window, |t2| t2.saturating_sub(t1) / 2);
    window.min(t1.saturating_sub(t0) / 2).min(after)
}

/// The requests whose first chunks came together (within the window of the first of
/// them), prefilled in one step.
struct FirstChunks {
    /// The first of the chunks.
    at: u64,
    requests: Vec<usize>,
    /// The arrivals within the window of `at`: `arrivals[lo..hi]`.
    lo: usize,
    hi: usize,
}

impl FirstChunks {
    /// The streams that got a token in the same step and had one before.
    fn decoding(&self, arrivals: &[Arrival]) -> usize {
        arrivals[self.lo..self.hi]
            .iter()
            .filter(|a| !a.first)
            .map(|a| a.req)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }

    fn prefill_tokens(&self, reqs: &[ObservedRequest]) -> u64 {
        self.requests
            .iter()
            .map(|&j| reqs[j].new_prompt_tokens)
            .sum()
    }
}

fn first_chunks(arrivals: &[Arrival], window: u64) -> Vec<FirstChunks> {
    let firsts: Vec<&Arrival> = arrivals.iter().filter(|a| a.first).collect();
    let mut groups = Vec::new();
    let mut k = 0;
    while k < firsts.len() {
        let at = firsts[k].t;
        let mut requests = Vec::new();
        while k < firsts.len() && firsts[k].t <= at.saturating_add(window) {
            requests.push(firsts[k].req);
            k += 1;
        }
        groups.push(FirstChunks {
            at,
            requests,
            lo: arrivals.partition_point(|a| a.t < at.saturating_sub(window)),
            hi: arrivals.partition_point(|a| a.t <= at.saturating_add(window)),
        });
    }
    groups
}

/// The steps that prefilled prompts, timed by the server: each group of first chunks was
/// prefilled in one step, as long as the longest of their `prompt_ms`; the streams
/// decoding in it are those with a later chunk then.
fn prefills(reqs: &[ObservedRequest], arrivals: &[Arrival], clock: &Clock) -> Vec<EngineStep> {
    first_chunks(arrivals, clock.window)
        .into_iter()
        .map(|group| {
            let decoding = group.decoding(arrivals);
            let gap_ms = group
                .requests
                .iter()
                .filter_map(|&j| reqs[j].server_prompt_ms)
                .fold(0.0, f64::max);
            let began = group.at.saturating_sub((gap_ms * 1e6) as u64);
            EngineStep {
                gap_ms,
                decoding,
                prefill_tokens: group.prefill_tokens(reqs),
                running: decoding + group.requests.len(),
                in_flight: clock.in_flight(began),
            }
        })
        .collect()
}

/// The steps that only prefilled, timed by the client: a group of first chunks with no
/// stream decoding beside it. The step began when the step before it ended (the chunk
/// before the group) or, if the engine was idle then, when its first request was sent;
/// the server's reading of that request is then counted in the step.
fn prefills_alone(
    reqs: &[ObservedRequest],
    arrivals: &[Arrival],
    clock: &Clock,
) -> Vec<EngineStep> {
    first_chunks(arrivals, clock.window)
        .into_iter()
        .filter(|group| group.decoding(arrivals) == 0)
        .filter_map(|group| {
            let before = group.lo.checked_sub(1).map_or(0, |k| arrivals[k].t);
            let sent = group.requests.iter().map(|&j| reqs[j].sent_ns).min()?;
            let began = before.max(sent);
            Some(EngineStep {
                gap_ms: group.at.saturating_sub(began) as f64 / 1e6,
                decoding: 0,
                prefill_tokens: group.prefill_tokens(reqs),
                running: group.requests.len(),
                in_flight: clock.in_flight(began),
            })
        })
        .collect()
}

/// A stream's chunk at `t1` after its chunk at `t0`: the end of a step.
struct StepEnd {
    stream: usize,
    t0: u64,
    t1: u64,
    /// How near `t1` a first chunk counts in this step (`firsts_window`).
    firsts_within: u64,
}

/// The step `end` ends, with the chunks within the window of it (`together`), when its
/// stream is the lowest-numbered one decoding in it (so each step is kept once).
fn step_of(
    end: &StepEnd,
    together: &[Arrival],
    reqs: &[ObservedRequest],
    clock: &Clock,
) -> Option<EngineStep> {
    let (i, t0, t1) = (end.stream, end.t0, end.t1);
    let mut decoders: Vec<usize> = together
        .iter()
        .filter(|a| !a.first)
        .map(|a| a.req)
        .collect();
    decoders.sort_unstable();
    decoders.dedup();
    if decoders.first() != Some(&i) {
        return None;
    }
    let mut prefilled: Vec<usize> = together
        .iter()
        .filter(|a| a.first && a.t.abs_diff(t1) <= end.firsts_within)
        .map(|a| a.req)
        .collect();
    prefilled.sort_unstable();
    prefilled.dedup();
    let prefill_tokens = prefilled.iter().map(|&j| reqs[j].new_prompt_tokens).sum();
    Some(EngineStep {
        gap_ms: t1.saturating_sub(t0) as f64 / 1e6,
        decoding: decoders.len(),
        prefill_tokens,
        running: decoders.len() + prefilled.len(),
        in_flight: clock.in_flight(t0),
    })
}

/// The window within which chunks belong to one step: a share of the median gap.
fn same_step_window(reqs: &[ObservedRequest]) -> Option<u64> {
    let mut gaps: Vec<u64> = reqs
        .iter()
        .flat_map(|r| r.chunks.windows(2).map(|w| w[1].0.saturating_sub(w[0].0)))
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    let (_, median, _) = gaps.select_nth_unstable(mid);
    Some(((*median as f64 * SAME_STEP_SHARE) as u64).max(MIN_WINDOW_NS))
}

/// Send and last-token times, sorted, to count the streams in flight at an instant.
struct Clock {
    sent: Vec<u64>,
    last: Vec<u64>,
    window: u64,
}

impl Clock {
    fn new(reqs: &[ObservedRequest], window: u64) -> Clock {
        let with_tokens = reqs.iter().filter(|r| !r.chunks.is_empty());
        let mut sent: Vec<u64> = with_tokens.clone().map(|r| r.sent_ns).collect();
        let mut last: Vec<u64> = with_tokens
            .filter_map(|r| r.chunks.last().map(|c| c.0))
            .collect();
        sent.sort_unstable();
        last.sort_unstable();
        Clock { sent, last, window }
    }

    /// Streams sent a window before `t` that still had a token to come a window after it:
    /// a request sent during the step before waits for that step to end on any engine,
    /// and is not counted as waiting for a slot.
    fn in_flight(&self, t: u64) -> usize {
        let sent = self
            .sent
            .partition_point(|&s| s < t.saturating_sub(self.window));
        let done = self
            .last
            .partition_point(|&l| l <= t.saturating_add(self.window));
        sent.saturating_sub(done)
    }
}
