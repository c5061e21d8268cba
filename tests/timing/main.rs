//! The end-to-end tests that check measured times: every one pairs the client's records
//! with the simulator's own send log (`client_error.rs`) and gates on the client's error,
//! so they pass beside other work. A test binary of their own, because cargo runs test
//! binaries one after another, so the rest of the suite (Wasm component compiles, a
//! headless browser, llama.cpp) never runs beside them on a 2-core machine; within this
//! binary they still take turns through `support::exclusive`.
//!
//! The checks against the nominal timetable, which only a quiet machine keeps, are the
//! `quiet_machine` modules, ignored by `cargo test`; the README gives their command.
//!
//! Figures behind the gates (release build, 2 cores, kernel receive times), the client's
//! TTFT and E2EL over the server's send of the chunk, request by request. The server's log
//! counts from the kernel's receipt of each request (host/src/servers/sim/arrival.rs):
//!
//! | run | every TTFT and E2EL check of the binary |
//! |---|---|
//! | quiet | median 0.008-0.08 ms, p90 up to 0.09 ms, min 0.006 ms |
//! | two busy loops beside, 4 runs | median 0.007-0.068 ms, p90 up to 0.087 ms, min 0.005 ms |
//! | the same, `--receive-clock user` | median 0.03-0.82 ms, p90 0.28-5.1 ms |
//!
//! Before the server's log counted from the kernel's receipt (it counted from its
//! handler's start) the busy runs read a median of 0.06-0.9 ms and a p90 up to 5.6 ms: the
//! time the server's busy thread took to get to a request was read as the client's error.
//! Beside the two busy loops the |ITL| error stays at a p90 of 0.01 ms, send lateness at
//! a median of 0.05-0.08 ms (p90 0.15-1.7 ms), and the sweep's 512-prompt burst reads
//! 0.006-0.01 ms over the server at the median. With the client stopped 10 ms out of
//! every 40 (SIGSTOP), a quarter of the chunks are read up to 10 ms late and TTFT still
//! reads 0.008 ms over the server at the median. Once, with more work on the machine than
//! the two loops, one E2EL read 63 ms over and one send was 101 ms late: the gates are on
//! medians and p90s.

#[allow(dead_code)]
#[path = "../e2e/support.rs"]
mod support;

mod client_error;

#[path = "../e2e/metrics.rs"]
mod metrics;
#[path = "../e2e/precision.rs"]
mod precision;
#[path = "../e2e/timing.rs"]
mod timing;
