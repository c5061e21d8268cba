//! WIT values to the contract's types. The WIT types already fix the shape; what is left
//! here is the JSON text of `extra-json`. The ranges (a rate above 0, a closed loop of at
//! least one request) are checked by `scenario::validate`, the rules Rhai scripts follow too.

use super::bindings::bench::scenario::types as wit;
use crate::scenario::params::{ParamSpec, ParamValue};
use crate::scenario::spec::{
    ArrivalSpec, LatencySummary, Next, Outcome, PhaseReport, PhaseSpec, Prompt, RequestSpec,
    Snapshot,
};
use crate::scenario::{validate, Description};

pub fn description(d: wit::Description) -> Result<Description, String> {
    let params = d
        .params
        .into_iter()
        .map(|p| ParamSpec {
            name: p.name,
            default: match p.default {
                wit::Value::Integer(v) => ParamValue::Int(v),
                wit::Value::Number(v) => ParamValue::Float(v),
                wit::Value::Boolean(v) => ParamValue::Bool(v),
                wit::Value::Text(v) => ParamValue::Str(v),
            },
            help: p.help,
        })
        .collect();
    let description = Description {
        name: d.name,
        description: d.description,
        params,
        thresholds: d.thresholds,
    };
    validate::description(&description).map(|()| description)
}

pub fn phase(i: usize, p: wit::Phase) -> Result<PhaseSpec, String> {
    let arrival = match p.arrival {
        wit::Arrival::Burst => ArrivalSpec::Burst,
        wit::Arrival::Poisson(rate) => ArrivalSpec::Poisson { rate },
        wit::Arrival::Gamma(g) => ArrivalSpec::Gamma {
            rate: g.rate,
            burstiness: g.burstiness,
        },
        wit::Arrival::Constant(rate) => ArrivalSpec::Constant { rate },
        wit::Arrival::Closed(concurrency) => ArrivalSpec::Closed { concurrency },
        wit::Arrival::Custom => ArrivalSpec::Custom,
    };
    let max_duration = match p.max_duration {
        None => None,
        Some(secs) => Some(validate::max_duration(i, secs)?),
    };
    let spec = PhaseSpec {
        name: p.name,
        arrival,
        max_concurrency: p.max_concurrency,
        max_requests: p.max_requests,
        max_duration,
        warmup: p.warmup,
    };
    validate::phase(i, spec)
}

/// A `next` answer; its rules are checked by the caller with [`validate::next`].
pub fn next(n: wit::Next) -> Result<Next, String> {
    Ok(match n {
        wit::Next::Request(r) => Next::Request(Box::new(request(r)?)),
        wit::Next::Wait => Next::Wait,
        wit::Next::Done => Next::Done,
    })
}

fn request(r: wit::Request) -> Result<RequestSpec, String> {
    let prompt = match r.prompt {
        wit::Prompt::Text(t) => Prompt::Text(t),
        wit::Prompt::Tokens(ids) => Prompt::Tokens(ids),
        wit::Prompt::Messages(list) => Prompt::Messages(
            list.into_iter()
                .map(|m| serde_json::json!({ "role": m.role, "content": m.content }))
                .collect(),
        ),
    };
    let extra = match r.extra_json {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(_) => return Err("`extra-json` must be the text of a JSON object".into()),
            Err(e) => return Err(format!("`extra-json` is not valid JSON: {e}")),
        },
    };
    Ok(RequestSpec {
        prompt,
        max_tokens: r.max_tokens,
        ignore_eos: r.ignore_eos,
        stream: r.stream,
        extra,
        tag: r.tag,
        session: r.session,
        at: r.at,
        delay: r.delay,
        input_tokens: r.input_tokens,
        headers: vec![],
        cancel: None,
        target: None,
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
