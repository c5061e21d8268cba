//! A pathological response does not skew the timing of the others: when one answer in ten
//! is a 100,000-character word (counted by the tokenizer, off the threads that timestamp
//! chunks), the other requests' TTFT, measured against the server's own record of when it
//! sent their first token, moves by less than 1 ms.

use serde_json::Value;

use crate::fault_server::{Fault, FaultServer};
use crate::support::{exclusive, fixture, run_records};

const REQUESTS: u64 = 400;

/// How far the client's TTFT of one request sits above the server's send time of its
/// first token, for every normal request (index not a multiple of 10) of one run.
fn ttft_over_server(long_words: bool) -> (f64, f64) {
    let server = FaultServer::start(move |i| {
        if long_words && i % 10 == 0 {
            Fault::LongWord
        } else {
            Fault::Paced
        }
    });
    let (_, _, records) = run_records(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        &format!("requests={REQUESTS}"),
        "-p",
        "concurrency=8",
        "-q",
    ]);
    assert_eq!(records.len() as u64, REQUESTS);
    let sent = server.seen.lock().unwrap().first_token_ms.clone();
    let normal: Vec<&Value> = records
        .iter()
        .filter(|r| r["index"].as_u64().unwrap() % 10 != 0)
        .collect();
    let mut client_sum = 0.0;
    let mut excess_sum = 0.0;
    for rec in &normal {
        assert!(rec["error"].is_null(), "{}", rec["error"]);
        let at = |key: &Value| key.as_u64().expect("ns") as f64 / 1e6;
        let ttft = at(&rec["chunks"][0]["t_ns"]) - at(&rec["sent_ns"]);
        let server_ms = sent[&rec["index"].as_u64().unwrap()];
        // The server stamps before it writes and after it has read the request, the
        // client before it writes and after it reads: its TTFT is never the shorter.
        assert!(
            ttft >= server_ms,
            "{rec}: client {ttft} ms, server {server_ms} ms"
        );
        client_sum += ttft;
        excess_sum += ttft - server_ms;
    }
    let n = normal.len() as f64;
    (client_sum / n, excess_sum / n)
}

#[test]
fn one_long_word_in_ten_does_not_move_the_other_requests_ttft() {
    let _quiet = exclusive();
    let (plain_ttft, plain_excess) = ttft_over_server(false);
    let (mixed_ttft, mixed_excess) = ttft_over_server(true);
    eprintln!(
        "normal requests' mean TTFT: {plain_ttft:.3} ms alone, {mixed_ttft:.3} ms beside long words; \
         over the server's send: {plain_excess:.3} ms and {mixed_excess:.3} ms"
    );
    assert!(
        mixed_excess - plain_excess <= 1.0,
        "long words moved the other requests' TTFT by {:.3} ms (over the server's send: \
         {plain_excess:.3} ms alone, {mixed_excess:.3} ms beside them)",
        mixed_excess - plain_excess
    );
}
