//! The live counters of the running phase: what a scenario's `stop` function sees, and
//! what a progress display or `--live-metrics` reads while the run goes on (the whole
//! phase's counters, and its last seconds from `window`).

use crate::both_sides::clock;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::window::{Window, WindowStats};
use crate::servers::server_metrics::Scraper;
use crate::workloads::scenario::{PhaseSpec, Snapshot};

/// Live counters shared with the scenario thread for its `stop` function.
pub(super) struct Live {
    pub(super) snapshot: Snapshot,
    /// The running phase, for a progress display (adaptive phases are not known ahead).
    pub(super) spec: Option<PhaseSpec>,
    pub(super) phase_start: Instant,
    pub(super) ttft: hdrhistogram::Histogram<u64>,
    pub(super) e2el: hdrhistogram::Histogram<u64>,
    /// The server's metrics, when they are scraped.
    pub(super) server: Option<Arc<Scraper>>,
    /// The phase's last seconds, behind a lock of its own: the dispatcher, which takes
    /// this one on every send, never waits while a reader merges the window.
    pub(super) window: Arc<Mutex<Window>>,
}

impl Live {
    /// The snapshot a `stop` function sees now.
    pub(super) fn current(&self) -> Snapshot {
        let mut s = self.snapshot.clone();
        s.elapsed_s = clock::since(self.phase_start).as_secs_f64();
        s.in_flight = s.sent.saturating_sub(s.completed + s.failed);
        s.ttft_p50_ms = self.ttft.value_at_quantile(0.5) as f64 / 1000.0;
        s.ttft_p99_ms = self.ttft.value_at_quantile(0.99) as f64 / 1000.0;
        s.e2el_p99_ms = self.e2el.value_at_quantile(0.99) as f64 / 1000.0;
        if let Some(server) = &self.server {
            s.server = server.latest_values();
        }
        s
    }
}

/// A handle on the live counters of the running phase, for a progress display: cloned
/// into [`EngineConfig`] before the run and read while it goes on.
#[derive(Clone)]
pub struct LiveView(pub(super) Arc<Mutex<Live>>);

impl LiveView {
    pub fn new() -> LiveView {
        LiveView(Arc::new(Mutex::new(Live {
            snapshot: Snapshot::default(),
            spec: None,
            phase_start: clock::now(),
            ttft: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
            e2el: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
            server: None,
            window: Arc::new(Mutex::new(Window::new(clock::now()))),
        })))
    }

    /// Live counters whose snapshots, and the phases' results, carry what `scraper`
    /// scrapes from the server.
    pub fn with_server_metrics(scraper: Scraper) -> LiveView {
        let view = LiveView::new();
        view.0.lock().unwrap_or_else(|e| e.into_inner()).server = Some(Arc::new(scraper));
        view
    }

    /// The counters of the running phase now (the same snapshot a `stop` function sees).
    pub fn snapshot(&self) -> Snapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).current()
    }

    /// The running phase over the last [`super::WINDOW`].
    pub fn window(&self) -> WindowStats {
        let (window, elapsed_s) = {
            let live = self.0.lock().unwrap_or_else(|e| e.into_inner());
            (
                live.window.clone(),
                clock::since(live.phase_start).as_secs_f64(),
            )
        };
        let window = window.lock().unwrap_or_else(|e| e.into_inner());
        window.stats(clock::now(), elapsed_s)
    }

    /// The running phase's spec, once one has started.
    pub fn phase_spec(&self) -> Option<PhaseSpec> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spec
            .clone()
    }
}

impl Default for LiveView {
    fn default() -> Self {
        LiveView::new()
    }
}

impl Live {
    /// Counters from zero for phase `p`, whose clock starts now (again at its first send).
    pub(super) fn start_phase(&mut self, p: usize, spec: &PhaseSpec) {
        self.snapshot = Snapshot {
            phase: p,
            ..Snapshot::default()
        };
        self.spec = Some(spec.clone());
        self.phase_start = clock::now();
        self.ttft.reset();
        self.e2el.reset();
        self.window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .restart(self.phase_start);
    }
}
