//! What the host offers to scenario code, whatever its language: a seeded random generator
//! and distributions, the run's tokenizer, reading files of the scenario's own directory,
//! and logging. Nothing else: no network, no other files, no clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, Normal};

use super::spec::NoteValue;
use crate::tokenizer::Tokenizer;

/// Upper bound on one data file a scenario may read, so a script cannot exhaust memory.
const MAX_READ_BYTES: u64 = 256 << 20;

pub struct HostContext {
    pub scenario: String,
    pub tokenizer: Arc<Tokenizer>,
    rng: ChaCha8Rng,
    /// Directories the scenario may read from; the first is its own directory.
    roots: Vec<PathBuf>,
    quiet: bool,
    /// Results reported with `note`, in the order first reported.
    notes: Vec<(String, NoteValue)>,
}

impl HostContext {
    pub fn new(tokenizer: Arc<Tokenizer>, roots: Vec<PathBuf>, quiet: bool) -> HostContext {
        let roots = roots
            .into_iter()
            .filter_map(|r| r.canonicalize().ok())
            .collect();
        HostContext {
            scenario: String::new(),
            tokenizer,
            rng: ChaCha8Rng::seed_from_u64(0),
            roots,
            quiet,
            notes: Vec::new(),
        }
    }

    /// The scenario's own directory, the first place it may read from.
    pub fn package_dir(&self) -> Option<&Path> {
        self.roots.first().map(PathBuf::as_path)
    }

    /// Restarts the random stream; the same seed gives the same stream on every run.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
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

    pub fn synthetic_text(&mut self, tokens: i64) -> Result<String, String> {
        let n = usize::try_from(tokens)
            .map_err(|_| format!("synthetic_text({tokens}): need a count >= 0"))?;
        Ok(self.tokenizer.synthetic_text(n, &mut self.rng))
    }

    pub fn random_token_text(&mut self, tokens: i64) -> Result<String, String> {
        let n = usize::try_from(tokens)
            .map_err(|_| format!("random_token_text({tokens}): need a count >= 0"))?;
        Ok(self.tokenizer.random_token_text(n, &mut self.rng))
    }

    /// Reads a file under one of the allowed roots. Relative paths resolve against the
    /// scenario's own directory; anything resolving outside every root is refused.
    pub fn read_file(&self, path: &str) -> Result<String, String> {
        let Some(base) = self.roots.first() else {
            return Err("this scenario may not read files".into());
        };
        let wanted = Path::new(path);
        let joined = if wanted.is_absolute() {
            wanted.to_path_buf()
        } else {
            base.join(wanted)
        };
        let real = joined
            .canonicalize()
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if !self.roots.iter().any(|r| real.starts_with(r)) {
            return Err(format!(
                "`{path}` is outside the scenario's directory ({}); pass --data-dir DIR to allow reading another directory",
                base.display()
            ));
        }
        let len = std::fs::metadata(&real)
            .map_err(|e| format!("cannot read `{path}`: {e}"))?
            .len();
        if len > MAX_READ_BYTES {
            return Err(format!(
                "`{path}` is {len} bytes, over the {MAX_READ_BYTES}-byte limit for scenario data"
            ));
        }
        std::fs::read_to_string(&real).map_err(|e| format!("cannot read `{path}`: {e}"))
    }

    /// Records a result for the report; a key reported again keeps its place and takes
    /// the new value (a search refines its answer phase by phase).
    pub fn note(&mut self, key: &str, value: NoteValue) -> Result<(), String> {
        if key.trim().is_empty() {
            return Err("note: the key is empty".into());
        }
        match self.notes.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.notes.push((key.to_string(), value)),
        }
        Ok(())
    }

    pub fn notes(&self) -> &[(String, NoteValue)] {
        &self.notes
    }

    pub fn log(&self, message: &str) {
        if !self.quiet {
            eprintln!("[{}] {message}", self.scenario);
        }
    }
}
