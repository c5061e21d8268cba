//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` header
//! every request carries, `00-<trace id>-<span id>-01`, so a server that traces (vLLM and
//! SGLang with OpenTelemetry on) files each request under the run's trace, and a slow
//! request in requests.jsonl can be found in the server's own traces.
//!
//! One trace id per run, one span id per request, both from the OS-seeded generator and
//! never from the run's seed: two runs of one seed send the same request stream (the
//! digest covers bodies and schedule only, `measuring::digest`) but never share a trace.

use rand::RngCore;

use crate::measuring::metrics::record::TraceIds;

/// A trace id: 16 bytes, not all zero (the specification's invalid value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

/// A span id: 8 bytes, not all zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanId([u8; 8]);

/// Random bytes, drawn again in the (2⁻⁶⁴ or rarer) case that all are zero.
fn nonzero<const N: usize>() -> [u8; N] {
    let mut rng = rand::rng();
    loop {
        let mut bytes = [0u8; N];
        rng.fill_bytes(&mut bytes);
        if bytes != [0u8; N] {
            return bytes;
        }
    }
}

impl TraceId {
    /// A new trace id, for one run.
    pub fn random() -> TraceId {
        TraceId(nonzero())
    }

    pub fn bytes(&self) -> [u8; 16] {
        self.0
    }

    /// Lowercase hex, as the header and requests.jsonl write it.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl SpanId {
    pub fn random() -> SpanId {
        SpanId(nonzero())
    }

    pub fn bytes(&self) -> [u8; 8] {
        self.0
    }
}

/// One request's place in the run's trace: the run's trace id and its own span id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace: TraceId,
    pub span: SpanId,
}

impl TraceParent {
    /// A new span of `trace`, for one request.
    pub fn new_span(trace: TraceId) -> TraceParent {
        TraceParent {
            trace,
            span: SpanId::random(),
        }
    }

    /// The header's value: version 00, the ids in lowercase hex, flags 01 (sampled: the
    /// runner records every request, and asks the server to keep its side of each too).
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-01",
            hex::encode(self.trace.0),
            hex::encode(self.span.0)
        )
    }

    /// The ids as requests.jsonl records them.
    pub fn ids(&self) -> TraceIds {
        TraceIds {
            trace_id: hex::encode(self.trace.0),
            span_id: hex::encode(self.span.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grammar of the specification's version 00: `version "-" trace-id "-" parent-id
    /// "-" trace-flags`, each lowercase hex of 2, 32, 16 and 2 digits.
    fn well_formed(header: &str) -> bool {
        let parts: Vec<&str> = header.split('-').collect();
        let hex = |s: &str, n: usize| {
            s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        header.len() == 55
            && parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && parts[1] != "0".repeat(32)
            && hex(parts[2], 16)
            && parts[2] != "0".repeat(16)
            && parts[3] == "01"
    }

    #[test]
    fn the_header_is_version_00_with_the_ids_in_lowercase_hex() {
        let p = TraceParent {
            trace: TraceId([0xab; 16]),
            span: SpanId([0x0c; 8]),
        };
        assert_eq!(
            p.header(),
            "00-abababababababababababababababab-0c0c0c0c0c0c0c0c-01"
        );
        assert!(well_formed(&p.header()));
        let ids = p.ids();
        assert_eq!(ids.trace_id, "ab".repeat(16));
        assert_eq!(ids.span_id, "0c".repeat(8));
        // The check can fail: uppercase, a zero id and other flags are refused.
        assert!(!well_formed(&p.header().to_uppercase()));
        assert!(!well_formed(&format!(
            "00-{}-0c0c0c0c0c0c0c0c-01",
            "0".repeat(32)
        )));
        assert!(!well_formed(&p.header().replace("-01", "-00")));
    }

    #[test]
    fn each_request_has_its_own_span_in_the_run_s_trace() {
        let trace = TraceId::random();
        let spans: std::collections::HashSet<_> = (0..1000)
            .map(|_| TraceParent::new_span(trace))
            .inspect(|p| {
                assert_eq!(p.trace, trace);
                assert!(well_formed(&p.header()), "{}", p.header());
            })
            .map(|p| p.span)
            .collect();
        assert_eq!(spans.len(), 1000);
        // Two runs never share a trace.
        assert_ne!(TraceId::random(), TraceId::random());
    }
}
