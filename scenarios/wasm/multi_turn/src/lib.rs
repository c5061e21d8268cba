//! The SDK twin of `scenarios/multi_turn.rhai`: `conversations` chat conversations of
//! `turns` turns in a closed loop of `conversations` slots, one turn of each in flight.
//! Every turn's messages carry the earlier questions and the server's own answers (from
//! `on_response`), then a new question. Turns are tagged `turn-N`, each request carries its
//! conversation's number as `session`, and a failed turn ends its conversation.
//!
//! Think time: each conversation keeps its own virtual clock and sends its next turn at an
//! absolute `at` = the previous turn's send time + its end-to-end latency + `think_time`
//! (see the Rhai original for why `delay` would not do). The random draws (system prompts,
//! then one question per turn) happen in the same order as in the Rhai script, so the same
//! seed and parameters give the same request stream.

use bench_scenario_sdk::prelude::*;

struct Conversation {
    messages: Vec<Message>,
    turns: u64,
    busy: bool,
    done: bool,
    /// When the next turn may leave, seconds from the phase start; `None` = at once.
    at: Option<f64>,
    /// The send time the last turn was scheduled for.
    sent: f64,
}

struct MultiTurn {
    conversations: Vec<Conversation>,
    turns: u64,
    input_tokens: u32,
    output_tokens: u64,
    think_time: f64,
}

impl Scenario for MultiTurn {
    fn describe() -> Description {
        Description::new(
            "multi_turn",
            "Conversations of several turns; each turn carries the earlier turns and answers (closed loop of conversations).",
        )
        .param("conversations", 32, "conversations in flight at once (the closed loop's concurrency)")
        .param("turns", 5, "user turns per conversation")
        .param("input_tokens", 256, "tokens of each new user turn")
        .param("system_tokens", 0, "tokens of a system prompt per conversation (0 = none)")
        .param("output_tokens", 128, "tokens generated per answer (ignore_eos)")
        .param("think_time", 1.0, "seconds between an answer and the next turn of its conversation (0 = at once)")
        .param("seed", 42, "random seed of the texts")
    }

    const ON_RESPONSE: bool = true;

    fn new() -> Result<Self, String> {
        Ok(MultiTurn {
            conversations: Vec::new(),
            turns: param_u64("turns")?,
            input_tokens: param_u32("input_tokens")?,
            output_tokens: param_u64("output_tokens")?,
            think_time: param_f64("think_time")?,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        let n = param_i64("conversations")?;
        if n < 1 {
            return Err("conversations must be at least 1".into());
        }
        if self.turns < 1 {
            return Err("turns must be at least 1".into());
        }
        if self.think_time < 0.0 {
            return Err("think_time must be >= 0".into());
        }
        let system_tokens = param_u32("system_tokens")?;
        self.conversations = (0..n)
            .map(|_| {
                let mut messages = Vec::new();
                if system_tokens > 0 {
                    messages.push(Message::system(synthetic_text(system_tokens)));
                }
                Conversation {
                    messages,
                    turns: 0,
                    busy: false,
                    done: false,
                    at: None,
                    sent: 0.0,
                }
            })
            .collect();
        // Every conversation ends after `turns` turns; the bound says so to the runner too.
        Ok(vec![Phase::new("multi turn")
            .closed(n as u64)
            .max_requests(n as u64 * self.turns)])
    }

    fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
        let mut busy = false;
        for (i, c) in self.conversations.iter_mut().enumerate() {
            if c.done {
                continue;
            }
            if c.busy {
                busy = true;
                continue;
            }
            c.busy = true;
            c.turns += 1;
            c.messages
                .push(Message::user(synthetic_text(self.input_tokens)));
            let mut request = Request::chat(c.messages.clone())
                .max_tokens(self.output_tokens)
                .ignore_eos()
                .session(i.to_string())
                .tag(format!("turn-{}", c.turns));
            if let Some(at) = c.at {
                request = request.at(at);
            }
            // The send time this turn is scheduled for; the first turns leave at the start.
            c.sent = c.at.unwrap_or(0.0);
            return Ok(request.into());
        }
        Ok(if busy { Next::Wait } else { Next::Done })
    }

    fn on_response(&mut self, outcome: Outcome) -> Result<(), String> {
        let i: usize = outcome
            .session
            .as_deref()
            .and_then(|s| s.parse().ok())
            .ok_or("a response without its conversation")?;
        let (turns, think) = (self.turns, self.think_time);
        let c = self
            .conversations
            .get_mut(i)
            .ok_or("a response of an unknown conversation")?;
        c.busy = false;
        if !outcome.ok {
            c.done = true;
        } else {
            c.messages.push(Message::assistant(outcome.text));
            if c.turns >= turns {
                c.done = true;
            }
            c.at = if think > 0.0 {
                Some(c.sent + outcome.e2el_ms / 1000.0 + think)
            } else {
                None
            };
        }
        Ok(())
    }
}

export_scenario!(MultiTurn);
