//! The Wasm twin of tests/fixtures/scenarios/fuzz_boundary.rhai: every value this component
//! returns through the WIT interface (phases, arrivals, requests, gaps, stop and next-phase
//! results, errors) is drawn from the run's seed, in and out of range: NaN, infinities,
//! 1e300, u64::MAX, empty lists, invalid JSON, a 70,000-character tag. Whatever it
//! returns, the runner must run or end with one clear line.

use bench_scenario_sdk::prelude::*;

const FLOATS: [f64; 14] = [
    0.0,
    -1.0,
    1.0,
    0.5,
    1e-300,
    1e300,
    -1e300,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e20,
    2.5,
    0.001,
    50.0,
];
const COUNTS: [u64; 8] = [0, 1, 3, 8, u64::MAX, 1 << 53, 1 << 63, 1_000_000_000];

fn draw(chaos: f64) -> bool {
    random() < chaos
}

fn pick<T: Copy>(from: &[T]) -> T {
    from[rand_int(0, from.len() as i64 - 1).unwrap_or(0) as usize]
}

/// `good`, or with probability `chaos` a value from `wild`.
fn or_wild<T: Copy>(chaos: f64, good: T, wild: &[T]) -> T {
    if draw(chaos) {
        pick(wild)
    } else {
        good
    }
}

fn text(chaos: f64) -> String {
    if !draw(chaos) {
        return "req 0".into();
    }
    match rand_int(0, 3).unwrap_or(0) {
        0 => String::new(),
        1 => "t".repeat(70_000),
        2 => "\u{1b}[31m escape \u{7}".into(),
        _ => random_token_text(8),
    }
}

struct Fuzz {
    chaos: f64,
}

impl Fuzz {
    fn phase(&self, i: u64) -> Phase {
        let c = self.chaos;
        let name = if draw(c / 4.0) {
            String::new()
        } else {
            format!("p{i}")
        };
        let p = Phase::new(&name);
        let rate = or_wild(c, rand_int(1, 500).unwrap_or(1) as f64, &FLOATS);
        let mut p = match rand_int(0, 5).unwrap_or(0) {
            0 => p.burst(),
            1 => p.poisson(rate),
            2 => p.gamma(rate, or_wild(c, 1.5, &FLOATS)),
            3 => p.constant(rate),
            4 => p.closed(or_wild(c, rand_int(1, 8).unwrap_or(1) as u64, &COUNTS)),
            _ => p.custom(),
        };
        if random() < 0.8 {
            p = p.max_requests(or_wild(c, rand_int(0, 8).unwrap_or(0) as u64, &COUNTS));
        }
        if random() < 0.4 {
            p = p.max_duration(or_wild(c, random() * 0.5, &FLOATS));
        }
        if random() < 0.3 {
            p = p.max_concurrency(or_wild(c, rand_int(1, 4).unwrap_or(1) as u64, &COUNTS));
        }
        if draw(0.2) {
            p = p.warmup();
        }
        p
    }

    fn request(&self) -> Request {
        let c = self.chaos / 20.0;
        let mut r = match rand_int(0, 9).unwrap_or(0) {
            0 if draw(c) => Request::tokens(vec![0, u32::MAX, 7]),
            1 if draw(c) => Request::chat(vec![]),
            3 if draw(c) => Request::embeddings(Vec::<String>::new()),
            2 => Request::chat(vec![Message::user(text(c))]),
            _ => Request::text(text(c)),
        };
        r = r.max_tokens(or_wild(c, rand_int(1, 8).unwrap_or(1) as u64, &COUNTS));
        if draw(0.2) {
            r = r.ignore_eos();
        }
        if draw(0.1) {
            r = r.no_stream();
        }
        if draw(0.2) {
            r = r.extra_json(or_wild(
                c,
                r#"{"temperature":0}"#,
                &["not json", "[1]", "{"],
            ));
        }
        if draw(0.3) {
            r = r.tag(text(c));
        }
        if draw(0.2) {
            r = r.session(text(c));
        }
        if draw(0.1) {
            r = r.at(or_wild(c, random() * 0.2, &FLOATS));
        }
        if draw(0.1) {
            r = r.delay(or_wild(c, random() * 0.01, &FLOATS));
        }
        if draw(0.2) {
            r = r.input_tokens(or_wild(c, 2, &COUNTS));
        }
        self.new_fields(r)
    }

    /// The request fields of bench:scenario 0.3: headers, cancel limits, the target.
    fn new_fields(&self, mut r: Request) -> Request {
        let c = self.chaos / 20.0;
        if draw(0.1) {
            let name = or_wild(c, "x-tenant", &["", "bad name", "x:y", "caf\u{e9}"]);
            let value = or_wild(c, "t1", &["a\r\nInjected: 1", "nul\0", ""]);
            r = r.header(name, value);
        }
        if draw(c) {
            for i in 0..65 {
                r = r.header(format!("x-h{i}"), "v");
            }
        }
        if draw(0.1) {
            r = r.cancel_after_tokens(or_wild(c, rand_int(1, 4).unwrap_or(1) as u64, &COUNTS));
        }
        if draw(0.1) {
            r = r.cancel_after_ms(or_wild(c, 0.5 + random() * 5.0, &FLOATS));
        }
        // The fuzz runs have one target: index 0 is the only one in range.
        if draw(0.1) {
            r = r.target(0);
        }
        r
    }
}

impl Scenario for Fuzz {
    const ON_RESPONSE: bool = true;
    const STOP: bool = true;
    const NEXT_PHASE: bool = true;

    fn describe() -> Description {
        Description::new(
            "fuzz_boundary",
            "Random values at every export of the contract.",
        )
        .param("seed", 1, "seed of the draws")
    }

    fn new() -> Result<Self, String> {
        // How often a draw is out of contract: never in some runs, up to 30 % in others.
        let chaos = if random() < 0.3 { 0.0 } else { random() * 0.3 };
        Ok(Fuzz { chaos })
    }

    fn phases(&mut self) -> Result<Vec<Phase>, String> {
        if draw(self.chaos / 8.0) {
            return Err("phases failed on purpose".into());
        }
        Ok((0..rand_int(0, 3)?).map(|i| self.phase(i as u64)).collect())
    }

    fn next_request(&mut self, _phase: u32, _index: u64) -> Result<Next, String> {
        let c = self.chaos / 20.0;
        if draw(c) {
            return Err("next-request failed on purpose".into());
        }
        if draw(c) {
            return Ok(if draw(0.5) { Next::Wait } else { Next::Done });
        }
        Ok(self.request().into())
    }

    fn arrival(&mut self, _phase: u32, _index: u64) -> Result<f64, String> {
        Ok(or_wild(self.chaos / 20.0, random() * 0.01, &FLOATS))
    }

    fn on_response(&mut self, _outcome: Outcome) -> Result<(), String> {
        if draw(self.chaos / 50.0) {
            return Err("on-response failed on purpose".into());
        }
        Ok(())
    }

    fn stop(&mut self, s: Snapshot) -> Result<bool, String> {
        // The run's own bound: whatever the phases say, it ends within about a second.
        if s.elapsed > 1.0 || s.sent > 40 {
            return Ok(true);
        }
        if draw(self.chaos / 50.0) {
            return Err("stop failed on purpose".into());
        }
        Ok(false)
    }

    fn next_phase(&mut self, history: Vec<PhaseSummary>) -> Result<Option<Phase>, String> {
        if history.len() >= 3 || draw(0.5) {
            return Ok(None);
        }
        if draw(self.chaos / 4.0) {
            return Err("next-phase failed on purpose".into());
        }
        Ok(Some(self.phase(history.len() as u64 + 10)))
    }
}

export_scenario!(Fuzz);
