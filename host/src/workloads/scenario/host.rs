//! What the host offers to scenario code, whatever its language: a seeded random generator
//! and distributions, the run's tokenizer, reading files of the scenario's own directory,
//! and logging. Nothing else: no network, no other files, no clock.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, Normal};

use super::budget::{self, LogBudget, NoteBudget, OverBudget};
use super::files::FileAccess;
use super::spec::{NoteValue, SessionState};
use crate::workloads::tokenizer::Tokenizer;

pub struct HostContext {
    pub scenario: String,
    pub tokenizer: Arc<Tokenizer>,
    rng: ChaCha8Rng,
    /// The run's seed, from which each session's own stream is derived.
    seed: u64,
    /// The run's stream, kept aside while a session's step draws from its own.
    run_rng: Option<ChaCha8Rng>,
    /// The files the scenario may read.
    files: FileAccess,
    quiet: bool,
    /// Results reported with `note`, in the order first reported.
    notes: Vec<(String, NoteValue)>,
    log_budget: LogBudget,
    note_budget: NoteBudget,
}

impl HostContext {
    pub fn new(tokenizer: Arc<Tokenizer>, files: FileAccess, quiet: bool) -> HostContext {
        HostContext {
            scenario: String::new(),
            tokenizer,
            rng: ChaCha8Rng::seed_from_u64(0),
            seed: 0,
            run_rng: None,
            files,
            quiet,
            notes: Vec::new(),
            log_budget: LogBudget::default(),
            note_budget: NoteBudget::default(),
        }
    }

    /// The directory a Wasm guest gets mounted read-only, and where.
    pub fn mount(&self) -> Option<(&Path, &str)> {
        self.files.mount()
    }

    /// Refuses a mounted directory a guest could block in or read `/proc` through.
    pub fn check_mount(&self) -> Result<(), super::files::AccessError> {
        self.files.check_mount()
    }

    /// Restarts the random stream; the same seed gives the same stream on every run.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self.seed = seed;
        self.run_rng = None;
    }

    /// Until [`leave_session`](Self::leave_session), the random functions draw from the
    /// stream of this step of this session: seeded by the run's seed, the phase, the
    /// session's id and the step, so a session's draws are the same whichever sessions
    /// ran before it, on one machine or in any shard.
    pub fn enter_session(&mut self, state: &SessionState) {
        let seed = state.stream_seed(self.seed);
        let session = ChaCha8Rng::seed_from_u64(seed);
        let run = std::mem::replace(&mut self.rng, session);
        // Entered twice (a call that failed before leaving): the run's stream stays kept.
        self.run_rng.get_or_insert(run);
    }

    /// Back to the run's own stream, where it was before the session's step.
    pub fn leave_session(&mut self) {
        if let Some(run) = self.run_rng.take() {
            self.rng = run;
        }
    }

    pub fn rng(&mut self) -> &mut dyn RngCore {
        &mut self.rng
    }

    /// Uniform in [0, 1).
    pub fn random(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    /// Uniform integer in [lo, hi].
    pub fn rand_int(&mut self, lo: i64, hi: i64) -> Result<i64, String> {
        if lo > hi {
            return Err(format!("rand_int({lo}, {hi}): lo must not exceed hi"));
        }
        Ok(self.rng.random_range(lo..=hi))
    }

    pub fn uniform(&mut self, lo: f64, hi: f64) -> Result<f64, String> {
        if !lo.is_finite() || !hi.is_finite() || lo > hi {
            return Err(format!("uniform({lo}, {hi}): need finite lo <= hi"));
        }
        Ok(lo + (hi - lo) * self.random())
    }

    pub fn normal(&mut self, mean: f64, std: f64) -> Result<f64, String> {
        let d = Normal::new(mean, std).map_err(|e| format!("normal({mean}, {std}): {e}"))?;
        Ok(d.sample(&mut self.rng))
    }

    pub fn exponential(&mut self, rate: f64) -> Result<f64, String> {
        let d = Exp::new(rate).map_err(|e| format!("exponential({rate}): {e}"))?;
        Ok(d.sample(&mut self.rng))
    }

    pub fn gamma(&mut self, shape: f64, scale: f64) -> Result<f64, String> {
        let d = Gamma::new(shape, scale).map_err(|e| format!("gamma({shape}, {scale}): {e}"))?;
        Ok(d.sample(&mut self.rng))
    }

    /// Text of exactly `n` tokens; refused past [`budget::MAX_TOKENS_PER_CALL`] before
    /// anything is allocated.
    pub fn synthetic_text(&mut self, n: u64) -> Result<String, OverBudget> {
        budget::check_tokens("synthetic_text", n, n)?;
        Ok(self.tokenizer.synthetic_text(n as usize, &mut self.rng))
    }

    pub fn random_token_text(&mut self, n: u64) -> Result<String, OverBudget> {
        budget::check_random_tokens(n)?;
        Ok(self.tokenizer.random_token_text(n as usize, &mut self.rng))
    }

    pub fn count_tokens(&self, text: &str) -> Result<usize, OverBudget> {
        budget::check_text("count_tokens", &text_summary(text), text.len() as u64)?;
        Ok(self.tokenizer.count(text))
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, OverBudget> {
        budget::check_text("encode", &text_summary(text), text.len() as u64)?;
        Ok(self.tokenizer.encode(text))
    }

    /// Text of `ids`; the size of the text is bounded from the ids before decoding.
    pub fn decode(&self, ids: &[u32]) -> Result<String, HostError> {
        let argument = format!("<{} ids>", ids.len());
        budget::check_tokens("decode", &argument, ids.len() as u64)?;
        let bytes = self.tokenizer.decoded_len_bound(ids);
        budget::check_text("decode", &argument, bytes)?;
        self.tokenizer
            .decode(ids)
            .map_err(|e| HostError::Failed(e.to_string()))
    }

    /// Reads a file the scenario may read (see [`FileAccess`]).
    pub fn read_file(&self, path: &str) -> Result<String, String> {
        self.files.read(path)
    }

    /// Records a result for the report; a key reported again keeps its place and takes
    /// the new value (a search refines its answer phase by phase). Key and text are
    /// redacted here, where they enter: a scenario may note what a server echoed.
    pub fn note(&mut self, key: &str, value: NoteValue) -> Result<(), String> {
        if key.trim().is_empty() {
            return Err("note: the key is empty".into());
        }
        let key = &*crate::safeguards::redact::text(key);
        let value = match value {
            NoteValue::Text(t) => NoteValue::Text(crate::safeguards::redact::string(t)),
            other => other,
        };
        let size = |key: &str, value: &NoteValue| match value {
            NoteValue::Text(t) => key.len() + t.len(),
            _ => key.len() + 8,
        };
        let kept = self.notes.iter().position(|(k, _)| k == key);
        let replaced = kept.map(|i| size(key, &self.notes[i].1));
        let count = self.notes.len();
        self.note_budget
            .admit(key, size(key, &value), replaced, count)?;
        match kept {
            Some(i) => self.notes[i].1 = value,
            None => self.notes.push((key.to_string(), value)),
        }
        Ok(())
    }

    pub fn notes(&self) -> &[(String, NoteValue)] {
        &self.notes
    }

    /// A line on stderr, cut to the log budget (see [`LogBudget`]) after it is redacted (a
    /// scenario may log what a server echoed) and escaped: every control character, line
    /// breaks and tabs included, so a server's text logged by a scenario stays on the
    /// scenario's own line and cannot print a line of its own.
    pub fn log(&mut self, message: &str) {
        if self.quiet {
            return;
        }
        let message = crate::safeguards::redact::text(message);
        if let Some(line) = self
            .log_budget
            .admit(&crate::safeguards::display::escape_control(&message))
        {
            // Never a panic on a closed stderr (see `console`).
            crate::errln!("[{}] {line}", self.scenario);
        }
    }
}

/// Why a host function failed: over its budget (the scenario cannot go on), or a
/// refusal the scenario may handle (an unknown token id).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
    #[error("{0}")]
    Failed(String),
}

/// How a text argument appears in an error: by its size, never its content.
fn text_summary(text: &str) -> String {
    format!("<text of {} bytes>", text.len())
}
