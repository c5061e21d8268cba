//! What makes a Bailian trace's chats replayable: the one rule `runner trace analyze` and
//! `scenarios/bailian_sessions.rhai` both apply, line by line in the file's order, so the
//! analyzer never calls a trace fine that the replay drops or stops on. The script spells
//! the same three checks in Rhai (a scenario cannot call this module), with the same words.
//!
//! - A chat id is given once: a second line of one id would replace the first's chat.
//! - A chat is not its own parent: the replay would hang it under itself, reachable from
//!   no root, and drop it.
//! - A chat opens at most [`MAX_CHILDREN`] child chats: the replay opens a chat's children
//!   in one fan-out step, and a fan-out opens at most `validate::MAX_FAN_OUT` sessions.
//!
//! A chat whose parent is not on an earlier line is a root, in both.

use std::collections::HashMap;

use super::formats::LineError;
use super::TraceChat;
use crate::workloads::scenario::validate::MAX_FAN_OUT;

/// Child chats one chat may open: one fan-out step's sessions.
pub const MAX_CHILDREN: usize = MAX_FAN_OUT;

/// A chat already read: its line, whether a later turn continues it, its children.
struct Seen {
    line: usize,
    continued: bool,
    children: usize,
}

/// The chats read so far, in the file's order.
#[derive(Default)]
pub(super) struct ChatRule {
    seen: HashMap<i64, Seen>,
}

impl ChatRule {
    /// Checks the chat on line `line` against the chats of the lines before it.
    pub(super) fn add(&mut self, line: usize, chat: &TraceChat) -> Result<(), LineError> {
        if let Some(first) = self.seen.get(&chat.id) {
            return Err(LineError::Field(
                "chat_id",
                format!(
                    "chat {} is given twice (first on line {}): each chat id must be unique",
                    chat.id, first.line
                ),
            ));
        }
        if chat.parent == chat.id {
            return Err(LineError::Field(
                "parent_chat_id",
                format!("chat {} is its own parent: give a root -1", chat.id),
            ));
        }
        if let Some(parent) = self.seen.get_mut(&chat.parent) {
            if chat.turn > 1 && !parent.continued {
                parent.continued = true;
            } else if parent.children == MAX_CHILDREN {
                return Err(LineError::Field(
                    "parent_chat_id",
                    format!(
                        "chat {} (line {}) would open more than {MAX_CHILDREN} child chats: a replay opens at most {MAX_CHILDREN} at once",
                        chat.parent, parent.line
                    ),
                ));
            } else {
                parent.children += 1;
            }
        }
        self.seen.insert(
            chat.id,
            Seen {
                line,
                continued: false,
                children: 0,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(id: i64, parent: i64, turn: u64) -> TraceChat {
        TraceChat { id, parent, turn }
    }

    fn refusal(rule: &mut ChatRule, line: usize, c: TraceChat) -> String {
        match rule.add(line, &c) {
            Err(LineError::Field(field, what)) => format!("{field}: {what}"),
            Err(LineError::Line(what)) => what,
            Ok(()) => "accepted".into(),
        }
    }

    #[test]
    fn a_chat_that_is_its_own_parent_or_given_twice_is_refused() {
        let mut rule = ChatRule::default();
        rule.add(1, &chat(1, -1, 1)).unwrap();
        assert_eq!(
            refusal(&mut rule, 2, chat(5, 5, 1)),
            "parent_chat_id: chat 5 is its own parent: give a root -1"
        );
        assert_eq!(
            refusal(&mut rule, 3, chat(1, -1, 1)),
            "chat_id: chat 1 is given twice (first on line 1): each chat id must be unique"
        );
    }

    #[test]
    fn a_chat_opens_at_most_one_fan_out_of_children() {
        let mut rule = ChatRule::default();
        rule.add(1, &chat(1, -1, 1)).unwrap();
        // The continuation is no child: 64 children and it fit.
        rule.add(2, &chat(2, 1, 2)).unwrap();
        for i in 0..MAX_CHILDREN as i64 {
            rule.add(3 + i as usize, &chat(100 + i, 1, 1)).unwrap();
        }
        assert_eq!(
            refusal(&mut rule, 67, chat(999, 1, 2)),
            "parent_chat_id: chat 1 (line 1) would open more than 64 child chats: a replay opens at most 64 at once"
        );
    }
}
