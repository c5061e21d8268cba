//! The collector task: statistics, the JSONL record file, the live snapshot, and the
//! outcomes fed back to the scenario, all in completion order.

use crate::both_sides::clock;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use super::live::Live;
use super::record_file::RecordFile;
use super::window::Window;
use super::{Collect, EngineConfig, EngineError, StopReason, ToScenario, ERROR_RATE_MIN_FINISHED};
use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord};
use crate::workloads::scenario::Outcome;

/// `--max-error-rate` and where the collector says it was passed.
pub(super) struct ErrorRateLimit {
    pub(super) limit: f64,
    pub(super) passed: watch::Sender<Option<StopReason>>,
}

pub(super) struct Collector {
    pub(super) records: Option<RecordFile>,
    pub(super) options: MetricsOptions,
    pub(super) max_error_rate: Option<ErrorRateLimit>,
    pub(super) live: Arc<Mutex<Live>>,
    /// The live counters' window, recorded here apart from `live`'s lock.
    pub(super) window: Arc<Mutex<Window>>,
    /// Where outcomes go, for a scenario that hears of responses.
    pub(super) outcomes: Option<super::generator::Commands>,
}

impl Collector {
    /// The collector of a run configured by `config`: it writes `records` (requests.jsonl,
    /// when asked for), raises `error_rate` when `--max-error-rate` is passed, and sends
    /// outcomes to the scenario through `outcomes` when it hears of responses.
    pub(super) fn new(
        config: &EngineConfig,
        records: Option<RecordFile>,
        error_rate: watch::Sender<Option<StopReason>>,
        live: Arc<Mutex<Live>>,
        outcomes: Option<super::generator::Commands>,
    ) -> Collector {
        let window = live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .window
            .clone();
        Collector {
            window,
            records,
            options: config.metrics.clone(),
            max_error_rate: config.max_error_rate.map(|limit| ErrorRateLimit {
                limit,
                passed: error_rate,
            }),
            live,
            outcomes,
        }
    }

    /// Takes records and phase ends until the engine drops its sender; the first error
    /// writing requests.jsonl, if any.
    pub(super) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Collect>,
    ) -> Result<(), EngineError> {
        let mut acc = PhaseAccumulator::new(&self.options);
        while let Some(msg) = rx.recv().await {
            match msg {
                Collect::Record(record, outcome) => {
                    self.record(&mut acc, &record, outcome);
                    // Records reach the disk as soon as the queue is idle, so a crash or a
                    // second Ctrl-C loses only what was still in the queue.
                    if rx.is_empty() {
                        if let Some(f) = self.records.as_mut() {
                            f.flush();
                        }
                    }
                }
                Collect::EndPhase { info, reply } => {
                    let _ = reply.send(self.end_phase(&mut acc, &info));
                }
                Collect::Close => break,
            }
        }
        self.records.map_or(Ok(()), RecordFile::finish)
    }

    fn record(
        &mut self,
        acc: &mut PhaseAccumulator,
        record: &RequestRecord,
        outcome: Option<Box<Outcome>>,
    ) {
        if let Some(f) = self.records.as_mut() {
            f.write(record);
        }
        acc.record(record);
        if let Some(max) = &self.max_error_rate {
            let (failed, finished) = (acc.failed(), acc.requests());
            let over =
                finished >= ERROR_RATE_MIN_FINISHED && failed as f64 > max.limit * finished as f64;
            if over && max.passed.borrow().is_none() {
                max.passed.send_replace(Some(StopReason::MaxErrorRate {
                    failed,
                    finished,
                    limit: max.limit,
                }));
            }
        }
        {
            let mut l = self.live.lock().unwrap_or_else(|e| e.into_inner());
            if record.succeeded() {
                l.snapshot.completed += 1;
                l.snapshot.output_tokens += record.output_tokens;
                if let (Some(t), Some(e)) = (record.ttft_ns(), record.e2el_ns()) {
                    let _ = l.ttft.record((t / 1000).max(1));
                    let _ = l.e2el.record((e / 1000).max(1));
                }
            } else if !record.cancelled {
                l.snapshot.failed += 1;
            }
        }
        self.window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(record, clock::now());
        if let (Some(tx), Some(o)) = (&self.outcomes, outcome) {
            let _ = tx.send(ToScenario::Outcome(*o));
        }
    }

    /// The phase's summary; the next phase starts from empty statistics.
    fn end_phase(
        &mut self,
        acc: &mut PhaseAccumulator,
        info: &PhaseInfo,
    ) -> (
        crate::measuring::metrics::PhaseSummary,
        crate::measuring::metrics::DecisionLatencies,
    ) {
        if let Some(f) = self.records.as_mut() {
            f.flush();
        }
        let summary = (acc.summarize(info), acc.decision_latencies());
        *acc = PhaseAccumulator::new(&self.options);
        if let Some(max) = &self.max_error_rate {
            max.passed.send_replace(None);
        }
        summary
    }
}
