//! `--sim-power idle=W,per_token=J`: a power model of the simulated GPU, served at
//! `/dcgm/metrics` under NVIDIA dcgm-exporter's names (`etc/default-counters.csv`) so that
//! `--power-metrics` runs with no GPU. A real exporter is a process of its own; the
//! simulator's `/metrics` stays vLLM's.
//!
//! The GPU draws `idle` watts from the server's start and `per_token` joules for each
//! generated token, counted as tokens are generated (the engine's own counter): over any
//! window, energy = idle × seconds + per_token × tokens, so a test can compute the joules
//! a run should measure from the window and the tokens it measured.

use crate::both_sides::clock;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{get, MethodRouter};

/// Where the model is served.
pub const PATH: &str = "/dcgm/metrics";

/// The model's two parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerModel {
    /// Watts drawn all the time.
    pub idle_w: f64,
    /// Joules per generated token.
    pub per_token_j: f64,
}

/// Largest parameter accepted: far above any GPU, and small enough that a day's
/// millijoules stay exact in an f64.
const MAX_PARAM: f64 = 1e6;

/// `idle=W,per_token=J`, both finite and non-negative, in any order; each at most once.
pub fn parse(s: &str) -> Result<PowerModel, String> {
    let (mut idle, mut per_token) = (None, None);
    for part in s.split(',').map(str::trim) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("expected idle=W,per_token=J, got `{s}`"))?;
        let v: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && (0.0..=MAX_PARAM).contains(v))
            .ok_or_else(|| format!("`{part}`: expected a number from 0 to {MAX_PARAM}"))?;
        let slot = match key.trim() {
            "idle" => &mut idle,
            "per_token" => &mut per_token,
            other => return Err(format!("unknown key `{other}` (idle, per_token)")),
        };
        if slot.replace(v).is_some() {
            return Err(format!("`{}` is given twice", key.trim()));
        }
    }
    match (idle, per_token) {
        (Some(idle_w), Some(per_token_j)) => Ok(PowerModel {
            idle_w,
            per_token_j,
        }),
        _ => Err(format!("expected both idle=W and per_token=J, got `{s}`")),
    }
}

/// The model running: its clock and the draw's last reading.
struct Meter {
    model: PowerModel,
    started: Instant,
    /// The seconds and joules at the previous scrape: the gauge is the mean draw since.
    last: Mutex<(f64, f64)>,
}

impl Meter {
    /// Joules since the start with `generated` tokens so far, `seconds` after it.
    fn joules(&self, seconds: f64, generated: u64) -> f64 {
        self.model.idle_w * seconds + self.model.per_token_j * generated as f64
    }

    /// The exposition as dcgm-exporter writes it: one GPU, `gpu="0"`.
    fn render(&self, generated: u64) -> String {
        let seconds = clock::since(self.started).as_secs_f64();
        let joules = self.joules(seconds, generated);
        let watts = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let (t, j) = std::mem::replace(&mut *last, (seconds, joules));
            if seconds > t {
                (joules - j) / (seconds - t)
            } else {
                self.model.idle_w
            }
        };
        let labels = "gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-000000000000\",device=\"nvidia0\",modelName=\"runner simulator\"";
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n\
             # TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
             DCGM_FI_DEV_POWER_USAGE{{{labels}}} {watts:.3}\n\
             # HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n\
             # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {}",
            (joules * 1000.0).floor() as u64
        );
        out
    }
}

/// `GET /dcgm/metrics`: the model with `generated()` tokens so far; its clock starts now.
pub fn route<S: Clone + Send + Sync + 'static>(
    model: PowerModel,
    generated: impl Fn() -> u64 + Clone + Send + Sync + 'static,
) -> MethodRouter<S> {
    let meter = Arc::new(Meter {
        model,
        started: clock::now(),
        last: Mutex::new((0.0, 0.0)),
    });
    get(move || {
        let text = meter.render(generated());
        async move {
            (
                [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                text,
            )
                .into_response()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::server_metrics::Exposition;

    #[test]
    fn the_model_is_parsed_in_any_order_and_refused_when_wrong() {
        let m = PowerModel {
            idle_w: 300.0,
            per_token_j: 0.05,
        };
        assert_eq!(parse("idle=300,per_token=0.05"), Ok(m));
        assert_eq!(parse(" per_token = 0.05 , idle=300"), Ok(m));
        for bad in [
            "",
            "idle=300",
            "idle=300,per_token=-1",
            "idle=NaN,per_token=1",
            "idle=1e9,per_token=1",
            "idle=1,per_token=1,idle=2",
            "idle=1,watts=2",
            "idle:1,per_token=2",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_counter_is_idle_time_plus_tokens_in_millijoules() {
        let meter = Meter {
            model: PowerModel {
                idle_w: 100.0,
                per_token_j: 0.5,
            },
            started: Instant::now() - std::time::Duration::from_secs(2),
            last: Mutex::new((0.0, 0.0)),
        };
        let e = Exposition::parse(&meter.render(40));
        let mj = e
            .value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            .expect("the counter");
        // 100 W for 2 s (and the microseconds the test took) plus 40 x 0.5 J.
        assert!((220_000.0..220_100.0).contains(&mj), "{mj}");
        // The draw since the start: 220 J over 2 s.
        let w = e.value("DCGM_FI_DEV_POWER_USAGE").expect("the gauge");
        assert!((109.9..110.1).contains(&w), "{w}");
    }
}
