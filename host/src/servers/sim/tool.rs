//! Answers that are a tool call. A request that declares tools gets one call in place of
//! text when its `tool_choice` demands a call (`"required"`, Anthropic's `{"type":"any"}`,
//! or a named function), when its body says `"sim_tool_call": true` (the simulator's
//! own field, which real servers ignore or refuse), or for the share of requests
//! `--sim-tool-call-ratio` asks. `tool_choice: "none"` never gets one. Which requests,
//! the call's id and its arguments follow from a hash of the body, so a rerun of a
//! scenario gets the same answers.
//!
//! The call's arguments are a JSON object of `max_tokens` tokens (as nearly as the
//! object's own punctuation allows), one word per token as text answers are, so usage,
//! timing and token counts work as they do for text.

use serde_json::Value;

use super::words;

/// The arguments' opening: on the first token, before its word.
const OPEN: &str = r#"{"text":""#;
/// The arguments' closing: on the last token, after its word.
const CLOSE: &str = r#""}"#;

/// The call a request is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolAnswer {
    /// `call_` and 16 hex digits of the body's hash.
    pub id: String,
    pub name: String,
    /// Where the arguments' words start (from the body's hash).
    pub seed: u64,
}

/// What a chat request (or the chat request a Messages or Responses one means) says of
/// tools.
pub struct ToolAsk<'a> {
    pub tools: Option<&'a Value>,
    pub tool_choice: Option<&'a Value>,
    /// `sim_tool_call: true`.
    pub forced: bool,
}

/// The call `body` is answered with, if any; `ratio` is `--sim-tool-call-ratio`.
pub fn choose(ask: &ToolAsk<'_>, ratio: f64, body: &[u8]) -> Option<ToolAnswer> {
    let hash = body_hash(body);
    let names: Vec<&str> = ask
        .tools
        .and_then(Value::as_array)
        .map(|tools| tools.iter().filter_map(tool_name).collect())
        .unwrap_or_default();
    let choice = ask.tool_choice;
    if choice.and_then(Value::as_str) == Some("none") {
        return None;
    }
    let named = choice.and_then(tool_name);
    let required = choice.is_some_and(|c| {
        c.as_str() == Some("required") || c.get("type").and_then(Value::as_str) == Some("any")
    });
    // The top 53 bits of the hash as a fraction in [0, 1): the same requests every run.
    let drawn = (hash >> 11) as f64 / (1u64 << 53) as f64;
    let by_ratio = !names.is_empty() && drawn < ratio;
    let wanted = ask.forced || by_ratio || (!names.is_empty() && (required || named.is_some()));
    if !wanted {
        return None;
    }
    let name = named.or(names.first().copied()).unwrap_or("tool");
    Some(ToolAnswer {
        id: format!("call_{hash:016x}"),
        name: name.to_string(),
        seed: hash.rotate_left(17),
    })
}

/// A tool's (or a named `tool_choice`'s) name in any API's shape: chat's
/// `function.name`, Anthropic's and Responses' `name`.
fn tool_name(v: &Value) -> Option<&str> {
    let name = v
        .get("function")
        .and_then(|f| f.get("name"))
        .or(v.get("name"));
    name.and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// FNV-1a, 64 bits, then MurmurHash3's finaliser: a hash that is the same in every build
/// (std's is not promised to be) and whose high bits spread even for bodies that differ
/// in one digit (FNV's alone do not, and the ratio reads the high bits).
pub(super) fn body_hash(bytes: &[u8]) -> u64 {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl ToolAnswer {
    /// The arguments' text of tokens `first..first + count` of `max_tokens`: the opening
    /// with the first word, one word per token, the closing with the last.
    pub fn arguments(&self, first: usize, count: usize, max_tokens: usize) -> String {
        let mut out = String::with_capacity(8 * count + OPEN.len() + CLOSE.len());
        for i in first..first + count {
            if i == 0 {
                out.push_str(OPEN);
            }
            words::push_tokens(&mut out, self.seed, i, 1);
            if i + 1 == max_tokens {
                out.push_str(CLOSE);
            }
        }
        out
    }

    /// The name as a JSON string.
    pub fn name_json(&self) -> String {
        json_string(&self.name)
    }
}

/// `text` as a JSON string, quotes included.
pub fn json_string(text: &str) -> String {
    Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask<'a>(tools: &'a Value, choice: Option<&'a Value>, forced: bool) -> ToolAsk<'a> {
        ToolAsk {
            tools: Some(tools),
            tool_choice: choice,
            forced,
        }
    }

    #[test]
    fn a_call_when_asked_for_and_only_then() {
        let tools = json!([{"type": "function", "function": {"name": "a"}}, {"name": "b"}]);
        let body = b"{}";
        let choose = |a: &ToolAsk, ratio| choose(a, ratio, body).map(|t| t.name);
        assert_eq!(choose(&ask(&tools, None, false), 0.0), None);
        let required = json!("required");
        assert_eq!(
            choose(&ask(&tools, Some(&required), false), 0.0).as_deref(),
            Some("a")
        );
        let any = json!({"type": "any"});
        assert_eq!(
            choose(&ask(&tools, Some(&any), false), 0.0).as_deref(),
            Some("a")
        );
        for named in [
            json!({"type": "function", "function": {"name": "b"}}),
            json!({"type": "tool", "name": "b"}),
            json!({"type": "function", "name": "b"}),
        ] {
            assert_eq!(
                choose(&ask(&tools, Some(&named), false), 0.0).as_deref(),
                Some("b")
            );
        }
        let none = json!("none");
        assert_eq!(choose(&ask(&tools, Some(&none), true), 1.0), None);
        assert_eq!(choose(&ask(&tools, None, true), 0.0).as_deref(), Some("a"));
        assert_eq!(choose(&ask(&tools, None, false), 1.0).as_deref(), Some("a"));
        let no_tools = json!([]);
        assert_eq!(choose(&ask(&no_tools, Some(&required), false), 1.0), None);
    }

    #[test]
    fn the_ratio_picks_the_same_share_of_requests_every_time() {
        let tools = json!([{"name": "f"}]);
        let picked = |ratio| {
            (0..1000)
                .filter(|i| {
                    let body = format!("{{\"n\":{i}}}");
                    choose(&ask(&tools, None, false), ratio, body.as_bytes()).is_some()
                })
                .count()
        };
        let share = picked(0.3);
        assert!((240..=360).contains(&share), "{share}");
        assert_eq!(picked(0.3), share);
        assert_eq!((picked(0.0), picked(1.0)), (0, 1000));
        let a = choose(&ask(&tools, None, true), 0.0, b"x").expect("forced");
        assert_eq!(
            a,
            choose(&ask(&tools, None, true), 0.0, b"x").expect("forced")
        );
        assert!(a.id.starts_with("call_") && a.id.len() == 21, "{}", a.id);
    }

    #[test]
    fn the_arguments_are_one_json_object_of_one_word_per_token() {
        let call = ToolAnswer {
            id: "call_0".into(),
            name: "f".into(),
            seed: 3,
        };
        for max in [1, 2, 7] {
            let pieces: String = (0..max).map(|i| call.arguments(i, 1, max)).collect();
            assert_eq!(pieces, call.arguments(0, max, max));
            let v: Value = serde_json::from_str(&pieces).expect("a JSON object");
            let text = v["text"].as_str().expect("text");
            assert_eq!(text.split(' ').skip(1).count(), max, "{text:?}");
        }
        assert_eq!(json_string("a\"b"), r#""a\"b""#);
    }
}
