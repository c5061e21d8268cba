//! The runner's counts against the server's own: every request is sent once, unless its
//! pooled connection closed with no answer, when it is sent once more and counted as
//! retried (`retried: true` in its record, `runner.retried_requests` in result.json). The fault
//! server logs every request body it reads.

use std::collections::HashMap;

use crate::fault_server::{Fault, FaultServer};
use crate::support::{exclusive, fixture, num, records_in, runner, stderr};

fn plan(i: u64) -> Fault {
    match i % 10 {
        0 => Fault::Unavailable,
        1 => Fault::CloseAfterRead,
        2 => Fault::Reset,
        5 | 6 => Fault::CloseAfterAnswer,
        _ => Fault::None,
    }
}

#[test]
fn the_runners_counts_equal_the_servers_and_every_second_copy_is_counted() {
    // A thousand requests as fast as they go: not beside the tests that time an engine.
    let _quiet = exclusive();
    let server = FaultServer::start(plan);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let saved = dir.path().join("saved.json").display().to_string();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        "requests=1000",
        "--output",
        &out_dir,
        "--save-result",
        &saved,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let records = records_in(dir.path());
    assert_eq!(records.len(), 1000);
    let (completed, failed) = (num(&result, "completed"), num(&result, "failed"));
    assert_eq!(completed + failed, 1000.0);

    let mut bodies: HashMap<u64, u64> = HashMap::new();
    for i in server.seen.lock().unwrap().indices.iter() {
        *bodies.entry(*i).or_default() += 1;
    }
    let retried: Vec<u64> = records
        .iter()
        .filter(|r| r["retried"] == true)
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(
        num(&result["runner"], "retried_requests"),
        retried.len() as f64
    );
    for r in &records {
        let i = r["index"].as_u64().unwrap();
        let copies = bodies.get(&i).copied().unwrap_or(0);
        let limit = if r["retried"] == true { 2 } else { 1 };
        assert!(
            copies <= limit,
            "request {i} reached the server {copies} times: {r}"
        );
        // An answer means the server read it.
        if r["reached"] == "yes" {
            assert!(copies >= 1, "{r}");
        }
    }
    let total: u64 = bodies.values().sum();
    assert!(
        total >= 1000 - retried.len() as u64 && total <= 1000 + retried.len() as u64,
        "server read {total} bodies for 1000 requests, {} retried",
        retried.len()
    );
    // A request the server read and dropped is sent again, counted. One it reset is sent
    // again only when the reset came on a pooled connection (the client cannot tell a
    // stale keep-alive from a server that read it); whether request 2 found one idle
    // depends on how fast the earlier ones ended, which load moves (a loaded run reused
    // one). Either way the server read exactly the copies its record counts.
    let closed = records.iter().find(|r| r["index"] == 1).unwrap();
    assert_eq!(closed["retried"], true, "{closed}");
    assert_eq!(bodies.get(&1), Some(&2));
    let reset = records.iter().find(|r| r["index"] == 2).unwrap();
    let copies = 1 + u64::from(reset["retried"] == true);
    assert_eq!(bodies.get(&2), Some(&copies), "{reset}");
    eprintln!(
        "accounting: 1000 requests, {completed} ok, {failed} failed, {} retried, server read {total} bodies",
        retried.len()
    );
}

/// Closed-loop requests against a server that ends its connection after every answer,
/// with `fault`: every failure must be one the server saw.
fn closing_server_run(fault: Fault) {
    let _quiet = exclusive();
    let server = FaultServer::start(move |_| fault);
    let dir = tempfile::tempdir().unwrap();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        "requests=3000",
        "-p",
        "concurrency=64",
        "--output",
        &dir.path().display().to_string(),
    ]);
    let records = records_in(dir.path());
    assert_eq!(records.len(), 3000, "{}", stderr(&out));
    let mut bodies: HashMap<u64, u64> = HashMap::new();
    for i in server.seen.lock().unwrap().indices.iter() {
        *bodies.entry(*i).or_default() += 1;
    }
    let unseen: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| !r["error"].is_null())
        .filter(|r| !bodies.contains_key(&r["index"].as_u64().unwrap()))
        .collect();
    let retried = records.iter().filter(|r| r["retried"] == true).count();
    for r in &records {
        let copies = bodies.get(&r["index"].as_u64().unwrap()).copied();
        let limit = if r["retried"] == true { 2 } else { 1 };
        assert!(copies.unwrap_or(0) <= limit, "{r}");
    }
    let failed = records.iter().filter(|r| !r["error"].is_null()).count();
    eprintln!(
        "{fault:?}: 3000 requests at concurrency 64, {failed} failed, {} the server never saw, {retried} retried",
        unseen.len()
    );
    assert!(
        unseen.is_empty(),
        "{} failures the server never saw, e.g. {}",
        unseen.len(),
        unseen[0]
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_server_closing_after_every_answer_causes_no_failure_it_never_saw() {
    closing_server_run(Fault::CloseAfterAnswer);
}

#[test]
fn a_server_resetting_after_every_answer_causes_no_failure_it_never_saw() {
    closing_server_run(Fault::ResetAfterAnswer);
}
