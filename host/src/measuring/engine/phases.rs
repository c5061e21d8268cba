//! The run loop: phase after phase, each started on the scenario thread, sent by its
//! dispatcher, closed, and summarised by the collector. Phases come from the scenario's
//! `phases` list, then, for an adaptive scenario, one at a time from its `next_phase`,
//! given a report of every finished phase.

use crate::both_sides::clock;
use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::dispatch::{PhaseDispatch, PhaseEnd, RunContext};
use super::generator::ScenarioLink;
use super::signals::Signals;
use super::{
    Collect, EngineError, FinishedPhase, FromScenario, StopReason, ToScenario, MAX_PHASES,
};
use crate::measuring::digest::RequestDigest;
use crate::measuring::metrics::{DecisionLatencies, Distribution, PhaseInfo, PhaseSummary};
use crate::workloads::scenario::{LatencySummary, PhaseReport, PhaseSpec, ScenarioError};

/// How long a stopped run waits for the scenario thread to end its current call (after a
/// signal, within the 5 s drain's budget).
pub(super) const SCENARIO_GRACE: Duration = Duration::from_millis(500);

/// How long a signal lets the records still being built finish before the run reports
/// without them (after the 5 s drain at most, so the run still ends in about 5 s).
const RECORD_GRACE: Duration = Duration::from_millis(1000);

/// Longest wait for a phase's connections to open before its clock starts.
const PREOPEN_LIMIT: Duration = Duration::from_secs(2);

/// Longest wait for the scenario to fill its queue before a phase's clock starts.
const MAX_PRIMING: Duration = Duration::from_secs(60);

pub(super) struct PhaseLoop<'a> {
    pub(super) run: RunContext<'a>,
    pub(super) scenario: ScenarioLink,
    pub(super) signals: Signals,
    /// The scenario gives phases from `next_phase` once the declared ones are done.
    pub(super) adaptive: bool,
    /// The scenario's name, for errors.
    pub(super) scenario_name: String,
    /// Declared phases not yet run.
    pub(super) queued: VecDeque<PhaseSpec>,
    pub(super) done: Finished,
}

/// What the run has done so far.
#[derive(Default)]
pub(super) struct Finished {
    /// What `next_phase` learns of the finished phases.
    pub(super) history: Vec<PhaseReport>,
    pub(super) digest: RequestDigest,
    pub(super) results: Vec<FinishedPhase>,
    pub(super) interrupted: bool,
    /// What ended the run early; the phases in `results` finished before it.
    pub(super) failure: Option<EngineError>,
}

impl PhaseLoop<'_> {
    /// Runs phases until there are no more, one ends the run, or something fails.
    pub(super) async fn run_all(&mut self) {
        for p in 0.. {
            let step = match self.next_spec(p).await {
                Ok(Some(spec)) => self.run_phase(p, &spec).await,
                Ok(None) => return,
                Err(e) => Err(e),
            };
            match step {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    self.done.failure = Some(e);
                    return;
                }
            }
        }
    }

    /// The next phase: a declared one, else an adaptive scenario's answer. `None` ends
    /// the run (also when a signal came while the scenario was deciding).
    async fn next_spec(&mut self, p: usize) -> Result<Option<PhaseSpec>, EngineError> {
        if let Some(spec) = self.queued.pop_front() {
            return Ok(Some(spec));
        }
        if !self.adaptive {
            return Ok(None);
        }
        if p >= MAX_PHASES {
            return Err(EngineError::Scenario(ScenarioError::Invalid {
                file: self.scenario_name.clone(),
                function: "next_phase".into(),
                message: format!(
                    "the run reached {MAX_PHASES} phases; return () (\"done\") to end it"
                ),
            }));
        }
        // A signal need not wait for `next_phase` to answer.
        let mut interrupt = self.signals.interrupt.clone();
        let ScenarioLink {
            commands, queue, ..
        } = &mut self.scenario;
        tokio::select! {
            a = ask_next_phase(commands, queue, &self.done.history) => a,
            Ok(_) = interrupt.wait_for(|i| *i) => {
                self.done.interrupted = true;
                Ok(None)
            }
        }
    }

    /// Runs phase `p`; whether the run goes on to the next. A failure after the phase
    /// was sent is kept in `failure` and the phase is still reported.
    async fn run_phase(&mut self, p: usize, spec: &PhaseSpec) -> Result<bool, EngineError> {
        self.scenario
            .commands
            .send(ToScenario::Start(p, Box::new(spec.clone())))
            .map_err(|_| EngineError::ScenarioThread)?;
        let live = self.run.live;
        live.lock()
            .unwrap_or_else(|e| e.into_inner())
            .start_phase(p, spec);
        let control = self.run.config.control.clone();
        control.before_phase(p, spec).await;
        self.open_connections(spec).await;
        self.wait_until_primed().await;
        let profiling = control.start_profile(spec).await;
        let start = clock::now();
        let server = {
            let mut live = live.lock().unwrap_or_else(|e| e.into_inner());
            live.phase_start = start;
            live.server.clone()
        };
        if let Some(server) = &server {
            server.begin_phase(p);
        }
        let dispatch = PhaseDispatch::new(
            &self.run,
            p,
            spec,
            start,
            &mut self.signals,
            &mut self.done.digest,
        );
        let end = dispatch.run(&mut self.scenario.queue).await;
        control.stop_profile(profiling).await;
        let end = end?;
        let server = match server {
            Some(s) => s.end_phase().await,
            None => Default::default(),
        };
        if let Err(e) = self.close_phase(&end.stop).await {
            self.done.failure = Some(e);
        }
        let signalled = !self.await_records().await;
        let (summary, latencies) = self.summarize(spec, &end).await?;
        let mut report = phase_report(p, spec, &summary, &latencies);
        report.server = server.stats;
        self.done.history.push(report);
        let goes_on = self.done.failure.is_none() && !end.stop.ends_run() && !signalled;
        if self.done.failure.is_none() {
            self.done.interrupted |= end.stop == StopReason::Interrupted || signalled;
        }
        self.done.results.push(FinishedPhase {
            spec: spec.clone(),
            summary,
            stop: end.stop,
            cut: end.cut,
            server: server.report,
        });
        Ok(goes_on)
    }

    /// Waits for the phase's records still being built, so that its summary counts every
    /// request; the phase's duration has already ended with its last response. After a
    /// signal (before or during the wait) they get [`RECORD_GRACE`]; those still unbuilt
    /// then are left out of requests.jsonl and the results, and the run says how many.
    /// Whether no signal came.
    async fn await_records(&mut self) -> bool {
        let backlog = self.run.backlog;
        let mut interrupt = self.signals.interrupt.clone();
        if !*interrupt.borrow() {
            tokio::select! {
                biased;
                _ = backlog.empty() => return true,
                _ = interrupt.wait_for(|i| *i) => {}
            }
        }
        if tokio::time::timeout(RECORD_GRACE, backlog.empty())
            .await
            .is_err()
        {
            let left = backlog.abandon();
            crate::errln!(
                "warning: {left} finished requests were still having their tokens counted at the interrupt; they are left out of requests.jsonl and the results"
            );
        }
        false
    }

    /// Opens the phase's connections before its clock starts, so no request's send
    /// lateness or TTFT counts a TCP handshake (`Client::preopen`). A slow or unreachable
    /// server gets [`PREOPEN_LIMIT`]; the requests then open their own.
    async fn open_connections(&self, spec: &PhaseSpec) {
        let count = usize::try_from(spec.connections_ahead()).unwrap_or(usize::MAX);
        let opening = self.run.clients.iter().map(|c| c.preopen(count));
        let _ = tokio::time::timeout(PREOPEN_LIMIT, futures_util::future::join_all(opening)).await;
    }

    /// The phase clock starts once the queue holds requests generated ahead (or the
    /// dataset is that short), so the first sends never wait for guest code. Ctrl-C need
    /// not wait for a slow scenario: the phase then stops at once.
    async fn wait_until_primed(&mut self) {
        let mut interrupt = self.signals.interrupt.clone();
        tokio::select! {
            _ = tokio::time::timeout(MAX_PRIMING, self.scenario.primed.notified()) => {}
            _ = interrupt.wait_for(|i| *i) => {}
        }
    }

    /// Closes the phase on the scenario thread and discards requests generated ahead.
    /// After a signal the scenario may be deep in a long call (a huge prompt, a guest at
    /// its time limit): it gets a moment, then the run reports without it.
    async fn close_phase(&mut self, stop: &StopReason) -> Result<(), EngineError> {
        let _ = self.scenario.commands.send(ToScenario::EndPhase);
        let closing = discard_until_closed(&mut self.scenario.queue);
        match stop {
            StopReason::Interrupted => tokio::time::timeout(SCENARIO_GRACE, closing)
                .await
                .unwrap_or(Ok(())),
            _ => closing.await,
        }
    }

    /// The phase's statistics, from the collector.
    async fn summarize(
        &self,
        spec: &PhaseSpec,
        end: &PhaseEnd,
    ) -> Result<(PhaseSummary, DecisionLatencies), EngineError> {
        let info = PhaseInfo {
            name: spec.name.clone(),
            duration_ns: end.duration.as_nanos() as u64,
            max_concurrency: spec.concurrency_limit(),
            request_rate: spec.arrival.rate(),
            burstiness: spec.arrival.burstiness(),
            steady_window: spec.steady_window,
        };
        let (reply, summary) = oneshot::channel();
        self.run
            .records
            .send(Collect::EndPhase { info, reply })
            .map_err(|_| EngineError::Collector)?;
        let (summary, latencies) = summary.await.map_err(|_| EngineError::Collector)?;
        if let Some(w) = spec
            .steady_window
            .filter(|_| summary.steady_state.is_none())
        {
            crate::errln!(
                "warning: phase `{}`: no steady state over the steady_window it named (from {} s to {} s): the phase lasted {:.3} s, with {} successful requests",
                spec.name,
                w.from_s,
                w.to_s,
                summary.duration_s,
                summary.completed
            );
        }
        Ok((summary, latencies))
    }
}

/// Discards what the scenario generated ahead, up to its acknowledgement of the phase's end.
async fn discard_until_closed(queue: &mut mpsc::Receiver<FromScenario>) -> Result<(), EngineError> {
    while let Some(msg) = queue.recv().await {
        match msg {
            FromScenario::Closed => break,
            FromScenario::Failed(e) => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// Asks the scenario thread for an adaptive scenario's next phase.
async fn ask_next_phase(
    commands: &super::generator::Commands,
    queue: &mut mpsc::Receiver<FromScenario>,
    history: &[PhaseReport],
) -> Result<Option<PhaseSpec>, EngineError> {
    commands
        .send(ToScenario::NextPhase(history.to_vec()))
        .map_err(|_| EngineError::ScenarioThread)?;
    // Requests of the last phase were discarded up to its `Closed`; the answer is next.
    loop {
        match queue.recv().await {
            Some(FromScenario::NextPhase(spec)) => return Ok(spec.map(|s| *s)),
            Some(FromScenario::Failed(e)) => return Err(e.into()),
            Some(_) => continue,
            None => return Err(EngineError::ScenarioThread),
        }
    }
}

/// What `next_phase` learns of a finished phase.
fn phase_report(
    index: usize,
    spec: &PhaseSpec,
    s: &PhaseSummary,
    latencies: &DecisionLatencies,
) -> PhaseReport {
    let summary = |d: &Distribution| LatencySummary {
        mean: d.mean,
        p50: d.percentile(50.0).unwrap_or(d.median),
        p90: d.percentile(90.0).unwrap_or(0.0),
        p99: d.percentile(99.0).unwrap_or(0.0),
    };
    PhaseReport {
        index,
        name: spec.name.clone(),
        warmup: spec.warmup,
        request_rate: spec.arrival.rate(),
        max_concurrency: spec.concurrency_limit(),
        duration_s: s.duration_s,
        completed: s.completed,
        failed: s.failed,
        request_throughput: s.request_throughput,
        output_throughput: s.output_throughput,
        goodput: s.goodput,
        ttft: summary(&latencies.ttft),
        tpot: summary(&latencies.tpot),
        itl: summary(&latencies.itl),
        e2el: summary(&latencies.e2el),
        server: vec![],
    }
}
