//! What ends a phase before its requests run out: Ctrl-C, the scenario's `stop`, the
//! error-rate limit, a failed scenario, each a watch channel the dispatcher waits on.

use tokio::sync::watch;

use super::StopReason;

/// What ends a phase early, besides its duration.
pub(super) struct Signals {
    /// Ctrl-C or SIGTERM.
    pub(super) interrupt: watch::Receiver<bool>,
    /// The scenario's `stop` function held.
    pub(super) stop: watch::Receiver<bool>,
    /// The collector saw the error rate pass `max_error_rate`.
    pub(super) error_rate: watch::Receiver<Option<StopReason>>,
    /// The scenario failed: its error is queued behind the requests generated ahead, and
    /// the dispatcher may be waiting on one of those (a send far ahead).
    pub(super) failed: watch::Receiver<bool>,
}

/// The senders of the signals the run itself raises.
pub(super) struct Raise {
    pub(super) stop: watch::Sender<bool>,
    pub(super) error_rate: watch::Sender<Option<StopReason>>,
    pub(super) failed: watch::Sender<bool>,
}

impl Signals {
    /// The signals of a run that `interrupt` interrupts, and their senders.
    pub(super) fn new(interrupt: watch::Receiver<bool>) -> (Signals, Raise) {
        let (stop, stop_rx) = watch::channel(false);
        let (error_rate, error_rate_rx) = watch::channel(None);
        let (failed, failed_rx) = watch::channel(false);
        let signals = Signals {
            interrupt,
            stop: stop_rx,
            error_rate: error_rate_rx,
            failed: failed_rx,
        };
        (
            signals,
            Raise {
                stop,
                error_rate,
                failed,
            },
        )
    }

    /// The first reason to stop. A source whose sender is gone (no `--max-error-rate`: the
    /// collector holds none) never fires, and it must not end this wait either: a select
    /// branch that completed on the closed channel and then waited forever would hide an
    /// interrupt behind it for as long as the caller waits (a send 1e9 s ahead).
    pub(super) async fn stopped(&mut self) -> StopReason {
        let Signals {
            interrupt,
            stop,
            error_rate,
            failed,
        } = self;
        let scenario_failed = async {
            if failed.wait_for(|f| *f).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let interrupted = async {
            if interrupt.wait_for(|i| *i).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let stopped = async {
            if stop.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let too_many_errors = async {
            match error_rate.wait_for(|r| r.is_some()).await {
                Ok(r) => r.clone().unwrap_or(StopReason::ScenarioStop),
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = interrupted => StopReason::Interrupted,
            _ = stopped => StopReason::ScenarioStop,
            r = too_many_errors => r,
            _ = scenario_failed => StopReason::ScenarioFailed,
        }
    }
}
