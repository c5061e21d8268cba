//! The same seed sends the same requests; another seed does not.

use crate::support::*;

fn digest(extra: &[&str]) -> String {
    let mut args = vec![scenario("throughput.rhai")];
    args.extend(["-p", "requests=40", "-p", "rate=200", "-q"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, r) = run_ok(&refs);
    let d = r["runner"]["request_digest"]
        .as_str()
        .expect("digest in result")
        .to_string();
    assert!(out.contains(&d), "digest printed in the report");
    d
}

#[test]
fn same_seed_same_request_stream() {
    let a = digest(&[]);
    let b = digest(&[]);
    assert_eq!(a, b);
    assert_eq!(a.len(), 64);
    let c = digest(&["--seed", "7"]);
    assert_ne!(a, c, "another seed gives other requests");
}
