//! Per-session statistics: what the requests a session sent add up to (its duration from
//! first send to last end, its turns, its tool calls, the time it waited on tools or
//! thought), and TTFT by turn index, so a report shows whether TTFT grows with the
//! context a session carries. Only requests that name a session count here; a phase with
//! none has no session summary at all.
//!
//! Memory: one small aggregate per session for at most [`MAX_SESSIONS`] sessions, and one
//! histogram per turn index for at most [`MAX_TURNS`] indices; requests past either cap
//! are counted, not kept, so a scenario that opens sessions without end cannot grow
//! memory without bound. Sessions are whole within a shard, so shards' aggregates merge
//! by union and the merge is exact below the caps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;
use super::stat::{Distribution, StreamingStat};

mod mergeable;
pub use mergeable::{SessionTurnState, SessionsState};

/// Sessions with their own aggregate; requests of later sessions are counted apart.
pub const MAX_SESSIONS: usize = 65_536;
/// Turn indices with their own TTFT row; requests at later turns are counted apart.
pub const MAX_TURNS: u32 = 1024;
/// The percentiles of the session figures (duration, TTFT by turn, time to first tool call).
pub const SESSION_PERCENTILES: [f64; 2] = [50.0, 99.0];

/// One session's requests added up. Also the element of the merge state: two shards'
/// aggregates of one id add (which a run that keeps sessions whole never needs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionTotals {
    pub session: String,
    /// Its first send and its last end, ns from the phase start.
    pub first_sent_ns: u64,
    pub last_end_ns: u64,
    /// Requests it sent (its turns), and of those the failed ones.
    pub requests: u64,
    #[serde(default)]
    pub failed: u64,
    /// Tool calls its answers made.
    #[serde(default)]
    pub tool_calls: u64,
    /// Waits it asked for before its requests: for tool results, and otherwise (think
    /// time), ns.
    #[serde(default)]
    pub tool_wait_ns: u64,
    #[serde(default)]
    pub think_ns: u64,
    /// Prompt tokens of its requests whose server said how many were cached, and of those
    /// the cached ones.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_reported_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_reported_requests: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SessionTotals {
    fn new(session: &str, r: &RequestRecord) -> SessionTotals {
        SessionTotals {
            session: session.to_string(),
            first_sent_ns: r.sent_ns,
            last_end_ns: r.end_ns,
            ..SessionTotals::default()
        }
    }

    fn record(&mut self, r: &RequestRecord) {
        self.first_sent_ns = self.first_sent_ns.min(r.sent_ns);
        self.last_end_ns = self.last_end_ns.max(r.end_ns);
        self.requests += 1;
        self.failed += u64::from(r.error.is_some());
        self.tool_calls += u64::from(r.answer.tool_calls);
        let wait = r.session.wait_ns.unwrap_or(0);
        if r.session.tool_wait {
            self.tool_wait_ns = self.tool_wait_ns.saturating_add(wait);
        } else {
            self.think_ns = self.think_ns.saturating_add(wait);
        }
        if let Some(cached) = cached_prompt_tokens(r) {
            self.cache_reported_requests += 1;
            self.cache_reported_input_tokens = self
                .cache_reported_input_tokens
                .saturating_add(r.input_tokens);
            self.cached_prompt_tokens = self
                .cached_prompt_tokens
                .saturating_add(cached.min(r.input_tokens));
        }
    }

    /// Another part of the same session (only a merge of shards that split one).
    fn add(&mut self, o: &SessionTotals) {
        self.first_sent_ns = self.first_sent_ns.min(o.first_sent_ns);
        self.last_end_ns = self.last_end_ns.max(o.last_end_ns);
        for (a, b) in [
            (&mut self.requests, o.requests),
            (&mut self.failed, o.failed),
            (&mut self.tool_calls, o.tool_calls),
            (&mut self.tool_wait_ns, o.tool_wait_ns),
            (&mut self.think_ns, o.think_ns),
            (
                &mut self.cache_reported_input_tokens,
                o.cache_reported_input_tokens,
            ),
            (&mut self.cached_prompt_tokens, o.cached_prompt_tokens),
            (&mut self.cache_reported_requests, o.cache_reported_requests),
        ] {
            *a = a.saturating_add(b);
        }
    }

    /// A child session's id holds its parent's before a `/` (`7/review-2`).
    pub fn is_child(&self) -> bool {
        self.session.contains('/')
    }

    fn duration_ns(&self) -> u64 {
        self.last_end_ns.saturating_sub(self.first_sent_ns)
    }

    /// Its cached share of the prompt tokens whose cache the server reported.
    fn cache_hit_share(&self) -> Option<f64> {
        (self.cache_reported_input_tokens > 0)
            .then(|| self.cached_prompt_tokens as f64 / self.cache_reported_input_tokens as f64)
    }
}

/// How many of a request's prompt tokens the server said it served from its prefix
/// cache (its usage's cached tokens); `None` where the server did not say, so a server
/// that never reports them gives no hit share rather than a share of 0.
fn cached_prompt_tokens(r: &RequestRecord) -> Option<u64> {
    r.answer.cached_prompt_tokens
}

/// The requests at one turn index.
#[derive(Clone, Debug)]
struct TurnStats {
    requests: u64,
    /// Successful ones, whose prompt tokens `input_tokens` adds.
    completed: u64,
    input_tokens: u64,
    /// TTFT of the successful and the cancelled ones, as the phase's TTFT counts them.
    ttft: StreamingStat,
}

impl TurnStats {
    fn new() -> TurnStats {
        TurnStats {
            requests: 0,
            completed: 0,
            input_tokens: 0,
            ttft: StreamingStat::new(),
        }
    }

    fn record(&mut self, r: &RequestRecord) {
        self.requests += 1;
        if r.error.is_some() {
            return;
        }
        if let Some(t) = r.ttft_ns() {
            self.ttft.record(t as f64);
        }
        if r.succeeded() {
            self.completed += 1;
            self.input_tokens = self.input_tokens.saturating_add(r.input_tokens);
        }
    }
}

/// The tool calls of the sessions' answers.
#[derive(Clone, Debug)]
struct ToolStats {
    /// Answers with at least one tool call, the calls and their tokens.
    requests: u64,
    calls: u64,
    tokens: u64,
    /// From send to the first chunk of a tool call, of the successful answers with one.
    first_call: StreamingStat,
}

impl ToolStats {
    fn new() -> ToolStats {
        ToolStats {
            requests: 0,
            calls: 0,
            tokens: 0,
            first_call: StreamingStat::new(),
        }
    }

    fn record(&mut self, r: &RequestRecord) {
        let a = &r.answer;
        self.requests += u64::from(a.tool_calls > 0);
        self.calls += u64::from(a.tool_calls);
        self.tokens = self.tokens.saturating_add(a.tool_call_tokens);
        if let (true, Some(t)) = (r.succeeded(), a.first_tool_call_ns) {
            self.first_call.record(t.saturating_sub(r.sent_ns) as f64);
        }
    }
}

/// The session statistics of one phase, as they accumulate.
#[derive(Clone, Debug)]
pub(crate) struct SessionStats {
    /// Requests that named a session, kept or not.
    requests: u64,
    sessions: BTreeMap<String, SessionTotals>,
    turns: BTreeMap<u32, TurnStats>,
    tools: ToolStats,
    /// Sessions past [`MAX_SESSIONS`] (counted at their turn 0) and their requests.
    overflow_sessions: u64,
    overflow_requests: u64,
    /// Requests at a turn index of [`MAX_TURNS`] or more.
    overflow_turn_requests: u64,
}

impl Default for SessionStats {
    fn default() -> SessionStats {
        SessionStats {
            requests: 0,
            sessions: BTreeMap::new(),
            turns: BTreeMap::new(),
            tools: ToolStats::new(),
            overflow_sessions: 0,
            overflow_requests: 0,
            overflow_turn_requests: 0,
        }
    }
}

impl SessionStats {
    /// Adds a finished request; one that names no session is not counted here.
    pub(crate) fn record(&mut self, r: &RequestRecord) {
        let Some(id) = &r.session.session else {
            return;
        };
        self.requests += 1;
        self.tools.record(r);
        match r.session.turn {
            Some(turn) if turn < MAX_TURNS => {
                self.turns
                    .entry(turn)
                    .or_insert_with(TurnStats::new)
                    .record(r);
            }
            Some(_) => self.overflow_turn_requests += 1,
            None => {}
        }
        if let Some(totals) = self.sessions.get_mut(id) {
            totals.record(r);
        } else if self.sessions.len() < MAX_SESSIONS {
            let mut totals = SessionTotals::new(id, r);
            totals.record(r);
            self.sessions.insert(id.clone(), totals);
        } else {
            self.overflow_requests += 1;
            self.overflow_sessions += u64::from(r.session.turn == Some(0));
        }
    }

    /// The phase's session summary; `None` when no request named a session.
    pub(crate) fn summarize(&self) -> Option<SessionsSummary> {
        if self.requests == 0 {
            return None;
        }
        let all: Vec<&SessionTotals> = self.sessions.values().collect();
        let children = all.iter().filter(|s| s.is_child()).count() as u64;
        let per = |f: fn(&SessionTotals) -> u64| PerSession::of(all.iter().map(|s| f(s)));
        let mut duration = StreamingStat::new();
        for s in &all {
            duration.record(s.duration_ns() as f64);
        }
        let shares: Vec<f64> = all.iter().filter_map(|s| s.cache_hit_share()).collect();
        Some(SessionsSummary {
            sessions: all.len() as u64,
            root_sessions: all.len() as u64 - children,
            child_sessions: children,
            requests: self.requests,
            failed: all.iter().fold(0u64, |t, s| t.saturating_add(s.failed)),
            duration: duration.distribution(&SESSION_PERCENTILES),
            requests_per_session: per(|s| s.requests),
            tool_calls_per_session: per(|s| s.tool_calls),
            tool_wait_ms: per(|s| s.tool_wait_ns).in_ms(),
            think_ms: per(|s| s.think_ns).in_ms(),
            tool_call_requests: self.tools.requests,
            tool_calls: self.tools.calls,
            tool_call_tokens: self.tools.tokens,
            time_to_first_tool_call: self.tools.first_call.distribution(&SESSION_PERCENTILES),
            cache_sessions: shares.len() as u64,
            mean_cache_hit_share: (!shares.is_empty())
                .then(|| shares.iter().sum::<f64>() / shares.len() as f64),
            turns: self.turn_summaries(),
            overflow_sessions: self.overflow_sessions,
            overflow_requests: self.overflow_requests,
            overflow_turn_requests: self.overflow_turn_requests,
        })
    }

    fn turn_summaries(&self) -> Vec<TurnTtft> {
        self.turns
            .iter()
            .map(|(&turn, t)| TurnTtft {
                turn,
                requests: t.requests,
                completed: t.completed,
                ttft: t.ttft.distribution(&SESSION_PERCENTILES),
                mean_input_tokens: if t.completed == 0 {
                    0.0
                } else {
                    t.input_tokens as f64 / t.completed as f64
                },
            })
            .collect()
    }
}

/// A figure over the kept sessions: its total, its mean per session and its largest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerSession {
    pub total: f64,
    pub mean: f64,
    pub max: f64,
}

impl PerSession {
    fn of(values: impl Iterator<Item = u64>) -> PerSession {
        let (mut total, mut n, mut max) = (0u64, 0u64, 0u64);
        for v in values {
            total = total.saturating_add(v);
            n += 1;
            max = max.max(v);
        }
        PerSession {
            total: total as f64,
            mean: if n == 0 { 0.0 } else { total as f64 / n as f64 },
            max: max as f64,
        }
    }

    /// Nanoseconds read as milliseconds.
    fn in_ms(self) -> PerSession {
        PerSession {
            total: self.total / 1e6,
            mean: self.mean / 1e6,
            max: self.max / 1e6,
        }
    }
}

/// TTFT at one turn index (the requests a session sent before).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnTtft {
    pub turn: u32,
    /// Requests sent at this turn, and the successful ones.
    pub requests: u64,
    pub completed: u64,
    /// ms, at [`SESSION_PERCENTILES`].
    pub ttft: Distribution,
    /// Prompt tokens of the successful requests, mean: how much context the turn carried.
    pub mean_input_tokens: f64,
}

/// A phase's sessions, reported. Latencies in ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionsSummary {
    /// Sessions with their own figures: roots, and children (an id with a `/`).
    pub sessions: u64,
    pub root_sessions: u64,
    pub child_sessions: u64,
    /// Requests that named a session (past the caps too), and the failed ones of the
    /// kept sessions.
    pub requests: u64,
    pub failed: u64,
    /// Each session's first send to its last end, ms.
    pub duration: Distribution,
    /// Requests (turns) and tool calls per session.
    pub requests_per_session: PerSession,
    pub tool_calls_per_session: PerSession,
    /// Waits the sessions asked for before a request, ms: for tool results, and otherwise
    /// (think time).
    pub tool_wait_ms: PerSession,
    pub think_ms: PerSession,
    /// Of all session requests: answers with a tool call, the calls and their tokens.
    pub tool_call_requests: u64,
    pub tool_calls: u64,
    pub tool_call_tokens: u64,
    /// From send to the first chunk of a tool call, ms.
    pub time_to_first_tool_call: Distribution,
    /// Sessions whose server reported cached prompt tokens, and the mean over them of each
    /// one's cached share of its prompt tokens.
    pub cache_sessions: u64,
    pub mean_cache_hit_share: Option<f64>,
    /// TTFT by turn index, ascending.
    pub turns: Vec<TurnTtft>,
    /// Sessions past [`MAX_SESSIONS`] and their requests, left out of the per-session
    /// figures; requests at turn [`MAX_TURNS`] or later, left out of `turns`.
    pub overflow_sessions: u64,
    pub overflow_requests: u64,
    pub overflow_turn_requests: u64,
}

#[cfg(test)]
pub(crate) mod tests;
