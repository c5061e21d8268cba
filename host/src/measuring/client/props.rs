//! Property tests of the stream decoding (SSE framing, then OpenAI JSON messages): any
//! bytes, split into reads anyhow, never panic, and decode to the same events, text, chunk
//! boundaries, usage and error as the same bytes in one read. Well-formed streams decode
//! to exactly their text.
//!
//! Cases per property: `PROPTEST_CASES` (default 2,000). The acceptance run used
//! `PROPTEST_CASES=1000000 cargo test -p runner --lib client::props` (see the issue note).

use std::time::Instant;

use proptest::prelude::*;

use super::exchange::Exchange;
use super::sse::{SseError, SseParser};
use super::stream::BodyDecoder;
use crate::measuring::metrics::record::RequestError;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces a stream is made of, so that random streams are often nearly valid (random bytes
/// alone would almost never reach the JSON decoder).
const PIECES: &[&str] = &[
    "data: ",
    "data:",
    "data",
    "\n",
    "\r\n",
    "\n\n",
    "\r",
    "\r\r",
    "\u{feff}",
    ":",
    ": ping\n",
    "event: message\n",
    "id: 1\n",
    "retry: 5\n",
    "[DONE]",
    "{\"choices\":[{\"text\":\"",
    "hello",
    " wor",
    "\\n",
    "\\u00e9",
    "é",
    "\"}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}",
    "{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}",
    "{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\"}}]}",
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3}}",
    "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"completion_tokens\":1}}",
    "{\"error\":{\"message\":\"boom\"}}",
    "{\"choices\":5}",
    "{",
    "}",
    "\"",
    "null",
    "nonsense",
];

/// A byte stream: pieces and arbitrary bytes, concatenated.
fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|ps| ps.concat())
}

/// Cut points for `len` bytes, as fractions so they shrink well.
fn splits() -> impl Strategy<Value = Vec<u16>> {
    proptest::collection::vec(any::<u16>(), 0..12)
}

/// The reads a body arrives in: `bytes` cut at the given points (empty reads included).
fn cut<'a>(bytes: &'a [u8], points: &[u16]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = points
        .iter()
        .map(|&p| p as usize * bytes.len() / u16::MAX as usize)
        .collect();
    at.sort_unstable();
    let mut reads = Vec::new();
    let mut start = 0;
    for a in at {
        reads.push(&bytes[start..a]);
        start = a;
    }
    reads.push(&bytes[start..]);
    reads
}

fn sse_events(reads: &[&[u8]]) -> Vec<Result<Vec<u8>, SseError>> {
    let mut p = SseParser::default();
    let mut out = Vec::new();
    let mut take = |e: Result<&[u8], SseError>| out.push(e.map(<[u8]>::to_vec));
    for r in reads {
        p.push(r, &mut take);
    }
    p.finish(&mut take);
    out
}

/// The WHATWG event-stream rules written plainly, line by line over the whole input, as
/// the reference the incremental parser must agree with (inputs here stay far below the
/// size limit).
fn reference_events(bytes: &[u8]) -> Vec<Result<Vec<u8>, SseError>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut lines: Vec<&[u8]> = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if bytes[i] == b'\n' || bytes[i] == b'\r' {
            lines.push(&bytes[start..i]);
            i += if bytes[i..].starts_with(b"\r\n") {
                2
            } else {
                1
            };
            start = i;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        lines.push(&bytes[start..]);
    }
    let (mut out, mut data, mut has_data) = (Vec::new(), Vec::new(), false);
    for line in lines {
        if line.is_empty() {
            if has_data {
                out.push(Ok(std::mem::take(&mut data)));
                has_data = false;
            }
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (
                &line[..c],
                line[c + 1..].strip_prefix(b" ").unwrap_or(&line[c + 1..]),
            ),
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
            b"event" | b"id" | b"retry" => {}
            _ => out.push(Err(SseError::NotAField(
                String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned(),
            ))),
        }
    }
    if has_data {
        out.push(Ok(data));
    }
    out
}

/// What a decoded body says, without the read times (which do depend on the reads).
type Decoded = (
    String,
    Vec<(usize, usize, Option<u64>)>,
    Option<u64>,
    Option<u64>,
    Option<RequestError>,
);

fn decode(sse: bool, reads: &[&[u8]]) -> Decoded {
    let mut ex = Exchange::new();
    let mut d = BodyDecoder::new(sse);
    let t = Instant::now();
    for r in reads {
        d.feed(&mut ex, r, t);
    }
    d.finish(&mut ex, t);
    (
        ex.text,
        ex.chunks
            .iter()
            .map(|c| (c.text.start, c.text.end, c.cumulative_tokens))
            .collect(),
        ex.prompt_tokens,
        ex.completion_tokens,
        ex.error,
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sse_framing_does_not_depend_on_reads(bytes in stream_bytes(), points in splits()) {
        let whole = sse_events(&[&bytes]);
        prop_assert_eq!(sse_events(&cut(&bytes, &points)), whole);
    }

    #[test]
    fn decoding_does_not_depend_on_reads(
        bytes in stream_bytes(),
        points in splits(),
        sse in any::<bool>(),
    ) {
        let whole = decode(sse, &[&bytes]);
        let (text, chunks, ..) = &whole;
        // Chunk boundaries are within the text, in order, on character boundaries.
        let mut end = 0;
        for &(a, b, _) in chunks {
            prop_assert!(a >= end && a < b && b <= text.len());
            prop_assert!(text.is_char_boundary(a) && text.is_char_boundary(b));
            end = b;
        }
        prop_assert_eq!(decode(sse, &cut(&bytes, &points)), whole);
    }

    #[test]
    fn sse_framing_follows_the_spec(bytes in stream_bytes(), points in splits(), bom in any::<bool>()) {
        let bytes = if bom { [&b"\xEF\xBB\xBF"[..], &bytes].concat() } else { bytes };
        prop_assert_eq!(sse_events(&cut(&bytes, &points)), reference_events(&bytes));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        points in splits(),
    ) {
        let reads = cut(&bytes, &points);
        prop_assert_eq!(sse_events(&reads), sse_events(&[&bytes]));
        prop_assert_eq!(decode(true, &reads), decode(true, &[&bytes]));
    }

    #[test]
    fn well_formed_streams_decode_to_their_text(
        tokens in proptest::collection::vec("[a-zA-Z0-9 é\"\\\\\n]{0,6}", 0..20),
        ending in 0..3usize,
        bom in any::<bool>(),
        comments in any::<bool>(),
        points in splits(),
    ) {
        // Every line end the SSE format allows: LF, CRLF and a lone CR.
        let nl = ["\n", "\r\n", "\r"][ending];
        let mut body = if bom { "\u{feff}".to_string() } else { String::new() };
        for t in &tokens {
            if comments {
                body += &format!(": keep-alive{nl}");
            }
            let json = serde_json::json!({"choices": [{"index": 0, "text": t}]});
            body += &format!("data: {json}{nl}{nl}");
        }
        body += &format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":{}}}}}{nl}{nl}", tokens.len());
        body += &format!("data: [DONE]{nl}{nl}");
        let (text, chunks, _, usage, error) = decode(true, &cut(body.as_bytes(), &points));
        prop_assert_eq!(error, None);
        prop_assert_eq!(text, tokens.concat());
        prop_assert_eq!(chunks.len(), tokens.iter().filter(|t| !t.is_empty()).count());
        prop_assert_eq!(usage, Some(tokens.len() as u64));
    }
}
