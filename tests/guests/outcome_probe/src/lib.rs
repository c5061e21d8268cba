//! What the fields bench:scenario 0.3.0 added carry into a component: it sends a header
//! on every request and a cancel after 2 output tokens on every other one, and reports
//! with `note` what came back: how many outcomes were cancelled, the reasoning tokens of
//! those read to the end, whether each time to first answer came at or after the time to
//! first token, and the server metrics its `stop` snapshots and its `next-phase` history
//! held. tests/e2e/wasm.rs reads the notes from result.json.

use bench_scenario_sdk::prelude::*;

#[derive(Default)]
struct Probe {
    requests: u64,
    answered: i64,
    cancelled: i64,
    reasoning_tokens: i64,
    answer_after_first_token: i64,
    snapshot_metrics: i64,
}

impl Probe {
    fn note_all(&self) -> Result<(), String> {
        note("answered", self.answered)?;
        note("cancelled", self.cancelled)?;
        note("reasoning_tokens", self.reasoning_tokens)?;
        note("answer_after_first_token", self.answer_after_first_token)?;
        note("snapshot_metrics", self.snapshot_metrics)
    }
}

impl Scenario for Probe {
    const ON_RESPONSE: bool = true;
    const STOP: bool = true;
    const NEXT_PHASE: bool = true;

    fn describe() -> Description {
        Description::new(
            "outcome_probe",
            "Sends the 0.3.0 request fields and notes the 0.3.0 fields it receives.",
        )
        .param("requests", 8, "requests in the phase")
        .param("rate", 40.0, "request rate, req/s")
    }

    fn new() -> Result<Self, String> {
        Ok(Probe {
            requests: param_u64("requests")?,
            ..Probe::default()
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        Ok(vec![Phase::new("probe")
            .constant(param_f64("rate")?)
            .max_requests(self.requests)])
    }

    fn next_request(&mut self, _phase: u32, index: u64) -> Result<Next, String> {
        let request = Request::chat(vec![Message::user(synthetic_text(16))])
            .max_tokens(8)
            .ignore_eos()
            .header("x-probe", format!("request-{index}"))
            .target(0);
        Ok(if index % 2 == 1 {
            request.cancel_after_tokens(2).into()
        } else {
            request.into()
        })
    }

    fn on_response(&mut self, o: Outcome) -> Result<(), String> {
        self.answered += 1;
        self.cancelled += i64::from(o.cancelled);
        if !o.cancelled {
            self.reasoning_tokens += o.reasoning_tokens as i64;
        }
        if o.ttfa_ms.is_some_and(|ttfa| ttfa >= o.ttft_ms) {
            self.answer_after_first_token += 1;
        }
        self.note_all()
    }

    fn stop(&mut self, s: Snapshot) -> Result<bool, String> {
        self.snapshot_metrics = self.snapshot_metrics.max(s.server.len() as i64);
        self.note_all()?;
        Ok(false)
    }

    fn next_phase(&mut self, history: Vec<PhaseSummary>) -> Result<Option<Phase>, String> {
        let running = history
            .last()
            .and_then(|p| p.server("vllm:num_requests_running"))
            .map_or(-1.0, |s| s.max);
        note("history_running_max", running)?;
        Ok(None)
    }
}

export_scenario!(Probe);
