//! The rules a scenario's answers must follow, checked once on the host-side spec types
//! after a guest's values were converted to them (`rhai/convert.rs`, `wasm/convert.rs`).
//! A Rhai script and a Wasm component that return the same value get the same verdict and
//! the same message. What stays in the converters is the shape of each language's own
//! values: a Rhai map's keys and value types, a WIT JSON text.
//!
//! Fields are named as the spec types name them (`max_tokens`), which is also how a Rust
//! guest built with the SDK and a Rhai script spell them. Phases are numbered from 0, as
//! the scenario's `phases` list is indexed.

use std::fmt::Display;
use std::time::Duration;

use super::spec::{ArrivalSpec, Cancel, NamedWindow, Next, PhaseSpec, Prompt, RequestSpec, Step};
use super::Description;

/// `describe`: a name, and parameters with distinct names and usable defaults.
pub fn description(d: &Description) -> Result<(), String> {
    if d.name.trim().is_empty() {
        return Err("`name` is missing or empty".into());
    }
    for (n, p) in d.params.iter().enumerate() {
        if p.name.trim().is_empty() {
            return Err("a parameter has an empty `name`".into());
        }
        if d.params[..n].iter().any(|q| q.name == p.name) {
            return Err(format!("parameter `{}` is declared twice", p.name));
        }
        if let super::ParamValue::Float(v) = p.default {
            if !v.is_finite() {
                return Err(format!(
                    "parameter `{}` has a default that is not a finite number ({v})",
                    p.name
                ));
            }
        }
    }
    Ok(())
}

/// `phases`: an empty list is a mistake, except for an adaptive scenario, whose
/// `next_phase` gives the phases.
pub fn phase_count(count: usize, adaptive: bool) -> Result<(), String> {
    if count == 0 && !adaptive {
        return Err("returned no phases".into());
    }
    Ok(())
}

/// Phase `i` as the engine runs it: an unnamed phase is called "phase N" (counted from
/// 1), rates are positive, and a closed loop and a concurrency cap hold at least one
/// request.
pub fn phase(i: usize, mut spec: PhaseSpec) -> Result<PhaseSpec, String> {
    if spec.name.is_empty() {
        spec.name = format!("phase {}", i + 1);
    }
    let positive = |key: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(not_positive(i, key, v))
        }
    };
    match spec.arrival {
        ArrivalSpec::Poisson { rate } | ArrivalSpec::Constant { rate } => positive("rate", rate)?,
        ArrivalSpec::Gamma { rate, burstiness } => {
            positive("rate", rate)?;
            positive("burstiness", burstiness)?;
        }
        ArrivalSpec::Closed { concurrency: 0 } => return Err(closed_too_narrow(i, 0)),
        ArrivalSpec::Burst | ArrivalSpec::Closed { .. } | ArrivalSpec::Custom => {}
    }
    if spec.max_concurrency == Some(0) {
        return Err(format!("phase {i}: `max_concurrency` must be at least 1"));
    }
    match spec.sessions {
        Some(0) => return Err(format!("phase {i}: `sessions` must be at least 1")),
        // A session's requests are counted by its steps: a cap on requests would cut
        // sessions in the middle, and differently in each shard.
        Some(_) if spec.max_requests.is_some() => {
            return Err(format!(
                "phase {i}: a phase of `sessions` ends when its sessions end; leave out `max_requests` (bound it by `sessions` or `max_duration`)"
            ))
        }
        _ => {}
    }
    if let Some(w) = spec.steady_window {
        steady_window(i, w, spec.max_duration)?;
    }
    Ok(spec)
}

/// A named steady-state window lies inside its phase: it starts at or after the phase's
/// start, ends after it starts, and ends by the phase's `max_duration` when it has one
/// (after that the phase only drains). A phase that ends earlier than its window is said
/// once it ran (`engine::phases`).
fn steady_window(i: usize, w: NamedWindow, max_duration: Option<Duration>) -> Result<(), String> {
    let shown = format!("from {} s to {} s", w.from_s, w.to_s);
    if !(w.from_s.is_finite() && w.to_s.is_finite() && w.from_s >= 0.0 && w.to_s > w.from_s) {
        return Err(format!(
            "phase {i}: `steady_window` {shown} lies outside the phase: it must start at 0 s or later and end after it starts"
        ));
    }
    match max_duration.map(|d| d.as_secs_f64()) {
        Some(max) if w.to_s > max => Err(format!(
            "phase {i}: `steady_window` {shown} lies outside the phase: it ends after the phase's `max_duration` ({max} s)"
        )),
        _ => Ok(()),
    }
}

/// The message for an arrival parameter that is not a positive number.
pub fn not_positive(i: usize, key: &str, got: impl Display) -> String {
    format!("phase {i}: arrival `{key}` must be a positive number, got {got}")
}

/// The width of a closed loop given as a number (Rhai has no unsigned integers): rounded
/// to the nearest whole request, and refused below one.
pub fn closed_width(i: usize, width: f64) -> Result<u64, String> {
    let n = width.round();
    if n.is_finite() && n >= 1.0 {
        // Saturates above u64::MAX: no semaphore holds more permits anyway.
        Ok(n as u64)
    } else {
        Err(closed_too_narrow(i, width))
    }
}

fn closed_too_narrow(i: usize, got: impl Display) -> String {
    format!("phase {i}: a closed loop needs at least 1 request in flight, got {got}")
}

/// The longest `max_duration` accepted: about 31.7 years, beyond any run, and far inside
/// what the engine's clocks can add to now.
pub const MAX_PHASE_SECS: f64 = 1e9;

/// A phase's `max_duration` in seconds, as the engine's Duration: a negative or NaN value
/// and one too large for any run are refused, each saying which.
pub fn max_duration(i: usize, secs: f64) -> Result<Duration, String> {
    if secs > MAX_PHASE_SECS {
        return Err(format!(
            "phase {i}: `max_duration` of {secs:e} s is too large: at most {MAX_PHASE_SECS:.0} s (about 31 years)"
        ));
    }
    super::params::duration_of(secs)
        .ok_or_else(|| format!("phase {i}: `max_duration` must be seconds >= 0, got {secs}"))
}

/// `next_request`: `Wait` only from a scenario that is told of responses (nothing else
/// could wake it), and a request the engine can send.
pub fn next(next: Next, hears_responses: bool) -> Result<Next, String> {
    match next {
        Next::Wait if !hears_responses => Err(
            "returned `wait`, but only a scenario with the on-response hook can be woken up \
             (Rhai: `fn on_response(outcome)`; Wasm: `on-response` in the hooks of `describe`)"
                .into(),
        ),
        Next::Request(r) => request(&r).map(|()| Next::Request(r)),
        other => Ok(other),
    }
}

/// Children one fan-out step may open.
pub const MAX_FAN_OUT: usize = 64;

/// A session's step (Rhai's `session_step`, Wasm's `session-step`): its request follows
/// the rules of any request but is timed by `after` alone (0 to [`MAX_PHASE_SECS`]; `at`
/// and `delay` belong to the pull model), and a fan-out names 1 to [`MAX_FAN_OUT`] children, each
/// non-empty, unique and without `/` (the separator of a child's id).
pub fn step(step: Step) -> Result<Step, String> {
    match &step {
        Step::Send { request: r, after } => {
            if !after.is_finite() || *after < 0.0 {
                return Err(format!(
                    "`after` must be a finite number of seconds >= 0, got {after}"
                ));
            }
            // The bound of a phase's `max_duration`: a longer wait outlasts any phase, and
            // in virtual time would move the clock past what it counts (u64 ns).
            if *after > MAX_PHASE_SECS {
                return Err(format!(
                    "`after` of {after:e} s is too long: at most {MAX_PHASE_SECS:.0} s (about 31 years), the longest phase"
                ));
            }
            if r.at.is_some() || r.delay.is_some() {
                return Err("a session's request is timed by the step's `after`; leave out `at` and `delay`".into());
            }
            request(r)?;
        }
        Step::FanOut(names) => {
            if names.is_empty() || names.len() > MAX_FAN_OUT {
                return Err(format!(
                    "a fan-out opens 1 to {MAX_FAN_OUT} children, got {}",
                    names.len()
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for name in names {
                if name.is_empty() || name.contains('/') || name.len() > 64 {
                    return Err(format!(
                        "child name `{}` must be 1 to 64 bytes without `/`",
                        crate::safeguards::display::excerpt(name)
                    ));
                }
                if !seen.insert(name) {
                    return Err(format!("child name `{name}` is given twice"));
                }
            }
        }
        Step::End => {}
    }
    Ok(step)
}

/// One request: at least one token to generate, at least one chat message or embedding
/// input, schedule times that are whole, non-negative seconds, headers an HTTP server
/// takes, and a cancel that can fire.
pub fn request(r: &RequestSpec) -> Result<(), String> {
    match &r.prompt {
        Prompt::Messages(list) if list.is_empty() => {
            return Err("`messages` is empty: a chat request needs at least one message".into());
        }
        Prompt::Inputs(list) => inputs(list)?,
        _ => {}
    }
    headers(&r.headers)?;
    if let Some(c) = &r.cancel {
        cancel(c)?;
    }
    if r.max_tokens == 0 {
        return Err(max_tokens_not_positive(0));
    }
    for (key, value) in [("at", r.at), ("delay", r.delay)] {
        if let Some(s) = value {
            if !(s.is_finite() && s >= 0.0) {
                return Err(not_seconds(key, s));
            }
        }
    }
    Ok(())
}

/// The most embedding inputs in one request: OpenAI's embeddings endpoint takes at most
/// 2048, and vLLM and llama.cpp batch no more than that either.
pub const MAX_INPUTS: usize = 2048;

/// Embedding inputs: at least one, at most [`MAX_INPUTS`].
fn inputs(list: &[String]) -> Result<(), String> {
    if list.is_empty() {
        return Err("`inputs` is empty: an embeddings request needs at least one input".into());
    }
    if list.len() > MAX_INPUTS {
        return Err(format!(
            "`inputs` holds {} texts; one request takes at most {MAX_INPUTS}",
            list.len()
        ));
    }
    Ok(())
}

/// The most headers one request may add: more is a scenario bug, and servers refuse
/// requests with too many (hyper's default limit on a request is 100).
pub const MAX_HEADERS: usize = 64;
/// The longest header value, bytes: servers refuse larger header blocks (8 KiB is
/// nginx's default `large_client_header_buffers` line).
pub const MAX_HEADER_VALUE: usize = 8 << 10;

/// A request's own headers: names that are HTTP tokens, values that cannot split the
/// header block (no CR, LF or NUL) and are bounded in size.
fn headers(list: &[(String, String)]) -> Result<(), String> {
    if list.len() > MAX_HEADERS {
        return Err(format!(
            "`headers` holds {} headers; a request may add at most {MAX_HEADERS}",
            list.len()
        ));
    }
    for (name, value) in list {
        if name.is_empty() || !name.bytes().all(is_token_char) {
            return Err(format!(
                "header name {name:?} is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
            ));
        }
        if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(format!(
                "the value of header `{name}` holds a line break or NUL"
            ));
        }
        if value.len() > MAX_HEADER_VALUE {
            return Err(format!(
                "the value of header `{name}` is {} bytes; at most {MAX_HEADER_VALUE}",
                value.len()
            ));
        }
    }
    Ok(())
}

/// `tchar` of RFC 9110, section 5.6.2.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A cancel that can fire: a token count above 0, a time that is finite and above 0, and
/// at least one of them.
fn cancel(c: &Cancel) -> Result<(), String> {
    if c.after_tokens.is_none() && c.after_ms.is_none() {
        return Err("`cancel` gives neither a token count nor a time".into());
    }
    if c.after_tokens == Some(0) {
        return Err(cancel_not_positive("cancel_after_tokens", 0));
    }
    if let Some(ms) = c.after_ms {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(cancel_not_positive("cancel_after_ms", ms));
        }
    }
    Ok(())
}

/// The message for a cancel count or time that is not above 0.
pub fn cancel_not_positive(key: &str, got: impl Display) -> String {
    format!("`{key}` must be a number above 0, got {got}")
}

/// The message for a `max_tokens` below 1.
pub fn max_tokens_not_positive(got: impl Display) -> String {
    format!("`max_tokens` must be a positive integer, got {got}")
}

/// The message for a request's `at` or `delay` that is not seconds >= 0.
pub fn not_seconds(key: &str, got: impl Display) -> String {
    format!("`{key}` must be a number of seconds >= 0, got {got}")
}

/// `arrival`: the gap before the next request, seconds >= 0.
pub fn gap(secs: f64) -> Result<f64, String> {
    if secs.is_finite() && secs >= 0.0 {
        Ok(secs)
    } else {
        Err(not_a_gap(secs))
    }
}

/// The message for an `arrival` answer that is not seconds >= 0.
pub fn not_a_gap(got: impl Display) -> String {
    format!("expected seconds >= 0, got {got}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::scenario::{ParamSpec, ParamValue};

    fn spec(arrival: ArrivalSpec) -> PhaseSpec {
        PhaseSpec {
            name: String::new(),
            arrival,
            max_concurrency: None,
            max_requests: None,
            max_duration: None,
            warmup: false,
            sessions: None,
            control: Default::default(),
            steady_window: None,
        }
    }

    #[test]
    fn a_named_steady_window_outside_its_phase_is_refused_in_one_line() {
        let named = |from_s: f64, to_s: f64, max_s: Option<u64>| PhaseSpec {
            steady_window: Some(NamedWindow { from_s, to_s }),
            max_duration: max_s.map(Duration::from_secs),
            ..spec(ArrivalSpec::Burst)
        };
        assert!(phase(0, named(10.0, 50.0, Some(60))).is_ok());
        assert!(phase(0, named(0.0, 60.0, Some(60))).is_ok());
        assert!(phase(0, named(10.0, 500.0, None)).is_ok());
        let err = phase(2, named(10.0, 70.0, Some(60))).unwrap_err();
        assert_eq!(
            err,
            "phase 2: `steady_window` from 10 s to 70 s lies outside the phase: it ends after the phase's `max_duration` (60 s)"
        );
        for (from, to) in [(-1.0, 5.0), (5.0, 5.0), (9.0, 3.0), (0.0, f64::NAN)] {
            let err = phase(1, named(from, to, None)).unwrap_err();
            assert!(err.starts_with("phase 1: `steady_window` from "), "{err}");
            assert!(
                err.contains("lies outside the phase") && !err.contains('\n'),
                "{err}"
            );
        }
    }

    fn request_of(prompt: Prompt, max_tokens: u64) -> RequestSpec {
        RequestSpec::new(prompt, max_tokens)
    }

    #[test]
    fn a_closed_loop_of_no_request_is_refused_however_it_is_written() {
        let e = phase(2, spec(ArrivalSpec::Closed { concurrency: 0 })).unwrap_err();
        assert_eq!(
            e,
            "phase 2: a closed loop needs at least 1 request in flight, got 0"
        );
        for width in [0.0, 0.4, -3.0, f64::NAN, f64::NEG_INFINITY] {
            let e = closed_width(2, width).unwrap_err();
            assert!(
                e.starts_with("phase 2: a closed loop needs at least 1"),
                "{e}"
            );
        }
        assert_eq!(closed_width(0, 0.5), Ok(1));
        assert_eq!(closed_width(0, 2.6), Ok(3));
    }

    #[test]
    fn phases_get_names_and_positive_rates() {
        let p = phase(0, spec(ArrivalSpec::Poisson { rate: 2.0 })).unwrap();
        assert_eq!(p.name, "phase 1");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = phase(1, spec(ArrivalSpec::Constant { rate: bad })).unwrap_err();
            assert_eq!(e, not_positive(1, "rate", bad));
        }
        let gamma = ArrivalSpec::Gamma {
            rate: 1.0,
            burstiness: 0.0,
        };
        assert!(phase(0, spec(gamma)).unwrap_err().contains("`burstiness`"));
        let capped = PhaseSpec {
            max_concurrency: Some(0),
            ..spec(ArrivalSpec::Burst)
        };
        assert!(phase(0, capped).unwrap_err().contains("`max_concurrency`"));
        assert!(max_duration(0, -1.0).is_err());
        let huge = max_duration(0, 1e300).unwrap_err();
        assert!(
            huge.contains("of 1e300 s is too large") && huge.contains("at most 1000000000 s"),
            "{huge}"
        );
        assert!(max_duration(0, f64::INFINITY)
            .unwrap_err()
            .contains("too large"));
        assert!(max_duration(0, f64::NAN).unwrap_err().contains(">= 0"));
        assert_eq!(max_duration(0, 1e9), Ok(Duration::from_secs(1_000_000_000)));
        assert_eq!(max_duration(0, 1.5), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn requests_need_tokens_messages_and_real_times() {
        let ok = request_of(Prompt::Text("hi".into()), 1);
        assert_eq!(request(&ok), Ok(()));
        assert_eq!(
            request(&request_of(Prompt::Text("hi".into()), 0)),
            Err(max_tokens_not_positive(0))
        );
        assert!(request(&request_of(Prompt::Messages(vec![]), 4))
            .unwrap_err()
            .contains("`messages` is empty"));
        let late = RequestSpec {
            delay: Some(-0.5),
            ..ok.clone()
        };
        assert_eq!(request(&late), Err(not_seconds("delay", -0.5)));
        assert!(next(Next::Wait, false).unwrap_err().contains("on-response"));
        assert_eq!(next(Next::Wait, true), Ok(Next::Wait));
        assert_eq!(gap(f64::NAN), Err(not_a_gap(f64::NAN)));
    }

    #[test]
    fn request_headers_must_be_tokens_with_safe_bounded_values() {
        let with = |headers: Vec<(&str, &str)>| RequestSpec {
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..request_of(Prompt::Text("hi".into()), 1)
        };
        assert_eq!(
            request(&with(vec![("x-session-id", "a b"), ("X-Tenant_1", "")])),
            Ok(())
        );
        for bad in ["", "x tenant", "x:y", "caf\u{e9}", "a\nb"] {
            let e = request(&with(vec![(bad, "v")])).unwrap_err();
            assert!(e.contains("not an HTTP token"), "{bad:?}: {e}");
        }
        for bad in ["a\r\nInjected: 1", "a\nb", "a\0b"] {
            let e = request(&with(vec![("x-a", bad)])).unwrap_err();
            assert!(e.contains("line break or NUL"), "{bad:?}: {e}");
        }
        let long = "v".repeat(MAX_HEADER_VALUE + 1);
        assert!(request(&with(vec![("x-a", &long)]))
            .unwrap_err()
            .contains("at most 8192"));
        let fits = "v".repeat(MAX_HEADER_VALUE);
        assert_eq!(request(&with(vec![("x-a", &fits)])), Ok(()));
        let many: Vec<(&str, &str)> = vec![("x-a", "1"); MAX_HEADERS + 1];
        assert!(request(&with(many)).unwrap_err().contains("at most 64"));
        assert_eq!(request(&with(vec![("x-a", "1"); MAX_HEADERS])), Ok(()));
    }

    #[test]
    fn a_cancel_must_be_able_to_fire() {
        let with = |after_tokens, after_ms| RequestSpec {
            cancel: Some(Cancel {
                after_tokens,
                after_ms,
            }),
            ..request_of(Prompt::Text("hi".into()), 8)
        };
        assert_eq!(request(&with(Some(5), None)), Ok(()));
        assert_eq!(request(&with(None, Some(0.5))), Ok(()));
        assert_eq!(request(&with(Some(1), Some(250.0))), Ok(()));
        assert_eq!(
            request(&with(Some(0), None)),
            Err(cancel_not_positive("cancel_after_tokens", 0))
        );
        for ms in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                request(&with(None, Some(ms))),
                Err(cancel_not_positive("cancel_after_ms", ms))
            );
        }
        assert!(request(&with(None, None)).unwrap_err().contains("neither"));
    }

    #[test]
    fn embedding_inputs_are_a_bounded_non_empty_batch() {
        let inputs = |n: usize| request_of(Prompt::Inputs(vec!["text".into(); n]), 1);
        assert_eq!(request(&inputs(1)), Ok(()));
        assert_eq!(request(&inputs(MAX_INPUTS)), Ok(()));
        assert!(request(&inputs(0))
            .unwrap_err()
            .contains("`inputs` is empty"));
        assert!(request(&inputs(MAX_INPUTS + 1))
            .unwrap_err()
            .contains("at most 2048"));
    }

    #[test]
    fn descriptions_need_a_name_and_distinct_usable_parameters() {
        let param = |name: &str, default: ParamValue| ParamSpec {
            name: name.into(),
            default,
            help: String::new(),
        };
        let described = |name: &str, params: Vec<ParamSpec>| Description {
            name: name.into(),
            description: String::new(),
            params,
            thresholds: vec![],
        };
        assert!(description(&described(" ", vec![])).is_err());
        let twice = vec![
            param("n", ParamValue::Int(1)),
            param("n", ParamValue::Int(2)),
        ];
        assert!(description(&described("s", twice))
            .unwrap_err()
            .contains("declared twice"));
        let nan = vec![param("x", ParamValue::Float(f64::NAN))];
        assert!(description(&described("s", nan))
            .unwrap_err()
            .contains("finite"));
        let fine = vec![param("x", ParamValue::Float(0.5))];
        assert_eq!(description(&described("s", fine)), Ok(()));
    }

    #[test]
    fn a_sessions_wait_is_at_most_the_longest_phase() {
        let send = |after: f64| Step::Send {
            request: Box::new(request_of(Prompt::Text("x".into()), 4)),
            after,
        };
        assert!(step(send(MAX_PHASE_SECS)).is_ok());
        let err = step(send(1e18)).unwrap_err();
        assert!(err.contains("`after` of 1e18 s is too long"), "{err}");
        assert!(err.contains("at most 1000000000 s"), "{err}");
    }
}
