//! Incremental server-sent-events framing: bytes in, complete `data` payloads out.
//! Handles `\n` and `\r\n` line ends, multi-line data, comments and events split across
//! network reads. Parsing JSON is the caller's business.

#[derive(Default)]
pub struct SseParser {
    /// Bytes of an incomplete line carried over to the next read.
    line: Vec<u8>,
    /// Data lines of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    /// Feeds bytes; calls `on_event` with the data of each event completed by them.
    pub fn push(&mut self, mut bytes: &[u8], mut on_event: impl FnMut(&[u8])) {
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = bytes.split_at(nl);
            bytes = &rest[1..];
            if self.line.is_empty() {
                self.line_done(head, &mut on_event);
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, &mut on_event);
            }
        }
        self.line.extend_from_slice(bytes);
    }

    /// Ends the stream: an event not followed by a blank line still counts.
    pub fn finish(&mut self, mut on_event: impl FnMut(&[u8])) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut on_event);
        }
        self.dispatch(&mut on_event);
    }

    fn line_done(&mut self, line: &[u8], on_event: &mut impl FnMut(&[u8])) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch(on_event);
        } else if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(&[u8])) {
        if self.has_data {
            on_event(&self.data);
            self.data.clear();
            self.has_data = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = vec![];
        for c in chunks {
            p.push(c, |e| out.push(String::from_utf8_lossy(e).into_owned()));
        }
        p.finish(|e| out.push(String::from_utf8_lossy(e).into_owned()));
        out
    }

    #[test]
    fn splits_events_across_reads_and_line_endings() {
        let got = events(&[
            b"data: {\"a\":1}\n\nda",
            b"ta: {\"b\":2}\r\n\r\n: comment\n\ndata: [DONE]\n\n",
        ]);
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
    }

    #[test]
    fn joins_multi_line_data_and_flushes_the_tail() {
        let got = events(&[b"event: x\ndata: one\ndata: two\n\ndata:three"]);
        assert_eq!(got, vec!["one\ntwo", "three"]);
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_events() {
        let input = b"data: {\"x\":\"a\\nb\"}\n\ndata: [DONE]\n\n";
        let single: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&single), events(&[input]));
    }
}
