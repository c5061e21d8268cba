//! Calls to the servers under test around a run's phases: prefix-cache resets and the
//! profiler.
//!
//! Their prefix cache is emptied before the run or before each phase
//! (`--reset-prefix-cache run|phase`, or a phase's `reset_prefix_cache: true`), their
//! profiler started just before a phase's clock and stopped once its last response is in
//! (`--profile-phase NAME`, or a phase's `profile: true`).
//!
//! A server that has no such route, or whose call fails, is one warning line naming it and
//! what it lacks, and the run goes on: a benchmark is still worth its numbers, and the
//! line says they were taken with a cache that was not emptied (or without a trace).
//!
//! No call holds the run long or silently: each is bounded (`engines`: 2 s for each
//! question that tells the engine, 5 s for each reset or start call, 30 s for a profiler
//! to stop, 15 s for one target's whole reset), one unanswered for a second is said on
//! stderr with its bound, and Ctrl-C ends the wait (a profiler's stop gets 3 s more).
//!
//! - `engines`: which engine a target runs, and each engine's routes.
//! - `http`: the bounded HTTP calls.

mod engines;
mod http;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, OnceCell};

use crate::workloads::scenario::PhaseSpec;
use engines::{Engine, Refusal};
use http::Http;

/// When `--reset-prefix-cache` empties the servers' prefix caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ResetWhen {
    /// Once, before the run's first phase.
    Run,
    /// Before every phase.
    Phase,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start the server control client: {0}")]
pub struct ControlError(String);

/// What a run asks of its servers, and the targets to ask.
#[derive(Default)]
pub struct ServerControl {
    targets: Vec<Target>,
    http: Option<Http>,
    reset: Option<ResetWhen>,
    /// `--profile-phase` names.
    profile: Vec<String>,
    /// Names of the phases run so far, in order, for the warning about a name none had.
    ran: Mutex<Vec<String>>,
    /// Lines already printed: each is printed once.
    said: Mutex<HashSet<String>>,
    /// Turns true on Ctrl-C: no call is waited for any more, but a profiler's stop, for
    /// [`STOP_AFTER_INTERRUPT`].
    interrupt: Option<watch::Receiver<bool>>,
}

/// How long an interrupted run still waits for the profilers it started to stop.
const STOP_AFTER_INTERRUPT: Duration = Duration::from_secs(3);
/// The longest one target's reset takes, every call of it together (llama.cpp's is one
/// call per slot, and the slots are the server's word).
const RESET_LIMIT: Duration = Duration::from_secs(15);

struct Target {
    /// The server's root: the target's URL without a trailing `/` or `/v1`.
    root: String,
    /// How the warnings name it (credentials hidden).
    label: String,
    engine: OnceCell<Engine>,
}

/// The targets whose profiler was started for the running phase.
#[derive(Debug, Default)]
#[must_use = "the profilers started must be stopped with ServerControl::stop_profile"]
pub struct Profiling {
    started: Vec<usize>,
    phase: String,
}

impl ServerControl {
    /// Control of `targets` (their base URLs), calling with `api_key` as a bearer token.
    pub fn new(
        targets: &[&str],
        api_key: Option<&str>,
        reset: Option<ResetWhen>,
        profile: Vec<String>,
    ) -> Result<ServerControl, ControlError> {
        let mut seen = HashSet::new();
        let targets = targets
            .iter()
            .map(|t| server_root(t).to_string())
            .filter(|root| seen.insert(root.clone()))
            .map(|root| Target {
                label: crate::safeguards::redact::string(root.clone()),
                root,
                engine: OnceCell::new(),
            })
            .collect();
        Ok(ServerControl {
            targets,
            http: Some(Http::new(api_key).map_err(ControlError)?),
            reset,
            profile,
            ..ServerControl::default()
        })
    }

    /// No call is waited for once `interrupt` turns true (the run then stops at once).
    pub fn stopped_by(mut self, interrupt: watch::Receiver<bool>) -> ServerControl {
        self.interrupt = Some(interrupt);
        self
    }

    /// `work`'s result, unless the run is interrupted first.
    async fn unless_interrupted<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let Some(mut interrupt) = self.interrupt.clone() else {
            return Some(work.await);
        };
        tokio::select! {
            biased;
            Ok(_) = interrupt.wait_for(|i| *i) => None,
            done = work => Some(done),
        }
    }

    /// Before phase `index` opens its connections: empties every target's prefix cache
    /// when the run or the phase asks for it.
    pub async fn before_phase(&self, index: usize, spec: &PhaseSpec) {
        lock(&self.ran).push(spec.name.clone());
        let asked = match self.reset {
            Some(ResetWhen::Run) => index == 0,
            Some(ResetWhen::Phase) => true,
            None => false,
        };
        if !(asked || spec.control.reset_prefix_cache) {
            return;
        }
        let resets = (0..self.targets.len()).map(|t| self.reset_one(t));
        self.unless_interrupted(futures_util::future::join_all(resets))
            .await;
    }

    async fn reset_one(&self, t: usize) {
        let Some((http, engine)) = self.engine_of(t).await else {
            return;
        };
        let target = &self.targets[t];
        let reset =
            tokio::time::timeout(RESET_LIMIT, engine.reset_prefix_cache(http, &target.root));
        let done = reset.await.unwrap_or_else(|_| {
            Err(Refusal::Failed(format!(
                "not done in {} s",
                RESET_LIMIT.as_secs()
            )))
        });
        match done {
            // Measured with llama.cpp's server (xllamacpp 2026.10): after an erase of all
            // its slots a prompt it had moved to host memory came back with all but one
            // of its tokens cached; with --cache-ram 0 with none.
            Ok(()) if engine == Engine::LlamaCpp => self.say_once(format!(
                "warning: {} is llama.cpp: its slots were erased, but not its host-memory prompt cache (--cache-ram, 8192 MiB by default), which no route empties; unless it runs with --cache-ram 0, earlier prompts can still be served from cache",
                target.label
            )),
            Ok(()) => {}
            Err(Refusal::Lacks(what)) => self.say_once(format!(
                "warning: {} {what}: its prefix cache is not reset",
                target.label
            )),
            Err(Refusal::Failed(why)) => self.say_once(format!(
                "warning: the prefix cache of {} was not reset: {why}",
                target.label
            )),
        }
    }

    /// Just before a phase's clock starts: starts every target's profiler when the phase
    /// is named by `--profile-phase` or asks for it.
    pub async fn start_profile(&self, spec: &PhaseSpec) -> Profiling {
        let mut profiling = Profiling {
            started: vec![],
            phase: spec.name.clone(),
        };
        if !(spec.control.profile || self.profile.contains(&spec.name)) {
            return profiling;
        }
        let starts = (0..self.targets.len()).map(|t| self.start_one(t, &spec.name));
        let starting = futures_util::future::join_all(starts);
        if let Some(started) = self.unless_interrupted(starting).await {
            profiling.started = (0..self.targets.len()).filter(|&t| started[t]).collect();
        }
        profiling
    }

    async fn start_one(&self, t: usize, phase: &str) -> bool {
        let Some((http, engine)) = self.engine_of(t).await else {
            return false;
        };
        let target = &self.targets[t];
        match engine.start_profile(http, &target.root).await {
            Ok(()) => true,
            Err(Refusal::Lacks(what)) => {
                self.say_once(format!(
                    "warning: {} {what}: its phases are not profiled",
                    target.label
                ));
                false
            }
            Err(Refusal::Failed(why)) => {
                self.say_once(format!(
                    "warning: the profiler of {} did not start for phase `{phase}`: {why}",
                    target.label
                ));
                false
            }
        }
    }

    /// Once the phase's last response is in: stops the profilers `profiling` started (an
    /// interrupted run gives them [`STOP_AFTER_INTERRUPT`]).
    pub async fn stop_profile(&self, profiling: Profiling) {
        let phase = &profiling.phase;
        let stops = profiling.started.iter().map(|&t| async move {
            let Some((http, engine)) = self.engine_of(t).await else {
                return;
            };
            let target = &self.targets[t];
            if let Err(e) = engine.stop_profile(http, &target.root).await {
                self.say_once(format!(
                    "warning: the profiler of {} did not stop after phase `{}`: {e}",
                    target.label, phase
                ));
            }
        });
        let stopping = futures_util::future::join_all(stops);
        let Some(mut interrupt) = self.interrupt.clone() else {
            stopping.await;
            return;
        };
        // An interrupt before or during the wait leaves them STOP_AFTER_INTERRUPT more.
        let cut = async {
            if interrupt.wait_for(|i| *i).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(STOP_AFTER_INTERRUPT).await;
        };
        tokio::select! {
            _ = stopping => {}
            _ = cut => {
                for &t in &profiling.started {
                    self.say_once(format!(
                        "warning: interrupted: the profiler of {} was not seen to stop after phase `{phase}`",
                        self.targets[t].label
                    ));
                }
            }
        }
    }

    /// At the run's end: one warning for each `--profile-phase` name no phase had (the
    /// phases come from the scenario as it runs, so this is known only now).
    pub fn warn_unmatched(&self) {
        let ran = lock(&self.ran).clone();
        for name in self.profile.iter().filter(|n| !ran.contains(n)) {
            let phases = ran
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ");
            self.say_once(format!(
                "warning: --profile-phase {name}: no phase of this run was named so (its phases: {phases}); nothing was profiled for it"
            ));
        }
    }

    /// The client and target `t`'s engine, found out at its first control call.
    async fn engine_of(&self, t: usize) -> Option<(&Http, Engine)> {
        let http = self.http.as_ref()?;
        let target = self.targets.get(t)?;
        let engine = target
            .engine
            .get_or_init(|| Engine::detect(http, &target.root))
            .await;
        Some((http, *engine))
    }

    fn say_once(&self, line: String) {
        if lock(&self.said).insert(line.clone()) {
            crate::errln!("{line}");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A target's URL without a trailing `/` or `/v1`: the engines serve their control
/// routes at the root.
fn server_root(target: &str) -> &str {
    let trimmed = target.trim().trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed)
}

#[cfg(test)]
mod tests;
