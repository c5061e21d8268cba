//! Multi-turn chat: `conversations` conversations of `turns` turns each. Every turn sends
//! the whole conversation so far — the system prompt, each earlier question and the
//! answer the server actually gave (from `on_response`) — plus a new question, so the
//! prompt grows turn by turn as in a real chat and prefix caching can pay off. A
//! conversation has one turn in flight at a time: while all of them wait for answers,
//! `next_request` returns `Next::Wait`. Turns are tagged `turn-1`, `turn-2`, …

use bench_scenario_sdk::prelude::*;

struct Conversation {
    messages: Vec<Message>,
    turns_sent: u32,
    in_flight: bool,
}

struct ChatTurns {
    conversations: Vec<Conversation>,
    turns: u32,
    question_tokens: u32,
    output_tokens: u64,
    /// Round-robin start, so conversations take turns fairly.
    cursor: usize,
}

impl Scenario for ChatTurns {
    fn describe() -> Description {
        Description::new(
            "chat_turns",
            "Multi-turn chat: every turn carries the earlier questions and the server's own answers.",
        )
        .param("conversations", 8, "conversations, each with one turn in flight at a time")
        .param("turns", 4, "turns per conversation")
        .param("system_tokens", 256, "system prompt length, tokens (shared by all conversations)")
        .param("question_tokens", 64, "length of each user question, tokens")
        .param("output_tokens", 64, "tokens generated per turn")
        .param("seed", 7, "random seed of the texts")
    }

    const ON_RESPONSE: bool = true;

    fn new() -> Result<Self, String> {
        let system = synthetic_text(param_u32("system_tokens")?);
        let count = param_u64("conversations")?;
        if count == 0 {
            return Err("`conversations` must be at least 1".into());
        }
        let conversations = (0..count)
            .map(|_| Conversation {
                messages: vec![Message::system(system.clone())],
                turns_sent: 0,
                in_flight: false,
            })
            .collect();
        Ok(ChatTurns {
            conversations,
            turns: param_u32("turns")?,
            question_tokens: param_u32("question_tokens")?,
            output_tokens: param_u64("output_tokens")?,
            cursor: 0,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        let n = self.conversations.len() as u64;
        // Every conversation ends after `turns` turns; the bound says so to the runner too.
        Ok(vec![Phase::new("chat")
            .closed(n)
            .max_requests(n * u64::from(self.turns))])
    }

    fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
        let n = self.conversations.len();
        let ready = (0..n).map(|k| (self.cursor + k) % n).find(|&i| {
            let c = &self.conversations[i];
            !c.in_flight && c.turns_sent < self.turns
        });
        let Some(i) = ready else {
            let busy = self.conversations.iter().any(|c| c.in_flight);
            return Ok(if busy { Next::Wait } else { Next::Done });
        };
        self.cursor = (i + 1) % n;
        let question = synthetic_text(self.question_tokens);
        let c = &mut self.conversations[i];
        c.messages.push(Message::user(question));
        c.turns_sent += 1;
        c.in_flight = true;
        Ok(Request::chat(c.messages.clone())
            .max_tokens(self.output_tokens)
            .ignore_eos()
            .session(format!("conversation-{i}"))
            .tag(format!("turn-{}", c.turns_sent))
            .into())
    }

    fn on_response(&mut self, outcome: Outcome) -> Result<(), String> {
        let Some(i) = outcome
            .session
            .as_deref()
            .and_then(|s| s.strip_prefix("conversation-"))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            return Ok(());
        };
        let turns = self.turns;
        let Some(c) = self.conversations.get_mut(i) else {
            return Ok(());
        };
        c.in_flight = false;
        if outcome.ok {
            c.messages.push(Message::assistant(outcome.text));
        } else {
            // A failed turn ends its conversation: the next turn would have no answer.
            log(&format!(
                "conversation {i} ends after a failed turn: {}",
                outcome.error.unwrap_or_default()
            ));
            c.turns_sent = turns;
        }
        Ok(())
    }
}

export_scenario!(ChatTurns);
