//! The twin of tests/fixtures/scenarios/bench_twin.rhai, for measuring what one request
//! costs in the scenario layer: a short prompt from two random draws, a tag, and a
//! custom Poisson arrival.

use bench_scenario_sdk::prelude::*;

struct BenchTwin {
    rate: f64,
}

impl Scenario for BenchTwin {
    fn describe() -> Description {
        Description::new(
            "bench_twin",
            "A cheap request per call, custom Poisson arrivals.",
        )
        .param("rate", 1000.0, "offered request rate, req/s")
        .param("seed", 1, "random seed")
    }

    fn new() -> Result<Self, String> {
        Ok(BenchTwin {
            rate: param_f64("rate")?,
        })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        Ok(vec![Phase::new("bench").custom()])
    }

    fn next_request(&mut self, _phase: u32, index: u64) -> Result<Next, String> {
        let user = rand_int(1, 1000)?;
        Ok(Request::text(format!("user {user} asks question {index}"))
            .max_tokens(rand_int(16, 64)? as u64)
            .tag("bench")
            .into())
    }

    fn arrival(&mut self, _phase: u32, _index: u64) -> Result<f64, String> {
        gaps::poisson(self.rate)
    }
}

export_scenario!(BenchTwin);
