//! The text report's "Sessions" block, after a phase's extras: the per-session figures in
//! the 40/10 rows of the rest, then TTFT by turn index as an aligned table.

use std::fmt::Write as _;

use super::super::sessions::{overflow_notes, session_rows, turn_columns};
use super::super::table::aligned_table;
use super::format::{footer, row, section};
use crate::measuring::metrics::SessionsSummary;

/// The block of a phase whose requests named a session.
pub(super) fn render_sessions(s: &SessionsSummary) -> String {
    let mut out = String::new();
    section(&mut out, " Sessions ");
    for (label, value) in session_rows(s) {
        row(&mut out, &label, value);
    }
    if !s.turns.is_empty() {
        section(&mut out, "TTFT by Turn Index");
        out += &aligned_table(s.turns.iter().map(turn_columns).collect());
    }
    for note in overflow_notes(s) {
        let _ = writeln!(out, "NOTE: {note}");
    }
    footer(&mut out, '=');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sessions of three turns (see `metrics::sessions`'s tests), in the layout of
    /// the rest of the extras (trailing spaces preserved).
    const SESSIONS_BLOCK: &str = "\
-------------------- Sessions --------------------
Sessions:                                2         
Root sessions:                           1         
Child sessions:                          1         
Session requests:                        6         
Mean session duration (s):               0.82      
Median session duration (s):             0.82      
P99 session duration (s):                1.15      
Mean requests per session:               3.00      
Max requests per session:                3         
Tool calls:                              3         
Mean tool calls per session:             1.50      
Max tool calls per session:              3         
Answers with tool calls:                 2         
Tool-call tokens:                        21        
Mean time to first tool call (ms):       5.00      
P99 time to first tool call (ms):        5.00      
Total tool wait (s):                     0.40      
Mean tool wait per session (s):          0.20      
Total think time (s):                    1.00      
Mean think time per session (s):         0.50      
----------------TTFT by Turn Index----------------
turn  requests  mean TTFT ms  P50 TTFT ms  P99 TTFT ms  mean input tokens
0            2         20.00        20.00        29.80             100.00
1            2         30.00        30.00        39.80             250.00
2            2         40.00        40.00        49.80             400.00
==================================================
";

    #[test]
    fn sessions_block_golden() {
        let s = crate::measuring::metrics::sessions::tests::example();
        assert_eq!(render_sessions(&s), SESSIONS_BLOCK);
    }
}
