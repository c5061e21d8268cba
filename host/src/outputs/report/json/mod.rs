//! result.json, built as the types of [`super::result_file`] from a [`RunReport`]: the
//! `vllm bench serve --save-result` keys of each measured phase (the `result_json` of vLLM's `vllm/benchmarks/serve.py`), plus ours
//! under "runner". The metrics' keys come from the metric catalogue.
//!
//! The file is written through a `serde_json::Value`, whose map (serde_json is built
//! without `preserve_order`) puts keys in alphabetical order; vLLM's readers index by key.
//!
//! vLLM's per-request arrays (`latencies`, `queue_times`, and the `--save-detailed` ones)
//! are not written: the statistics are streaming (memory stays flat however long the run),
//! so no per-request latency is kept. The JSON Lines record file has every request instead.

pub mod result_file;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use self::result_file::{
    ClockResult, DistributionResult, Infinite, MultiPhaseResult, OtlpResult, PackageId,
    PerSessionResult, RequestRate, ResultFile, ResultJsonPhase, RunSections, RunnerMetrics,
    RunnerSection, SessionsResult, ShardResult, ShardsResult, SinglePhaseResult, SteadyStateResult,
    TagResult, TargetResult, TokenAccountingResult, TurnResult, VerdictResult, VllmMetrics,
    WarmupPhase,
};
use super::run_report::RunReport;
use super::RunHeader;
use crate::measuring::metrics::catalogue::{
    self, percentile_key, InResult, Scalar, LATENCIES, SCALARS,
};
use crate::measuring::metrics::sessions::PerSession;
use crate::measuring::metrics::{Distribution, PhaseSummary, SessionsSummary, StampSources};

/// vLLM's backend name for our API: "openai" (completions) or "openai-chat" (chat).
pub fn vllm_backend(api: &str) -> &'static str {
    if api == "chat" {
        "openai-chat"
    } else {
        "openai"
    }
}

/// result.json of a report: one measured phase's keys at the top level, or several in a
/// `phases` array; warm-up phases under `warmup_phases` with their counts only; the
/// scenario's notes under `scenario_result`; the thresholds' verdicts when any were given;
/// a merged run's shards under `shards`.
fn result_file(r: &RunReport) -> ResultFile {
    let h = &r.header;
    let mut phases: Vec<ResultJsonPhase> = r
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .map(|p| {
            let mut result = phase_result(h, &p.summary, None);
            result.runner.server_metrics.clone_from(&p.server);
            result.runner.ended.clone_from(&p.ended);
            result
        })
        .collect();
    let run = run_sections(r);
    if phases.len() == 1 {
        ResultFile::Phase(Box::new(SinglePhaseResult {
            phase: phases.remove(0),
            run,
        }))
    } else {
        ResultFile::Phases(Box::new(MultiPhaseResult {
            scenario: h.scenario.clone(),
            request_digest: r.request_digest().to_string(),
            phases,
            run,
        }))
    }
}

/// result.json as written: pretty, keys in alphabetical order, with a final newline.
pub fn render(r: &RunReport) -> String {
    let value = serde_json::to_value(result_file(r)).unwrap_or_default();
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

/// result.json of a series of repeated runs (`--repeat`).
pub fn render_series(series: &crate::outputs::report::series::RunSeries) -> String {
    let file = ResultFile::Series(Box::new(result_file::SeriesResult::of(series)));
    serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
}

/// The sections beside the phases' keys.
fn run_sections(r: &RunReport) -> RunSections {
    let warmup_phases = r
        .phases
        .iter()
        .filter(|p| p.warmup)
        .map(|p| WarmupPhase {
            phase: p.summary.name.clone(),
            completed: p.summary.completed,
            failed: p.summary.failed,
        })
        .collect();
    let verdicts = r.verdicts.iter().map(|v| VerdictResult {
        threshold: v.threshold.clone(),
        phase: v.phase.clone(),
        value: v.value,
        pass: v.pass,
    });
    RunSections {
        warmup_phases,
        scenario_result: notes_json(&r.notes),
        thresholds: r.thresholds_given.then(|| verdicts.collect()),
        shards: r.shards.as_ref().map(|s| ShardsResult {
            count: s.shards.len(),
            start_at: s.start_at.clone(),
            start_spread_ms: s.spread_ms(),
            request_digest: r.request_digest().to_string(),
            shards: s
                .shards
                .iter()
                .map(|s| ShardResult {
                    index: s.index,
                    clock_offset_ms: s.clock_offset_ms,
                    started_unix_ns: s.started_unix_ns,
                    scenario_result: notes_json(&s.notes),
                })
                .collect(),
        }),
        otlp: r.otlp.as_ref().map(|o| OtlpResult {
            url: o.url.clone(),
            spans: o.spans,
            exported: o.exported,
            dropped: o.lost(),
            dropped_queue_full: o.dropped,
            dropped_receiver: o.failed,
            dropped_unflushed: o.unflushed,
            receiver_error: o.first_error.clone(),
        }),
    }
}

/// The scenario's notes as `scenario_result` holds them.
fn notes_json(
    notes: &[(String, crate::workloads::scenario::NoteValue)],
) -> BTreeMap<String, Value> {
    notes
        .iter()
        .map(|(k, v)| (k.clone(), v.to_json()))
        .collect()
}

/// One measured phase's object, dated `date` (`None` = now, local time,
/// `YYYYmmdd-HHMMSS`).
fn phase_result(h: &RunHeader, s: &PhaseSummary, date: Option<&str>) -> ResultJsonPhase {
    let date = date.map_or_else(
        || chrono::Local::now().format("%Y%m%d-%H%M%S").to_string(),
        str::to_string,
    );
    let backend = vllm_backend(&h.api).to_string();
    ResultJsonPhase {
        date,
        endpoint_type: backend.clone(),
        backend,
        label: None,
        model_id: h.model.clone(),
        tokenizer_id: h.tokenizer.clone(),
        num_prompts: s.completed + s.failed,
        request_rate: match s.request_rate {
            Some(r) if r.is_finite() => RequestRate::Finite(r),
            _ => RequestRate::Infinite(Infinite::Inf),
        },
        burstiness: s.burstiness,
        max_concurrency: s.max_concurrency,
        rtfx: 0.0,
        phase: s.name.clone(),
        metrics: vllm_metrics(s),
        runner: runner_section(h, s),
    }
}

/// A catalogued scalar's JSON value: an integer for counts, `null` when absent.
fn scalar_value(m: &Scalar, s: &PhaseSummary) -> Value {
    match (m.value)(s) {
        Some(v) if m.unit.is_count() => json!(v as u64),
        Some(v) => json!(v),
        None => Value::Null,
    }
}

fn vllm_metrics(s: &PhaseSummary) -> VllmMetrics {
    let mut m: BTreeMap<String, Value> = SCALARS
        .iter()
        .filter(|m| m.in_result == InResult::Vllm)
        .map(|m| (m.key.to_string(), scalar_value(m, s)))
        .collect();
    for l in LATENCIES.iter().filter(|l| l.in_result == InResult::Vllm) {
        let d = (l.distribution)(s);
        let key = |stat: &str| catalogue::latency_key(stat, l);
        m.insert(key("mean"), json!(d.mean));
        m.insert(key("median"), json!(d.median));
        m.insert(key("std"), json!(d.std));
        for &p in &s.percentiles {
            m.insert(
                key(&percentile_key(p)),
                json!(d.percentile(p).unwrap_or(0.0)),
            );
        }
    }
    VllmMetrics(m)
}

fn runner_metrics(s: &PhaseSummary) -> RunnerMetrics {
    let mut m: BTreeMap<String, Value> = SCALARS
        .iter()
        .filter(|m| m.in_result == InResult::Runner)
        .map(|m| (m.key.to_string(), scalar_value(m, s)))
        .collect();
    for l in LATENCIES.iter().filter(|l| l.in_result == InResult::Runner) {
        let d = distribution_result((l.distribution)(s));
        m.insert(l.key.to_string(), json!(d));
    }
    RunnerMetrics(m)
}

fn runner_section(h: &RunHeader, s: &PhaseSummary) -> RunnerSection {
    let t = &s.token_accounting;
    let kinds = || {
        s.failures_by_kind
            .iter()
            .map(|c| (c.kind.key().to_string(), c))
    };
    RunnerSection {
        scenario: h.scenario.clone(),
        description: h.description.clone(),
        params: h.params.iter().cloned().collect(),
        seed: h.seed,
        target: h.target.clone(),
        twin: h.twin.clone(),
        sim_overrides: h.sim_overrides.clone(),
        virtual_time: h.virtual_time,
        api: h.api.clone(),
        request_digest: h.request_digest.clone(),
        trace_id: h.trace_id.clone(),
        request_stream_depends_on: h.stream_depends_on.clone(),
        runner_version: h.runner_version.clone(),
        package: h.package.as_ref().map(|(name, version)| PackageId {
            name: name.clone(),
            version: version.clone(),
        }),
        scenario_digest: h.scenario_digest.clone(),
        workload_id: h.workload_id(),
        wit_version: h.wit_version.clone(),
        phase: s.name.clone(),
        percentiles: s.percentiles.clone(),
        goodput_slo: s.slo.map(|slo| slo.to_string()),
        total_chunks: s.total_chunks,
        token_accounting: TokenAccountingResult {
            counted_by: t.source(s.completed).to_string(),
            usage_requests: t.usage_requests,
            usage_tokens: t.usage_tokens,
            tokenizer_tokens: t.tokenizer_tokens,
            chunks: t.chunks,
        },
        peak_concurrency: s.peak_concurrency,
        failures_by_kind: kinds().map(|(k, c)| (k, c.count)).collect(),
        first_error_by_kind: kinds().map(|(k, c)| (k, c.first_message.clone())).collect(),
        retried_requests: s.retried,
        client_bound: s.client_bound,
        clock: clock_result(&s.clock),
        metrics: runner_metrics(s),
        tags: s.tags.iter().map(tag_result).collect(),
        cancelled_requests: s.cancelled,
        targets: target_results(s, &h.targets),
        server_metrics: None,
        ended: None,
        sessions: s.sessions.as_ref().map(sessions_result),
        prefix_cache: s.prefix_cache.clone(),
        steady_state: s.steady_state.as_ref().map(|st| SteadyStateResult {
            window: st.window.clone(),
            request_throughput: st.request_throughput,
            output_throughput: st.output_throughput,
            total_token_throughput: st.total_token_throughput,
            ttft: distribution_result(&st.ttft),
            tpot: distribution_result(&st.tpot),
            e2el: distribution_result(&st.e2el),
        }),
    }
}

/// result.json's `runner.sessions`.
fn sessions_result(s: &SessionsSummary) -> SessionsResult {
    let per = |p: &PerSession| PerSessionResult {
        total: p.total,
        mean: p.mean,
        max: p.max,
    };
    SessionsResult {
        sessions: s.sessions,
        root_sessions: s.root_sessions,
        child_sessions: s.child_sessions,
        requests: s.requests,
        failed: s.failed,
        duration: distribution_result(&s.duration),
        requests_per_session: per(&s.requests_per_session),
        tool_calls_per_session: per(&s.tool_calls_per_session),
        tool_wait_ms: per(&s.tool_wait_ms),
        think_ms: per(&s.think_ms),
        tool_call_requests: s.tool_call_requests,
        tool_calls: s.tool_calls,
        tool_call_tokens: s.tool_call_tokens,
        time_to_first_tool_call: distribution_result(&s.time_to_first_tool_call),
        cache_sessions: s.cache_sessions,
        mean_cache_hit_share: s.mean_cache_hit_share,
        turns: s
            .turns
            .iter()
            .map(|t| TurnResult {
                turn: t.turn,
                requests: t.requests,
                completed: t.completed,
                mean_input_tokens: t.mean_input_tokens,
                ttft: distribution_result(&t.ttft),
            })
            .collect(),
        overflow_sessions: s.overflow_sessions,
        overflow_requests: s.overflow_requests,
        overflow_turn_requests: s.overflow_turn_requests,
    }
}

fn tag_result(t: &crate::measuring::metrics::TagSummary) -> TagResult {
    TagResult {
        tag: t.tag.clone(),
        completed: t.completed,
        failed: t.failed,
        mean_input_tokens: t.mean_input_tokens,
        mean_output_tokens: t.mean_output_tokens,
        ttft: distribution_result(&t.ttft),
        tpot: distribution_result(&t.tpot),
        e2el: distribution_result(&t.e2el),
    }
}

/// result.json's per-target rows.
pub(super) fn target_results(s: &PhaseSummary, urls: &[String]) -> Vec<TargetResult> {
    s.targets
        .iter()
        .filter_map(|t| {
            let index = super::table::index_of(t)?;
            Some(TargetResult {
                target: index,
                url: urls.get(index).cloned().unwrap_or_default(),
                completed: t.completed,
                failed: t.failed,
                cancelled: t.cancelled,
                mean_input_tokens: t.mean_input_tokens,
                mean_output_tokens: t.mean_output_tokens,
                ttft: distribution_result(&t.ttft),
                tpot: distribution_result(&t.tpot),
                e2el: distribution_result(&t.e2el),
            })
        })
        .collect()
}

/// result.json's `runner.clock`.
fn clock_result(c: &StampSources) -> ClockResult {
    ClockResult {
        kernel_chunks: c.kernel_chunks,
        read_chunks: c.read_chunks,
        socket_write_sends: c.socket_write_sends,
        handoff_sends: c.handoff_sends,
        send_write: distribution_result(&c.send_write),
    }
}

/// `d` under result.json's keys: `mean_ms`, `median_ms`, ... and one `p{p}_ms` per percentile.
fn distribution_result(d: &Distribution) -> DistributionResult {
    DistributionResult {
        count: d.count,
        mean_ms: d.mean,
        median_ms: d.median,
        std_ms: d.std,
        min_ms: d.min,
        max_ms: d.max,
        percentiles: d
            .percentiles
            .iter()
            .map(|&(p, v)| (format!("{}_ms", percentile_key(p)), v))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    use crate::measuring::metrics::{
        Chunk, ErrorKind, MetricsOptions, PhaseAccumulator, PhaseInfo, RequestError, RequestRecord,
    };

    fn clock_sources(kernel: u64, read: u64, writes: u64, handoffs: u64) -> StampSources {
        StampSources {
            kernel_chunks: kernel,
            read_chunks: read,
            socket_write_sends: writes,
            handoff_sends: handoffs,
            send_write: Distribution {
                count: writes,
                max: if writes > 0 { 0.040 } else { 0.0 },
                percentiles: vec![(99.0, if writes > 0 { 0.012 } else { 0.0 })],
                ..Distribution::default()
            },
        }
    }

    /// `s`'s object as if computed at `percentiles` (the summary carries them).
    fn phase_result(
        h: &RunHeader,
        s: &PhaseSummary,
        percentiles: &[f64],
        date: Option<&str>,
    ) -> ResultJsonPhase {
        let mut s = s.clone();
        s.percentiles = percentiles.to_vec();
        super::phase_result(h, &s, date)
    }

    fn header(api: &str) -> RunHeader {
        RunHeader {
            scenario: "s".into(),
            description: "d".into(),
            params: vec![("rate".into(), "4".into())],
            seed: 3,
            target: "http://x".into(),
            targets: vec![],
            model: "facebook/opt-6.7b".into(),
            api: api.into(),
            tokenizer: "facebook/opt-6.7b".into(),
            request_digest: Some("beef".into()),
            trace_id: None,
            stream_depends_on: vec![],
            runner_version: "0.1.0".into(),
            package: None,
            scenario_digest: "cafe".into(),
            wit_version: "0.1.0".into(),
            twin: None,
            sim_overrides: Default::default(),
            virtual_time: false,
        }
    }

    fn summary(goodput: bool) -> PhaseSummary {
        let opts = MetricsOptions {
            percentiles: vec![50.0, 99.9],
            goodput: goodput.then(|| "ttft:1000".parse().unwrap()),
        };
        let mut acc = PhaseAccumulator::new(&opts);
        let ms = 1_000_000;
        acc.record(&RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase: 0,
            index: 0,
            tag: None,
            scheduled_ns: 0,
            sent_ns: 0,
            first_byte_ns: Some(90 * ms),
            chunks: vec![
                Chunk {
                    t_ns: 100 * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
                Chunk {
                    t_ns: 300 * ms,
                    tokens: 2,
                    client_delay_ns: None,
                },
            ],
            end_ns: 301 * ms,
            input_tokens: 5,
            output_tokens: 3,
            usage_output_tokens: Some(0),
            text_tokens: 0,
            warmup: false,
            http_status: Some(200),
            error: None,
            server_timings: None,
            reached: Default::default(),
            retried: false,
            send_write_ns: None,
            cancelled: false,
            target: None,
            answer: Default::default(),
            session: Default::default(),
        });
        acc.record(&RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase: 0,
            index: 1,
            tag: None,
            scheduled_ns: 0,
            sent_ns: 0,
            first_byte_ns: None,
            chunks: vec![],
            end_ns: 10 * ms,
            input_tokens: 5,
            output_tokens: 0,
            usage_output_tokens: None,
            text_tokens: 0,
            warmup: false,
            http_status: Some(500),
            error: Some(RequestError {
                kind: ErrorKind::Http5xx,
                message: "500".into(),
            }),
            server_timings: None,
            reached: Default::default(),
            retried: false,
            send_write_ns: None,
            cancelled: false,
            target: None,
            answer: Default::default(),
            session: Default::default(),
        });
        acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 2_000 * ms,
            max_concurrency: Some(8),
            request_rate: None,
            burstiness: Some(1.0),
            steady_window: None,
        })
    }

    /// vLLM's keys of a phase with latency percentiles `ps`, plus `phase` and `runner`, in
    /// the alphabetical order result.json has them.
    fn expected_keys(ps: &[&str]) -> Vec<String> {
        let mut expected: Vec<String> = [
            "date",
            "endpoint_type",
            "backend",
            "label",
            "model_id",
            "tokenizer_id",
            "num_prompts",
            "request_rate",
            "burstiness",
            "max_concurrency",
            "duration",
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "request_goodput",
            "output_throughput",
            "total_token_throughput",
            "max_output_tokens_per_s",
            "max_concurrent_requests",
            "rtfx",
            "phase",
            "runner",
        ]
        .map(String::from)
        .to_vec();
        for metric in ["ttft", "tpot", "itl", "e2el"] {
            for stat in ["mean", "median", "std"].iter().chain(ps) {
                expected.push(format!("{stat}_{metric}_ms"));
            }
        }
        expected.sort_unstable();
        expected
    }

    #[test]
    fn vllm_keys_and_values() {
        let s = summary(false);
        let m = object(phase_result(
            &header("chat"),
            &s,
            &[50.0, 99.9],
            Some("20260101-120000"),
        ));
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(keys, expected_keys(&["p50", "p99.9"]));

        assert_eq!(m["date"], json!("20260101-120000"));
        assert_eq!(m["backend"], json!("openai-chat"));
        assert_eq!(m["endpoint_type"], json!("openai-chat"));
        assert_eq!(m["label"], Value::Null);
        assert_eq!(m["model_id"], json!("facebook/opt-6.7b"));
        assert_eq!(m["num_prompts"], json!(2));
        assert_eq!(m["request_rate"], json!("inf"));
        assert_eq!(m["burstiness"], json!(1.0));
        assert_eq!(m["max_concurrency"], json!(8));
        assert_eq!(m["duration"], json!(2.0));
        assert_eq!((&m["completed"], &m["failed"]), (&json!(1), &json!(1)));
        assert_eq!(m["total_input_tokens"], json!(5));
        assert_eq!(m["total_output_tokens"], json!(3));
        assert_eq!(m["request_throughput"], json!(0.5));
        assert_eq!(m["request_goodput"], Value::Null);
        assert_eq!(m["output_throughput"], json!(1.5));
        assert_eq!(m["total_token_throughput"], json!(4.0));
        assert_eq!(m["max_output_tokens_per_s"], json!(3.0));
        assert_eq!(m["max_concurrent_requests"], json!(2.0));
        assert_eq!(m["mean_ttft_ms"], json!(100.0));
        assert_eq!(m["median_e2el_ms"], json!(300.0));
        assert_eq!(m["p99.9_itl_ms"], json!(200.0));
        assert_eq!(m["std_tpot_ms"], json!(0.0));
        assert_eq!(m["mean_tpot_ms"], json!(100.0));

        let r = &m["runner"];
        assert_eq!(r["scenario"], json!("s"));
        assert_eq!(r["params"], json!({"rate": "4"}));
        assert_eq!(r["seed"], json!(3));
        assert_eq!(r["request_digest"], json!("beef"));
        assert_eq!(r["failures_by_kind"], json!({"http_5xx": 1}));
        assert_eq!(r["first_error_by_kind"], json!({"http_5xx": "500"}));
        assert_eq!(r["itl_per_token"]["mean_ms"], json!(100.0));
        assert_eq!(r["itl_per_token"]["count"], json!(2));
        assert_eq!(r["token_latency"]["p50_ms"], json!(100.0));
        assert_eq!(r["send_lateness"]["p99_ms"], json!(0.0));
        assert_eq!(r["mean_tokens_per_chunk"], json!(1.5));
        assert_eq!(r["client_bound"], json!(false));
        assert_eq!(r["goodput_slo"], Value::Null);
        // No kernel time on any chunk: an empty client delay, P50 and P99 at 0.
        assert_eq!(r["client_delay"]["count"], json!(0));
        assert_eq!(r["client_delay"]["p99_ms"], json!(0.0));
        assert_eq!(r["client_delay"]["p50_ms"], json!(0.0));
        assert_eq!(
            (&r["clock"]["kernel_chunks"], &r["clock"]["read_chunks"]),
            (&json!(0), &json!(2))
        );
        assert_eq!(
            (
                &r["clock"]["socket_write_sends"],
                &r["clock"]["handoff_sends"]
            ),
            (&json!(0), &json!(2))
        );
        assert_eq!(r["clock"]["send_write"]["p99_ms"], json!(0.0));
    }

    #[test]
    fn goodput_rate_and_backend() {
        let mut s = summary(true);
        s.request_rate = Some(4.0);
        let m = object(phase_result(&header("completions"), &s, &[99.0], None));
        assert_eq!(m["backend"], json!("openai"));
        assert_eq!(m["request_goodput"], json!(0.5));
        assert_eq!(m["request_rate"], json!(4.0));
        assert_eq!(m["completed"], json!(1));
        // 99 was not computed for these latencies: 0, never null or missing
        assert_eq!(m["p99_ttft_ms"], json!(0.0));
        assert_eq!(m["runner"]["goodput_slo"], json!("ttft:1000"));
        let date = m["date"].as_str().unwrap();
        assert_eq!(date.len(), 15);
        assert_eq!(&date[8..9], "-");
        // serialises
        assert!(serde_json::to_string(&m)
            .unwrap()
            .contains("\"p99_ttft_ms\":0.0"));
    }

    /// A metric added to the catalogue reaches every reader without another list to edit:
    /// result.json, thresholds, and `runner compare` when it is compared.
    #[test]
    fn every_catalogued_metric_reaches_its_readers() {
        use crate::measuring::metrics::catalogue::{LATENCIES, SCALARS};
        use crate::measuring::thresholds::Threshold;
        use crate::outputs::report::compare;
        let s = summary(true);
        let m = object(phase_result(&header("chat"), &s, &[99.0], None));
        let runner = m["runner"].as_object().expect("runner section");
        let other = m.clone();
        let rows = compare::rows(&m, &other);
        for metric in SCALARS {
            let threshold: Threshold = format!("{}<1", metric.key).parse().unwrap();
            assert_eq!(threshold.value(&s), (metric.value)(&s), "{}", metric.key);
            match metric.in_result {
                InResult::Vllm => assert!(m.contains_key(metric.key), "{}", metric.key),
                InResult::Runner => assert!(runner.contains_key(metric.key), "{}", metric.key),
                InResult::Derived => assert!(!m.contains_key(metric.key), "{}", metric.key),
            }
            let compared = rows.iter().any(|r| r.key == metric.key);
            assert_eq!(compared, metric.compared, "{}", metric.key);
        }
        for l in LATENCIES {
            let threshold: Threshold = format!("p99_{}_ms<1", l.key).parse().unwrap();
            assert_eq!(threshold.percentile(), Some(99.0));
            let key = catalogue::latency_key("mean", &l);
            match l.in_result {
                InResult::Vllm => assert!(m.contains_key(&key), "{key}"),
                _ => assert!(runner[l.key]["mean_ms"].is_number(), "{}", l.key),
            }
            assert_eq!(rows.iter().any(|r| r.key == key), l.compared, "{key}");
        }
    }

    /// A phase's object as result.json holds it.
    fn object(p: ResultJsonPhase) -> Map<String, Value> {
        match serde_json::to_value(p).unwrap() {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn the_result_object_carries_the_counts_and_the_write_tail() {
        let r = clock_result(&clock_sources(300, 100, 30, 10));
        assert_eq!(
            (
                r.kernel_chunks,
                r.read_chunks,
                r.socket_write_sends,
                r.handoff_sends
            ),
            (300, 100, 30, 10)
        );
        assert_eq!(r.send_write.percentiles.get("p99_ms"), Some(&0.012));
        assert_eq!(r.send_write.max_ms, 0.040);
    }

    #[test]
    fn sessions_sit_under_runner_only_for_a_session_phase() {
        let plain = object(phase_result(
            &header("chat"),
            &summary(false),
            &[99.0],
            None,
        ));
        assert!(plain["runner"].get("sessions").is_none());
        let mut s = summary(false);
        s.sessions = Some(crate::measuring::metrics::sessions::tests::example());
        let with = object(phase_result(&header("chat"), &s, &[99.0], None));
        let sessions = &with["runner"]["sessions"];
        assert_eq!(sessions["sessions"], 2);
        assert_eq!(sessions["child_sessions"], 1);
        assert_eq!(sessions["duration"]["mean_ms"], 822.5);
        assert_eq!(sessions["duration"]["p99_ms"], 490.0 + 0.99 * 665.0);
        assert_eq!(sessions["tool_wait_ms"]["total"], 400.0);
        assert_eq!(sessions["think_ms"]["mean"], 502.5);
        assert_eq!(sessions["tool_call_tokens"], 21);
        assert_eq!(sessions["mean_cache_hit_share"], Value::Null);
        let turns = sessions["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[1]["ttft"]["mean_ms"], 30.0);
        assert_eq!(turns[2]["mean_input_tokens"], 400.0);
    }
}
