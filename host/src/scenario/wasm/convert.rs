//! WIT values to the contract's types. The WIT types already fix the shape; what is left
//! to check are the ranges and the JSON texts, with errors naming the field.

use super::bindings::bench::scenario::types as wit;
use crate::scenario::params::{ParamSpec, ParamValue};
use crate::scenario::spec::{
    ArrivalSpec, LatencySummary, Outcome, PhaseReport, PhaseSpec, Prompt, RequestSpec, Snapshot,
};
use crate::scenario::Description;

pub fn description(d: wit::Description) -> Result<Description, String> {
    if d.name.trim().is_empty() {
        return Err("`name` is empty".into());
    }
    let mut params: Vec<ParamSpec> = Vec::with_capacity(d.params.len());
    for p in d.params {
        if p.name.trim().is_empty() {
            return Err("a parameter has an empty `name`".into());
        }
        if params.iter().any(|q| q.name == p.name) {
            return Err(format!("parameter `{}` is declared twice", p.name));
        }
        let default = match p.default {
            wit::Value::Integer(v) => ParamValue::Int(v),
            wit::Value::Number(v) if v.is_finite() => ParamValue::Float(v),
            wit::Value::Number(v) => {
                return Err(format!(
                    "parameter `{}` has a default that is not a finite number ({v})",
                    p.name
                ))
            }
            wit::Value::Boolean(v) => ParamValue::Bool(v),
            wit::Value::Text(v) => ParamValue::Str(v),
        };
        params.push(ParamSpec {
            name: p.name,
            default,
            help: p.help,
        });
    }
    Ok(Description {
        name: d.name,
        description: d.description,
        params,
        thresholds: d.thresholds,
    })
}

pub fn phase(i: usize, p: wit::Phase) -> Result<PhaseSpec, String> {
    let positive = |what: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(format!(
                "phase {i}: arrival `{what}` must be a positive number, got {v}"
            ))
        }
    };
    let arrival = match p.arrival {
        wit::Arrival::Burst => ArrivalSpec::Burst,
        wit::Arrival::Poisson(rate) => ArrivalSpec::Poisson {
            rate: positive("rate", rate)?,
        },
        wit::Arrival::Gamma(g) => ArrivalSpec::Gamma {
            rate: positive("rate", g.rate)?,
            burstiness: positive("burstiness", g.burstiness)?,
        },
        wit::Arrival::Constant(rate) => ArrivalSpec::Constant {
            rate: positive("rate", rate)?,
        },
        wit::Arrival::Closed(0) => {
            return Err(format!(
                "phase {i}: a closed loop needs at least 1 request in flight"
            ))
        }
        wit::Arrival::Closed(n) => ArrivalSpec::Closed { concurrency: n },
        wit::Arrival::Custom => ArrivalSpec::Custom,
    };
    if p.max_concurrency == Some(0) {
        return Err(format!("phase {i}: `max-concurrency` must be at least 1"));
    }
    let max_duration = match p.max_duration {
        None => None,
        Some(s) if crate::scenario::params::duration_of(s).is_some() => {
            crate::scenario::params::duration_of(s)
        }
        Some(s) => {
            return Err(format!(
                "phase {i}: `max-duration` must be seconds >= 0, got {s}"
            ))
        }
    };
    Ok(PhaseSpec {
        name: if p.name.is_empty() {
            format!("phase {}", i + 1)
        } else {
            p.name
        },
        arrival,
        max_concurrency: p.max_concurrency,
        max_requests: p.max_requests,
        max_duration,
        warmup: p.warmup,
    })
}

pub fn request(r: wit::Request) -> Result<RequestSpec, String> {
    let prompt = match r.prompt {
        wit::Prompt::Text(t) => Prompt::Text(t),
        wit::Prompt::Tokens(ids) => Prompt::Tokens(ids),
        wit::Prompt::Messages(list) if list.is_empty() => {
            return Err("`prompt`: the list of messages is empty".into())
        }
        wit::Prompt::Messages(list) => Prompt::Messages(
            list.into_iter()
                .map(|m| serde_json::json!({ "role": m.role, "content": m.content }))
                .collect(),
        ),
    };
    if r.max_tokens == 0 {
        return Err("`max-tokens` must be at least 1, got 0".into());
    }
    let extra = match r.extra_json {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(_) => return Err("`extra-json` must be the text of a JSON object".into()),
            Err(e) => return Err(format!("`extra-json` is not valid JSON: {e}")),
        },
    };
    let secs = |what: &str, v: Option<f64>| match v {
        Some(s) if !(s.is_finite() && s >= 0.0) => Err(format!(
            "`{what}` must be a number of seconds >= 0, got {s}"
        )),
        v => Ok(v),
    };
    Ok(RequestSpec {
        prompt,
        max_tokens: r.max_tokens,
        ignore_eos: r.ignore_eos,
        stream: r.stream,
        extra,
        tag: r.tag,
        session: r.session,
        at: secs("at", r.at)?,
        delay: secs("delay", r.delay)?,
        input_tokens: r.input_tokens,
    })
}

pub fn outcome(o: &Outcome) -> wit::Outcome {
    wit::Outcome {
        phase: o.phase as u32,
        index: o.index,
        tag: o.tag.clone(),
        session: o.session.clone(),
        ok: o.ok,
        error: o.error.clone(),
        text: o.text.clone(),
        ttft_ms: o.ttft_ms,
        e2el_ms: o.e2el_ms,
        input_tokens: o.input_tokens,
        output_tokens: o.output_tokens,
    }
}

pub fn snapshot(s: &Snapshot) -> wit::Snapshot {
    wit::Snapshot {
        phase: s.phase as u32,
        elapsed: s.elapsed_s,
        sent: s.sent,
        completed: s.completed,
        failed: s.failed,
        in_flight: s.in_flight,
        output_tokens: s.output_tokens,
        ttft_p50_ms: s.ttft_p50_ms,
        ttft_p99_ms: s.ttft_p99_ms,
        e2el_p99_ms: s.e2el_p99_ms,
    }
}

/// A finished phase for `next-phase`.
pub fn phase_summary(r: &PhaseReport) -> wit::PhaseSummary {
    let latency = |l: &LatencySummary| wit::Latency {
        mean: l.mean,
        p50: l.p50,
        p90: l.p90,
        p99: l.p99,
    };
    wit::PhaseSummary {
        index: u32::try_from(r.index).unwrap_or(u32::MAX),
        name: r.name.clone(),
        warmup: r.warmup,
        request_rate: r.request_rate,
        max_concurrency: r.max_concurrency,
        duration: r.duration_s,
        completed: r.completed,
        failed: r.failed,
        request_throughput: r.request_throughput,
        output_throughput: r.output_throughput,
        goodput: r.goodput,
        ttft: latency(&r.ttft),
        tpot: latency(&r.tpot),
        itl: latency(&r.itl),
        e2el: latency(&r.e2el),
    }
}
