//! The client's own error, request by request: each record of requests.jsonl paired, by
//! its `x-request-id`, with the simulator's own log of when it sent each content chunk
//! (`--sim-send-log`, host/src/servers/sim/send_log.rs). A busy machine makes the server's timers
//! late too, but that lateness is in both figures and cancels out: what is left is what
//! the client added (the loopback trips, and its own delays wherever its clock lets them
//! in), so the gates below hold beside other work and still catch a client that is off.

use std::collections::HashMap;

use serde_json::Value;

use crate::support::*;

/// Bounds on the client's error over the server's send times, ms, for one figure: on
/// its median and its 90th percentile. A busy machine stalls a thread for tens of ms now
/// and then (once, with other work beside the two busy loops: one E2EL 63 ms over the
/// server's, one send 101 ms late), so the mean and the tail are printed, not gated; a
/// client that is off on most requests is over these on every run.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub median_ms: f64,
    pub p90_ms: f64,
}

/// The error of TTFT and E2EL: the loopback trips and the client's own send write, and
/// the server's own time between stamping a chunk and writing it. The server's log counts
/// from the kernel's receipt of the request (host/src/servers/sim/arrival.rs), so the time its
/// busy thread took to take the request up is on neither side. Release build, 2 cores,
/// two busy loops beside: median 0.007-0.07 ms, p90 up to 0.09 ms (tests/timing/main.rs
/// has the figures; with `--receive-clock user` the medians reach 0.8 ms). The bounds
/// leave room for a machine busier than that. A client that stamps its sends before the
/// HTTP library's connection task writes them, or its reads when its own thread gets to
/// them, is over both on a busy machine; one that adds 20 ms, anywhere.
pub const LATENCY: Bounds = Bounds {
    median_ms: 0.5,
    p90_ms: 3.0,
};

/// The same with `--receive-clock user`: the client's own read delays are in its times.
pub const USER_CLOCK_LATENCY: Bounds = Bounds {
    median_ms: 5.0,
    p90_ms: 15.0,
};

/// The error of one gap between chunks (ITL), in absolute value: the difference of two
/// arrivals' errors, so the request's own trip cancels out and it is centred on zero. A
/// client that stamps several chunks of one read with one time reads their gaps short.
pub const GAP: Bounds = Bounds {
    median_ms: 0.5,
    p90_ms: 2.0,
};

/// How far below the server's figure the client may read: no more than the two clock
/// conversions can be off. The client's clock starts at the first write of the request
/// (before the kernel received it, where the server's log starts: host/src/servers/sim/arrival.rs)
/// and stops at the kernel's receipt of the chunk (after the server stamped and wrote it),
/// and the log keeps whole µs rounded down; a few µs apart at the least (measured: 6 µs).
/// Each side turns the kernel's wall-clock time into its monotonic clock with a pair of
/// readings within 20 µs of each other (host/src/both_sides/receive_stamp.rs), so each conversion is
/// within 10 µs (unless four pairs in a row were split by a preemption). A client that reads the wrong clock, or starts TTFT at a role-only delta,
/// reads milliseconds less than the server sent.
pub const FLOOR_MS: f64 = -0.02;

/// A run with the simulator's send log beside its requests.jsonl.
pub struct Logged {
    pub stdout: String,
    pub result: Value,
    /// requests.jsonl, sorted by index.
    pub records: Vec<Value>,
    /// Each logged request id's chunk send times, ms from the request's arrival.
    pub sent: HashMap<String, Vec<f64>>,
}

/// Runs `runner ARGS… --sim-send-log FILE --output DIR` and reads both.
pub fn run_logged(args: &[&str]) -> Logged {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("sent.jsonl").display().to_string();
    let mut all = args.to_vec();
    all.extend(["--sim-send-log", &log]);
    let (stdout, result, records) = run_records(&all);
    Logged {
        stdout,
        result,
        records,
        sent: send_log(&log),
    }
}

/// The simulator's send log: each request id's chunk send times, ms from its arrival.
pub fn send_log(path: &str) -> HashMap<String, Vec<f64>> {
    std::fs::read_to_string(path)
        .expect("send log")
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("send log line is JSON");
            let chunks = v["chunk_ms"].as_array().expect("chunk_ms").iter();
            (
                v["request_id"].as_str().expect("request_id").to_string(),
                chunks.map(|c| c.as_f64().expect("ms")).collect(),
            )
        })
        .collect()
}

/// One request as the client measured it and as the server sent it.
pub struct Paired<'a> {
    pub record: &'a Value,
    /// ms from the client's send to each content chunk's arrival.
    pub client_ms: Vec<f64>,
    /// ms from the server's receipt of the request to its send of each chunk.
    pub server_ms: &'a [f64],
}

impl Paired<'_> {
    /// The client's figure minus the server's, chunk by chunk.
    pub fn errors(&self) -> Vec<f64> {
        self.client_ms
            .iter()
            .zip(self.server_ms)
            .map(|(c, s)| c - s)
            .collect()
    }

    pub fn ttft_error(&self) -> f64 {
        self.errors()[0]
    }

    pub fn e2el_error(&self) -> f64 {
        *self.errors().last().expect("a chunk")
    }

    /// Each gap's error: the client's gap minus the server's.
    pub fn gap_errors(&self) -> Vec<f64> {
        self.errors().windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Each chunk's client delay (its read minus the kernel's receipt), ms; `None` where
    /// the record has none (the user-space clock).
    pub fn client_delays_ms(&self) -> Vec<Option<f64>> {
        chunks(self.record)
            .iter()
            .map(|c| c.get("client_delay_ns").map(non_negative_ms))
            .collect()
    }
}

/// A client delay is a whole, non-negative number of ns.
fn non_negative_ms(ns: &Value) -> f64 {
    let ns = ns
        .as_u64()
        .unwrap_or_else(|| panic!("client_delay_ns {ns} is not a whole number ≥ 0"));
    ns as f64 / 1e6
}

fn chunks(record: &Value) -> &Vec<Value> {
    record["chunks"].as_array().expect("chunks")
}

/// The records of `phase` with their server's account, by request id: every one was
/// logged, with as many chunks as the client counted.
pub fn paired(run: &Logged, phase: u64) -> Vec<Paired<'_>> {
    run.records
        .iter()
        .filter(|rec| rec["phase"] == phase)
        .map(|rec| {
            let id = rec["request_id"].as_str().expect("request_id");
            let server_ms = run
                .sent
                .get(id)
                .unwrap_or_else(|| panic!("{id} is not in the server's send log"));
            let sent = rec["sent_ns"].as_u64().expect("sent_ns");
            let client_ms: Vec<f64> = chunks(rec)
                .iter()
                .map(|c| (c["t_ns"].as_u64().expect("t_ns") - sent) as f64 / 1e6)
                .collect();
            assert_eq!(
                client_ms.len(),
                server_ms.len(),
                "{id}: the client read as many chunks as the server sent"
            );
            Paired {
                record: rec,
                client_ms,
                server_ms,
            }
        })
        .collect()
}

/// Order statistics of some samples.
#[derive(Clone, Copy, Debug)]
pub struct Spread {
    pub min: f64,
    /// The median, the percentiles and the reports' figures by numpy.percentile's default
    /// (linear) method: with an even count the median is halfway between the two middle
    /// samples (CI once saw 0.097 reported against the upper one's 0.098 ms).
    pub median: f64,
    pub mean: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut v: Vec<f64>) -> Spread {
        assert!(!v.is_empty(), "no samples");
        v.sort_by(f64::total_cmp);
        let percentile = |p: f64| {
            let rank = p / 100.0 * (v.len() - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
        };
        Spread {
            min: v[0],
            median: percentile(50.0),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p90: percentile(90.0),
            p99: percentile(99.0),
            max: v[v.len() - 1],
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "min {:.3}, median {:.3}, mean {:.3}, p90 {:.3}, p99 {:.3}, max {:.3} ms",
            self.min, self.median, self.mean, self.p90, self.p99, self.max
        )
    }
}

/// Prints the client's error on `what` and holds it to `bounds`.
pub fn check_error(what: &str, errors: Vec<f64>, bounds: Bounds) -> Spread {
    let s = Spread::of(errors);
    eprintln!("{what}, client minus server: {s}");
    assert!(
        s.median <= bounds.median_ms && s.p90 <= bounds.p90_ms,
        "{what}: the client's error {s} is over {bounds:?}"
    );
    s
}

/// TTFT and E2EL of every request: never below the server's, and within [`LATENCY`].
pub fn check_latencies(what: &str, requests: &[Paired]) {
    check_latencies_within(what, requests, LATENCY);
}

/// TTFT and E2EL of every request: never below the server's, and within `bounds`.
pub fn check_latencies_within(what: &str, requests: &[Paired], bounds: Bounds) {
    for (figure, errors) in [
        (
            "TTFT",
            requests
                .iter()
                .map(Paired::ttft_error)
                .collect::<Vec<f64>>(),
        ),
        ("E2EL", requests.iter().map(Paired::e2el_error).collect()),
    ] {
        let s = check_error(&format!("{what}: {figure}"), errors, bounds);
        assert!(
            s.min >= FLOOR_MS,
            "{what}: a request's {figure} reads {:.3} ms below the server's send",
            -s.min
        );
    }
}

/// Every gap between chunks (ITL) of every request, within [`GAP`] either way.
pub fn check_gaps(what: &str, requests: &[Paired]) {
    let gaps = requests.iter().flat_map(Paired::gap_errors);
    eprintln!(
        "{what}: ITL, client minus server: {}",
        Spread::of(gaps.clone().collect())
    );
    check_error(&format!("{what}: |ITL|"), gaps.map(f64::abs).collect(), GAP);
}

/// A read this late is a late read: over the loopback trip and the server's own delay at
/// the median, even on a busy machine (LATENCY).
pub const LATE_READ_MS: f64 = 2.0;

/// With the kernel's receive times (the default on Linux), every chunk carries the
/// client's own delay; and where the client read a chunk late, that delay is not in its
/// time: a client that stamped its reads would read at least its delay over the server.
/// Returns how many chunks were read late (none off Linux, where nothing is checked).
pub fn check_client_delays(what: &str, requests: &[Paired]) -> usize {
    if !cfg!(target_os = "linux") {
        return 0;
    }
    let mut delays = Vec::new();
    let mut late_reads = Vec::new();
    for p in requests {
        for (error, delay) in p.errors().into_iter().zip(p.client_delays_ms()) {
            let delay = delay.unwrap_or_else(|| {
                panic!(
                    "{}: a chunk without client_delay_ns",
                    p.record["request_id"]
                )
            });
            delays.push(delay);
            if delay > LATE_READ_MS {
                late_reads.push(error - delay);
            }
        }
    }
    eprintln!(
        "{what}: client delay {}; {} chunks read over {LATE_READ_MS} ms late",
        Spread::of(delays),
        late_reads.len(),
    );
    let late = late_reads.len();
    if late > 0 {
        let s = Spread::of(late_reads);
        eprintln!("{what}: late reads' error minus their delay: {s}");
        assert!(
            s.median < 0.0,
            "{what}: chunks read late are late by their delay in the client's times too \
             (error minus delay: {s})"
        );
    }
    late
}

/// Each latency figure's samples of a set of requests, ms: TTFT, E2EL, each gap (ITL)
/// and TPOT, from the client's times or from the server's.
pub struct Figures {
    pub ttft: Vec<f64>,
    pub e2el: Vec<f64>,
    pub itl: Vec<f64>,
    pub tpot: Vec<f64>,
}

impl Figures {
    pub fn client(requests: &[Paired]) -> Figures {
        Figures::of(requests, |p| &p.client_ms)
    }

    pub fn server(requests: &[Paired]) -> Figures {
        Figures::of(requests, |p| p.server_ms)
    }

    fn of<'a>(requests: &'a [Paired], side: impl Fn(&'a Paired) -> &'a [f64]) -> Figures {
        let mut figures = Figures {
            ttft: Vec::new(),
            e2el: Vec::new(),
            itl: Vec::new(),
            tpot: Vec::new(),
        };
        for p in requests {
            let ms = side(p);
            let (first, last) = (ms[0], ms[ms.len() - 1]);
            let tokens = p.record["output_tokens"].as_f64().expect("output_tokens");
            figures.ttft.push(first);
            figures.e2el.push(last);
            figures.tpot.push((last - first) / (tokens - 1.0));
            figures.itl.extend(ms.windows(2).map(|w| w[1] - w[0]));
        }
        figures
    }
}

/// The reported mean and p99 of every latency figure (result.json's `mean_<figure>_ms`,
/// `p99_<figure>_ms`) are those of the client's samples that were just held to the
/// server's (histograms of 3 significant digits: within 0.1 %, and 1 µs); the server's
/// own are printed beside them.
pub fn check_all_reported(r: &Value, requests: &[Paired]) {
    let (client, server) = (Figures::client(requests), Figures::server(requests));
    for (figure, samples, theirs) in [
        ("ttft", client.ttft, server.ttft),
        ("e2el", client.e2el, server.e2el),
        ("itl", client.itl, server.itl),
        ("tpot", client.tpot, server.tpot),
    ] {
        let (ours, theirs) = (Spread::of(samples), Spread::of(theirs));
        for (stat, want, server) in [
            ("mean", ours.mean, theirs.mean),
            ("p99", ours.p99, theirs.p99),
        ] {
            let got = num(r, &format!("{stat}_{figure}_ms"));
            eprintln!(
                "{stat} {figure}: reported {got:.3} ms, the records {want:.3} ms, the server {server:.3} ms"
            );
            assert!(
                (got - want).abs() <= 1e-3 * want + 1e-3,
                "{stat} {figure}: reported {got} ms, the records {want} ms"
            );
        }
    }
}
