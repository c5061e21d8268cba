//! What keeps the process whole whatever comes in: the heap budget, bounded file reads,
//! the redaction of secrets, the escaping of text from sources the runner does not
//! control, and the signals that end a run.

pub mod bounded_file;
pub mod display;
pub mod interrupt;
pub mod memory_budget;
pub mod redact;
