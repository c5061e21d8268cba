//! Incremental server-sent-events framing: bytes in, complete `data` payloads out.
//! Follows the event-stream parsing rules of the WHATWG HTML standard (section 9.2.6,
//! <https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>):
//! lines end with CRLF, LF or a lone CR, one leading byte-order mark is ignored, data lines
//! join with `\n`, comments and other fields are skipped. What comes out never depends on
//! how the bytes were split into reads (a property test checks it). Parsing JSON is the
//! caller's business.

/// Longest line, and longest event, accepted. A server that never ends a line cannot make
/// the client buffer without bound.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// The UTF-8 byte-order mark a stream may start with.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// Why a stream is not server-sent events.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// OpenAI-compatible servers send only `data:` lines, `:` comments and blank lines (the
    /// other SSE fields are allowed too). Anything else, such as bare JSON lines, means the
    /// server is not speaking SSE, which must not pass silently as an empty answer.
    #[error("a line that is no SSE field: {0}")]
    NotAField(String),
    #[error("an SSE line or event over {MAX_EVENT_BYTES} bytes")]
    TooLarge,
}

#[derive(Default)]
pub struct SseParser {
    /// Bytes of an incomplete line carried over to the next read.
    line: Vec<u8>,
    /// Data lines of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
    /// Set once the size limit is hit: nothing more is read.
    poisoned: bool,
    /// The last read ended with a CR that ended a line: a LF starting the next read
    /// belongs to it (one CRLF split across reads).
    after_cr: bool,
    /// Bytes of a leading byte-order mark seen so far, while the stream's start is decided.
    bom: usize,
    /// The stream's first bytes are past (and its byte-order mark, if any, skipped).
    started: bool,
}

/// The first line of `bytes`: its content, what follows its end (CRLF, LF or CR), and
/// whether it ended with a CR that is the last byte (its LF may come in the next read).
fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let end = memchr::memchr2(b'\n', b'\r', bytes)?;
    let rest = &bytes[end + 1..];
    if bytes[end] == b'\n' {
        return Some((&bytes[..end], rest, false));
    }
    match rest.first() {
        Some(b'\n') => Some((&bytes[..end], &rest[1..], false)),
        Some(_) => Some((&bytes[..end], rest, false)),
        None => Some((&bytes[..end], rest, true)),
    }
}

impl SseParser {
    /// Feeds bytes; calls `on_event` with the data of each event completed by them, or with
    /// an error for each malformed line.
    pub fn push(&mut self, bytes: &[u8], mut on_event: impl FnMut(Result<&[u8], SseError>)) {
        if self.poisoned {
            return;
        }
        let mut bytes = self.skip_start(bytes);
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        while let Some((head, rest, cr)) = split_line(bytes) {
            if self.poisoned {
                return;
            }
            bytes = rest;
            self.after_cr = cr;
            if self.line.is_empty() {
                // The common case, one `data:` line and its blank line in the same read,
                // goes out straight from the read's bytes, copied nowhere.
                if let Some((data, after, cr)) = self.whole_event(head, bytes) {
                    on_event(Ok(data));
                    bytes = after;
                    self.after_cr = cr;
                    continue;
                }
                self.line_done(head, &mut on_event);
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, &mut on_event);
            }
        }
        if self.poisoned {
            return;
        }
        self.line.extend_from_slice(bytes);
        // The same test `line_done` makes on a whole line, so splits change nothing.
        if self.line.len() > MAX_EVENT_BYTES {
            self.poison(&mut on_event);
        }
    }

    /// Ends the stream: an event not followed by a blank line still counts.
    pub fn finish(&mut self, mut on_event: impl FnMut(Result<&[u8], SseError>)) {
        if self.poisoned {
            return;
        }
        if !self.started {
            // A stream shorter than a byte-order mark: what began like one is data.
            self.started = true;
            self.line.extend_from_slice(&BOM[..self.bom]);
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut on_event);
        }
        if !self.poisoned {
            self.dispatch(&mut on_event);
        }
    }

    /// Skips one leading byte-order mark, which may arrive split across reads; the bytes
    /// of a start that only looked like one are kept as the start of the first line.
    fn skip_start<'b>(&mut self, mut bytes: &'b [u8]) -> &'b [u8] {
        while !self.started {
            let Some((&b, rest)) = bytes.split_first() else {
                break;
            };
            if b == BOM[self.bom] {
                self.bom += 1;
                bytes = rest;
                self.started = self.bom == BOM.len();
            } else {
                self.started = true;
                self.line.extend_from_slice(&BOM[..self.bom]);
            }
        }
        bytes
    }

    fn poison(&mut self, on_event: &mut impl FnMut(Result<&[u8], SseError>)) {
        self.poisoned = true;
        self.line = Vec::new();
        self.data = Vec::new();
        on_event(Err(SseError::TooLarge));
    }

    /// The data of a one-line event when `line` is its `data:` line and `rest` starts
    /// with the blank line that ends it, with what follows that blank line (and whether
    /// that blank line was a CR ending the read); `None` when the general path must handle
    /// it (it gives the same result).
    fn whole_event<'b>(
        &self,
        line: &'b [u8],
        rest: &'b [u8],
    ) -> Option<(&'b [u8], &'b [u8], bool)> {
        if self.has_data || line.len() > MAX_EVENT_BYTES {
            return None;
        }
        let value = line.strip_prefix(b"data:")?;
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match split_line(rest)? {
            (b"", after, cr) => Some((value, after, cr)),
            _ => None,
        }
    }

    fn line_done(&mut self, line: &[u8], on_event: &mut impl FnMut(Result<&[u8], SseError>)) {
        if line.len() > MAX_EVENT_BYTES {
            return self.poison(on_event);
        }
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return; // a comment
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                if self.data.len() > MAX_EVENT_BYTES {
                    self.poison(on_event);
                }
            }
            // Carry nothing we use.
            b"event" | b"id" | b"retry" => {}
            _ => {
                let head = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
                on_event(Err(SseError::NotAField(head)));
            }
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Result<&[u8], SseError>)) {
        if self.has_data {
            on_event(Ok(&self.data));
            self.data.clear();
            self.has_data = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<Result<String, SseError>> {
        let mut p = SseParser::default();
        let mut out = vec![];
        let mut take = |e: Result<&[u8], SseError>| {
            out.push(e.map(|d| String::from_utf8_lossy(d).into_owned()))
        };
        for c in chunks {
            p.push(c, &mut take);
        }
        p.finish(&mut take);
        out
    }

    fn ok(items: &[&str]) -> Vec<Result<String, SseError>> {
        items.iter().map(|s| Ok(s.to_string())).collect()
    }

    #[test]
    fn splits_events_across_reads_and_line_endings() {
        let got = events(&[
            b"data: {\"a\":1}\n\nda",
            b"ta: {\"b\":2}\r\n\r\n: comment\n\nid: 7\nretry: 10\ndata: [DONE]\n\n",
        ]);
        assert_eq!(got, ok(&["{\"a\":1}", "{\"b\":2}", "[DONE]"]));
    }

    #[test]
    fn joins_multi_line_data_and_flushes_the_tail() {
        let got = events(&[b"event: x\ndata: one\ndata\ndata: two\n\ndata:three"]);
        assert_eq!(got, ok(&["one\n\ntwo", "three"]));
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_events() {
        let input = b"data: {\"x\":\"a\\nb\"}\n\nnonsense\ndata: [DONE]\n\n";
        let single: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&single), events(&[input]));
    }

    #[test]
    fn lines_that_are_no_sse_field_are_errors() {
        let got = events(&[b"{\"choices\":[]}\n\ndata: x\n\n"]);
        assert_eq!(
            got,
            vec![
                Err(SseError::NotAField("{\"choices\":[]}".into())),
                Ok("x".into())
            ]
        );
    }

    #[test]
    fn lone_cr_line_ends_count_and_a_crlf_split_across_reads_is_one_end() {
        let cr = events(&[b"data: a\r\rdata: b\rdata: c\r\r: x\rid: 1\r\r"]);
        assert_eq!(cr, ok(&["a", "b\nc"]));
        // CR at the end of one read, LF at the start of the next: one line end, no blank
        // line between them (which would end the event early).
        let split = events(&[b"data: b\r", b"\ndata: c\r", b"\n\r", b"\n"]);
        assert_eq!(split, ok(&["b\nc"]));
        let mixed = events(&[b"data: 1\n\rdata: 2\r\n\ndata: 3\r\r"]);
        assert_eq!(mixed, ok(&["1", "2", "3"]));
    }

    #[test]
    fn one_leading_byte_order_mark_is_skipped_even_split() {
        let input = b"\xEF\xBB\xBFdata: x\n\n";
        assert_eq!(events(&[input]), ok(&["x"]));
        let bytewise: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&bytewise), ok(&["x"]));
        // Only one, and only at the start.
        let two = events(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"]);
        assert!(matches!(two[0], Err(SseError::NotAField(_))), "{two:?}");
        // A start that only looks like a mark is data of the first line.
        let half = events(&[b"\xEF\xBB", b"data: x\n\n"]);
        assert!(matches!(half[0], Err(SseError::NotAField(_))), "{half:?}");
        assert_eq!(events(&[b"\xEF"]).len(), 1);
    }

    #[test]
    fn an_endless_line_stops_at_the_limit_whatever_the_reads() {
        let big = vec![b'a'; MAX_EVENT_BYTES + 1];
        let mut input = b"data: ok\n\ndata: ".to_vec();
        input.extend_from_slice(&big);
        input.extend_from_slice(b"\n\ndata: after\n\n");
        let whole = events(&[&input]);
        assert_eq!(whole, vec![Ok("ok".into()), Err(SseError::TooLarge)]);
        let pieces: Vec<&[u8]> = input.chunks(4096).collect();
        assert_eq!(events(&pieces), whole);
    }
}
