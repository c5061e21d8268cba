//! Session statistics as a serialisable state, and their merge across shards: sessions by
//! union (each shard holds whole sessions), turn indices histogram by histogram, tool
//! counts added. A session past [`MAX_SESSIONS`] joins the overflow, as it would in one
//! process.

use serde::{Deserialize, Serialize};

use super::super::stat::{add_count, in_field, StatState, StatStateError, StreamingStat};
use super::{SessionStats, SessionTotals, ToolStats, TurnStats, MAX_SESSIONS, MAX_TURNS};

/// One turn index's requests, for merging.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionTurnState {
    pub turn: u32,
    pub requests: u64,
    pub completed: u64,
    pub input_tokens: u64,
    pub ttft: StatState,
}

/// A phase's session statistics, for merging; empty (and left out of shard.json) when no
/// request named a session, so a shard written before sessions reads as none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionsState {
    #[serde(default)]
    pub requests: u64,
    /// Sorted by id.
    #[serde(default)]
    pub sessions: Vec<SessionTotals>,
    /// Ascending.
    #[serde(default)]
    pub turns: Vec<SessionTurnState>,
    #[serde(default)]
    pub tool_call_requests: u64,
    #[serde(default)]
    pub tool_calls: u64,
    #[serde(default)]
    pub tool_call_tokens: u64,
    #[serde(default)]
    pub first_tool_call: Option<StatState>,
    #[serde(default)]
    pub overflow_sessions: u64,
    #[serde(default)]
    pub overflow_requests: u64,
    #[serde(default)]
    pub overflow_turn_requests: u64,
}

impl SessionsState {
    pub fn is_empty(&self) -> bool {
        self.requests == 0
    }
}

impl SessionStats {
    pub(crate) fn state(&self) -> SessionsState {
        if self.requests == 0 {
            return SessionsState::default();
        }
        SessionsState {
            requests: self.requests,
            sessions: self.sessions.values().cloned().collect(),
            turns: self
                .turns
                .iter()
                .map(|(&turn, t)| SessionTurnState {
                    turn,
                    requests: t.requests,
                    completed: t.completed,
                    input_tokens: t.input_tokens,
                    ttft: t.ttft.state(),
                })
                .collect(),
            tool_call_requests: self.tools.requests,
            tool_calls: self.tools.calls,
            tool_call_tokens: self.tools.tokens,
            first_tool_call: Some(self.tools.first_call.state()),
            overflow_sessions: self.overflow_sessions,
            overflow_requests: self.overflow_requests,
            overflow_turn_requests: self.overflow_turn_requests,
        }
    }

    /// The statistics a state was taken from. A state holding more sessions or turn
    /// indices than one process keeps is refused: no run could have written it.
    pub(crate) fn from_state(s: &SessionsState) -> Result<SessionStats, StatStateError> {
        let too_many = |what: &str, n: usize, cap: usize| {
            StatStateError::Inconsistent(format!(
                "`sessions.{what}` holds {n}, more than the {cap} one run keeps"
            ))
        };
        if s.sessions.len() > MAX_SESSIONS {
            return Err(too_many("sessions", s.sessions.len(), MAX_SESSIONS));
        }
        if s.turns.len() > MAX_TURNS as usize {
            return Err(too_many("turns", s.turns.len(), MAX_TURNS as usize));
        }
        let mut stats = SessionStats {
            requests: s.requests,
            sessions: s
                .sessions
                .iter()
                .map(|t| (t.session.clone(), t.clone()))
                .collect(),
            tools: ToolStats {
                requests: s.tool_call_requests,
                calls: s.tool_calls,
                tokens: s.tool_call_tokens,
                first_call: match &s.first_tool_call {
                    Some(st) => {
                        StreamingStat::from_state(st).map_err(in_field("first_tool_call"))?
                    }
                    None => StreamingStat::new(),
                },
            },
            overflow_sessions: s.overflow_sessions,
            overflow_requests: s.overflow_requests,
            overflow_turn_requests: s.overflow_turn_requests,
            ..SessionStats::default()
        };
        for t in &s.turns {
            let ttft = StreamingStat::from_state(&t.ttft)
                .map_err(in_field("ttft"))
                .map_err(in_field(&format!("turns.{}", t.turn)))?;
            let turn = TurnStats {
                requests: t.requests,
                completed: t.completed,
                input_tokens: t.input_tokens,
                ttft,
            };
            stats.turns.insert(t.turn, turn);
        }
        Ok(stats)
    }

    /// Adds another shard's sessions: counts add checked, token totals saturate.
    pub(crate) fn merge(&mut self, o: &SessionStats) -> Result<(), StatStateError> {
        for (field, a, b) in [
            ("requests", &mut self.requests, o.requests),
            (
                "tool_call_requests",
                &mut self.tools.requests,
                o.tools.requests,
            ),
            ("tool_calls", &mut self.tools.calls, o.tools.calls),
            (
                "overflow_sessions",
                &mut self.overflow_sessions,
                o.overflow_sessions,
            ),
            (
                "overflow_requests",
                &mut self.overflow_requests,
                o.overflow_requests,
            ),
            (
                "overflow_turn_requests",
                &mut self.overflow_turn_requests,
                o.overflow_turn_requests,
            ),
        ] {
            add_count(field, a, b)?;
        }
        self.tools.tokens = self.tools.tokens.saturating_add(o.tools.tokens);
        self.tools
            .first_call
            .merge(&o.tools.first_call)
            .map_err(in_field("first_tool_call"))?;
        for (&turn, t) in &o.turns {
            let mine = self.turns.entry(turn).or_insert_with(TurnStats::new);
            let field = format!("turns.{turn}");
            add_count(&field, &mut mine.requests, t.requests)?;
            add_count(&field, &mut mine.completed, t.completed)?;
            mine.input_tokens = mine.input_tokens.saturating_add(t.input_tokens);
            mine.ttft.merge(&t.ttft).map_err(in_field(&field))?;
        }
        for (id, theirs) in &o.sessions {
            if let Some(mine) = self.sessions.get_mut(id) {
                mine.add(theirs);
            } else if self.sessions.len() < MAX_SESSIONS {
                self.sessions.insert(id.clone(), theirs.clone());
            } else {
                self.overflow_sessions += 1;
                self.overflow_requests = self.overflow_requests.saturating_add(theirs.requests);
            }
        }
        Ok(())
    }
}
