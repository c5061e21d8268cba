//! The collector task: statistics, the JSONL record file, the live snapshot, and the
//! outcomes fed back to the scenario, all in completion order.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use tokio::sync::watch;

use super::record_file::RecordFile;
use super::{Collect, EngineError, Live, StopReason, ToScenario, ERROR_RATE_MIN_FINISHED};
use crate::metrics::{MetricsOptions, PhaseAccumulator};

pub(super) async fn collect(
    mut rx: mpsc::UnboundedReceiver<Collect>,
    mut records: Option<RecordFile>,
    options: MetricsOptions,
    max_error_rate: Option<(f64, watch::Sender<Option<StopReason>>)>,
    live: Arc<Mutex<Live>>,
    outcomes: Option<std_mpsc::Sender<ToScenario>>,
) -> Result<(), EngineError> {
    let mut acc = PhaseAccumulator::new(&options);
    while let Some(msg) = rx.recv().await {
        match msg {
            Collect::Record(record, outcome) => {
                if let Some(f) = records.as_mut() {
                    f.write(&record);
                }
                acc.record(&record);
                if let Some((limit, tx)) = &max_error_rate {
                    let (failed, finished) = (acc.failed(), acc.requests());
                    let over = finished >= ERROR_RATE_MIN_FINISHED
                        && failed as f64 > limit * finished as f64;
                    if over && tx.borrow().is_none() {
                        tx.send_replace(Some(StopReason::MaxErrorRate {
                            failed,
                            finished,
                            limit: *limit,
                        }));
                    }
                }
                {
                    let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                    if record.succeeded() {
                        l.snapshot.completed += 1;
                        l.snapshot.output_tokens += record.output_tokens;
                        if let (Some(t), Some(e)) = (record.ttft_ns(), record.e2el_ns()) {
                            let _ = l.ttft.record((t / 1000).max(1));
                            let _ = l.e2el.record((e / 1000).max(1));
                        }
                    } else {
                        l.snapshot.failed += 1;
                    }
                }
                if let (Some(tx), Some(o)) = (&outcomes, outcome) {
                    let _ = tx.send(ToScenario::Outcome(*o));
                }
                // Records reach the disk as soon as the queue is idle, so a crash or a
                // second Ctrl-C loses only what was still in the queue.
                if rx.is_empty() {
                    if let Some(f) = records.as_mut() {
                        f.flush();
                    }
                }
            }
            Collect::EndPhase { info, reply } => {
                if let Some(f) = records.as_mut() {
                    f.flush();
                }
                let _ = reply.send((acc.summarize(&info), acc.decision_latencies()));
                acc = PhaseAccumulator::new(&options);
                if let Some((_, tx)) = &max_error_rate {
                    tx.send_replace(None);
                }
            }
        }
    }
    records.map_or(Ok(()), RecordFile::finish)
}
