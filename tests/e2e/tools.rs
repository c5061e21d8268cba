//! Tool calls end to end, on the simulator: a scenario that declares a tool and demands a
//! call (`tool_choice: "required"`) gets one call per request on chat, Anthropic Messages
//! and Responses alike; each record counts it (`tool_calls`, `first_tool_call_ns`,
//! `tool_call_tokens`), `on_response` hears it (`outcome.tool_calls`), and the next turn
//! sends it back with its result as history, translated for each API.

use serde_json::Value;

use crate::support::*;

/// Two conversations of two turns (tests/fixtures/scenarios/tool_calls.rhai).
const REQUESTS: usize = 4;

fn tool_run(api: &str) -> (Value, Vec<Value>) {
    let (_, result, records) = run_records(&[
        &fixture("tool_calls.rhai"),
        "--api",
        api,
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "5",
        "--sim-itl-ms",
        "1",
        "-q",
    ]);
    (result, records)
}

#[test]
fn every_api_records_one_tool_call_per_request_and_the_scenario_hears_it() {
    for api in ["chat", "messages", "responses"] {
        let (result, records) = tool_run(api);
        assert_eq!(records.len(), REQUESTS, "{api}: {records:?}");
        for rec in &records {
            assert!(rec.get("error").is_none(), "{api}: {rec}");
            assert_eq!(rec["tool_calls"], 1, "{api}: {rec}");
            let first = rec["first_tool_call_ns"]
                .as_u64()
                .expect("first_tool_call_ns");
            let ttft = rec["chunks"][0]["t_ns"].as_u64().expect("a chunk");
            // The call is the answer: its first chunk is the first token.
            assert_eq!(first, ttft, "{api}: {rec}");
            let tokens = rec["tool_call_tokens"].as_u64().expect("tool_call_tokens");
            assert!(tokens > 0, "{api}: {rec}");
            assert_eq!(rec["output_tokens"], 8, "{api}: {rec}");
        }
        // The second turns carried the first calls back as history: they are larger.
        let turn = |n: &str| {
            records
                .iter()
                .filter(|r| r["tag"] == n)
                .map(|r| r["input_tokens"].as_u64().expect("input_tokens"))
                .min()
                .expect("a turn")
        };
        assert!(turn("turn-2") > turn("turn-1"), "{api}: {records:?}");
        let notes = &result["scenario_result"];
        assert_eq!(notes["tool_name"], "get_weather", "{api}: {notes}");
        assert_eq!(notes["tool_id_prefix"], "call_", "{api}: {notes}");
        assert_eq!(notes["tool_calls"], 1, "{api}: {notes}");
    }
}
