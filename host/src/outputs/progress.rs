//! A progress display for long runs: phase, sent / completed / failed, elapsed and what
//! remains by the phase's stop condition, live output throughput and TTFT p50; under it
//! the live panel of the last few seconds (`live_panel`).
//!
//! Drawn on stderr by a thread that reads the engine's live snapshot every [`TICK`],
//! so nothing on the request path waits for it. Shown only when stdout is a terminal (a
//! piped or redirected report stays clean) and not with `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::live_panel::{self, ServerHistory};
use crate::measuring::engine::LiveView;
use crate::workloads::scenario::{PhaseSpec, Snapshot};

/// Time between frames: five a second.
pub const TICK: Duration = Duration::from_millis(200);

/// Whether a progress display belongs on this terminal.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// The running display; [`Progress::finish`] clears it before the report is printed.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing when `enabled`; otherwise does nothing at all. `phases` is the
    /// number of phases when known ahead (`None` for an adaptive scenario).
    pub fn start(live: LiveView, phases: Option<usize>, enabled: bool) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = enabled.then(|| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("progress".into())
                .spawn(move || draw(&live, phases, &stop))
                .ok()
        });
        Progress {
            stop,
            thread: thread.flatten(),
        }
    }

    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// What the bar's template shows besides the bar itself, written by the drawing loop
/// before each frame: the frame is drawn once, whole, by `force_draw`.
#[derive(Default)]
struct Frame {
    phase: String,
    status: String,
    panel: String,
}

type Shared = Arc<Mutex<Frame>>;

fn style(frame: &Shared) -> ProgressStyle {
    let key = |pick: fn(&Frame) -> &str| {
        let frame = frame.clone();
        move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(pick(&frame.lock().unwrap_or_else(|e| e.into_inner())));
        }
    };
    ProgressStyle::with_template("{phase} [{bar:20}] {status}\n{panel}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key("phase", key(|f| &f.phase))
        .with_key("status", key(|f| &f.status))
        .with_key("panel", key(|f| &f.panel))
        .progress_chars("=> ")
}

fn draw(live: &LiveView, phases: Option<usize>, stop: &AtomicBool) {
    // Hidden until the first values are in, so no empty bar flashes.
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    let frame = Shared::default();
    bar.set_style(style(&frame));
    let mut server = ServerHistory::default();
    while !stop.load(Ordering::Relaxed) {
        let s = live.snapshot();
        if let Some(spec) = live.phase_spec() {
            let spec = &spec;
            let total = phases.map_or_else(|| "?".to_string(), |n| n.to_string());
            let gauges = server.gauges(&s.server, Instant::now());
            *frame.lock().unwrap_or_else(|e| e.into_inner()) = Frame {
                phase: format!("phase {}/{total} {}", s.phase + 1, spec.name),
                status: status_line(spec, &s),
                panel: live_panel::lines(&live.window(), gauges.as_ref()).join("\n"),
            };
            let (pos, len) = position(spec, &s);
            bar.update(|state| {
                state.set_len(len);
                state.set_pos(pos);
            });
            if bar.is_hidden() {
                bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(5));
            }
            bar.force_draw();
        }
        std::thread::sleep(TICK);
    }
    bar.finish_and_clear();
}

/// Where the phase stands on its stop condition: finished requests of `max_requests`, else
/// elapsed ms of `max_duration`, else requests finished of those sent.
fn position(spec: &PhaseSpec, s: &Snapshot) -> (u64, u64) {
    let finished = s.completed + s.failed;
    match (spec.max_requests, spec.max_duration) {
        (Some(n), _) => (finished.min(n), n.max(1)),
        (None, Some(d)) => {
            let ms = d.as_millis() as u64;
            (((s.elapsed_s * 1000.0) as u64).min(ms), ms.max(1))
        }
        (None, None) => (finished, s.sent.max(1)),
    }
}

/// `sent 40 ok 35 failed 1 | 12.3s, ~7.7s left | 3120 tok/s | TTFT p50 48.1 ms`
pub fn status_line(spec: &PhaseSpec, s: &Snapshot) -> String {
    let mut out = format!(
        "sent {} ok {} failed {} | {}",
        s.sent,
        s.completed,
        s.failed,
        seconds(s.elapsed_s)
    );
    if let Some(left) = remaining(spec, s) {
        out += &format!(", ~{} left", seconds(left));
    }
    let rate = if s.elapsed_s > 0.0 {
        s.output_tokens as f64 / s.elapsed_s
    } else {
        0.0
    };
    out += &format!(" | {rate:.0} tok/s");
    if s.completed > 0 {
        out += &format!(" | TTFT p50 {:.1} ms", s.ttft_p50_ms);
    }
    out
}

/// Seconds left by the stop condition: the duration limit, or the request budget at the
/// pace so far (whichever comes first); `None` when there is nothing to go by.
fn remaining(spec: &PhaseSpec, s: &Snapshot) -> Option<f64> {
    let by_time = spec
        .max_duration
        .map(|d| (d.as_secs_f64() - s.elapsed_s).max(0.0));
    let finished = s.completed + s.failed;
    let by_count = match spec.max_requests {
        Some(n) if finished > 0 && s.elapsed_s > 0.0 => {
            let pace = finished as f64 / s.elapsed_s;
            Some(n.saturating_sub(finished) as f64 / pace)
        }
        _ => None,
    };
    match (by_time, by_count) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn seconds(s: f64) -> String {
    if s >= 120.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::scenario::ArrivalSpec;

    fn spec(max_requests: Option<u64>, max_duration: Option<u64>) -> PhaseSpec {
        PhaseSpec {
            name: "main".into(),
            arrival: ArrivalSpec::Burst,
            max_concurrency: None,
            max_requests,
            max_duration: max_duration.map(Duration::from_secs),
            warmup: false,
            sessions: None,
            control: Default::default(),
            steady_window: None,
        }
    }

    fn snap() -> Snapshot {
        Snapshot {
            phase: 0,
            elapsed_s: 10.0,
            sent: 60,
            completed: 49,
            failed: 1,
            in_flight: 10,
            output_tokens: 5000,
            ttft_p50_ms: 48.14,
            ttft_p99_ms: 90.0,
            e2el_p99_ms: 900.0,
            server: vec![],
        }
    }

    #[test]
    fn the_line_says_counts_time_left_throughput_and_ttft() {
        assert_eq!(
            status_line(&spec(Some(100), None), &snap()),
            "sent 60 ok 49 failed 1 | 10.0s, ~10.0s left | 500 tok/s | TTFT p50 48.1 ms"
        );
        // The duration limit comes first here.
        assert_eq!(
            status_line(&spec(Some(1000), Some(15)), &snap()),
            "sent 60 ok 49 failed 1 | 10.0s, ~5.0s left | 500 tok/s | TTFT p50 48.1 ms"
        );
        let early = Snapshot {
            elapsed_s: 125.0,
            completed: 0,
            failed: 0,
            ..snap()
        };
        assert_eq!(
            status_line(&spec(None, None), &early),
            "sent 60 ok 0 failed 0 | 2m05s | 40 tok/s"
        );
    }

    #[test]
    fn the_bar_follows_the_stop_condition() {
        assert_eq!(position(&spec(Some(100), None), &snap()), (50, 100));
        assert_eq!(position(&spec(None, Some(20)), &snap()), (10_000, 20_000));
        assert_eq!(position(&spec(None, None), &snap()), (50, 60));
    }

    #[test]
    fn a_disabled_display_starts_no_thread() {
        let p = Progress::start(LiveView::new(), Some(1), false);
        assert!(p.thread.is_none());
        p.finish();
    }
}
