//! What a server can make the runner hold is bounded: a 100,000-character word is counted
//! (in linear time, off the I/O threads) and the request succeeds; an endless stream ends
//! as `too_large` at 1,048,576 chunks instead of growing the runner without limit.

use crate::fault_server::{Fault, FaultServer};
use crate::support::{exclusive, fixture, records_in, runner, stderr};

#[test]
fn a_long_word_is_counted_and_an_endless_stream_ends_as_too_large() {
    // A million events at full speed: not beside the tests that time an engine.
    let _quiet = exclusive();
    let server = FaultServer::start(|i| match i {
        0 => Fault::Endless,
        1 | 2 => Fault::LongWord,
        _ => Fault::None,
    });
    let dir = tempfile::tempdir().unwrap();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        "requests=6",
        "-p",
        "concurrency=3",
        "--request-timeout",
        "120s",
        "--output",
        &dir.path().display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = records_in(dir.path());
    let by_index = |i: u64| records.iter().find(|r| r["index"] == i).unwrap();
    let endless = by_index(0);
    assert_eq!(
        endless["error"]["kind"], "too_large",
        "{}",
        endless["error"]
    );
    assert_eq!(endless["chunks"].as_array().unwrap().len(), 1 << 20);
    for i in [1, 2] {
        let word = by_index(i);
        assert!(word["error"].is_null(), "{}", word["error"]);
        // o200k splits a run of `a` into pieces of eight.
        assert_eq!(word["text_tokens"], 12_500, "{word}");
    }
}
