//! Ctrl-C, SIGTERM and SIGHUP (the terminal closed) during `runner run`. Before the run
//! starts sending (loading, the pre-run checks, a wait for `--start-at`) there is nothing
//! to report: the first signal ends the process with exit code 130. Once it runs, the
//! first signal stops sending and lets the run drain briefly and report what finished;
//! a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// Exit code of a run stopped by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as shells
/// report an interrupted command).
pub const EXIT_INTERRUPTED: i32 = 130;

/// What the first signal does.
pub struct Interrupts {
    rx: watch::Receiver<bool>,
    running: Arc<AtomicBool>,
}

impl Interrupts {
    /// Starts listening on `rt`. The handlers are installed before this returns, so no
    /// signal that follows can end the process by its default action.
    pub fn listen(rt: &tokio::runtime::Runtime) -> Interrupts {
        let (tx, rx) = watch::channel(false);
        let running = Arc::new(AtomicBool::new(false));
        let _entered = rt.enter();
        let mut signals = Signals::install();
        let armed = running.clone();
        rt.spawn(async move {
            signals.next().await;
            if !armed.load(Ordering::SeqCst) {
                crate::errln!("interrupted before the run started");
                std::process::exit(EXIT_INTERRUPTED);
            }
            let _ = tx.send(true);
            crate::errln!(
                "interrupted: finishing in-flight requests (press Ctrl-C again to quit at once)"
            );
            signals.next().await;
            std::process::exit(EXIT_INTERRUPTED);
        });
        Interrupts { rx, running }
    }

    /// The run starts sending: from now on the first signal stops it and it reports.
    pub fn run_started(&self) {
        self.running.store(true, Ordering::SeqCst);
    }

    /// Turns true at the first signal once the run started.
    pub fn receiver(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }
}

/// The three signals, each listened to from installation on (a signal that arrives
/// between two waits is kept, not lost).
struct Signals {
    #[cfg(unix)]
    streams: Vec<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let kinds = [
                SignalKind::interrupt(),
                SignalKind::terminate(),
                SignalKind::hangup(),
            ];
            Signals {
                streams: kinds.into_iter().filter_map(|k| signal(k).ok()).collect(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            if self.streams.is_empty() {
                return std::future::pending().await;
            }
            let waits = self.streams.iter_mut().map(|s| Box::pin(s.recv()));
            futures_util::future::select_all(waits).await;
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
