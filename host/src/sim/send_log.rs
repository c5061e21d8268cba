//! `--sim-send-log FILE`: one JSON line per finished stream with the moments the server
//! actually handed each content chunk to the connection, as offsets from the request's
//! arrival, and the request's `x-request-id` when it came with one (the runner sends one:
//! its requests.jsonl has the same `request_id`). A client's TTFT and E2EL can then be checked against what the server really
//! did, not only against its nominal timetable (its own timers can be late too).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

/// The open log file, shared by every stream of the server.
pub struct SendLog {
    file: Mutex<File>,
}

impl SendLog {
    pub fn create(path: &Path) -> std::io::Result<SendLog> {
        Ok(SendLog {
            file: Mutex::new(File::create(path)?),
        })
    }

    /// One whole line per write, so the file holds whole lines whenever the server is
    /// stopped (a benchmark kills it).
    fn write(&self, line: &[u8]) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = file.write_all(line);
    }
}

/// The send times of one stream, collected while it runs.
pub struct SentTimes {
    id: u64,
    request_id: Option<String>,
    arrived: Instant,
    chunk_us: Vec<u64>,
}

impl SentTimes {
    pub fn new(id: u64, request_id: Option<String>, arrived: Instant) -> SentTimes {
        SentTimes {
            id,
            request_id,
            arrived,
            chunk_us: Vec::new(),
        }
    }

    /// A content chunk leaves now.
    pub fn chunk_sent(&mut self) {
        self.chunk_us.push(
            self.arrived
                .elapsed()
                .as_micros()
                .try_into()
                .unwrap_or(u64::MAX),
        );
    }

    /// `{"id":N,"request_id":"...","chunk_ms":[...]}`: each content chunk's send time after
    /// the request's headers arrived, in ms with µs resolution.
    pub fn finish(self, log: &SendLog) {
        let ms: Vec<f64> = self.chunk_us.iter().map(|&us| us as f64 / 1e3).collect();
        let mut line = serde_json::json!({ "id": self.id, "chunk_ms": ms });
        if let Some(request_id) = self.request_id {
            line["request_id"] = request_id.into();
        }
        let mut line = line.to_string();
        line.push('\n');
        log.write(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_is_one_line_of_its_chunk_offsets() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sent.jsonl");
        let log = SendLog::create(&path).expect("log file");
        let mut times = SentTimes::new(7, Some("runner-1-0-3".into()), Instant::now());
        times.chunk_sent();
        std::thread::sleep(std::time::Duration::from_millis(2));
        times.chunk_sent();
        times.finish(&log);
        let text = std::fs::read_to_string(&path).expect("log");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["id"], 7);
        assert_eq!(line["request_id"], "runner-1-0-3");
        let chunks = line["chunk_ms"].as_array().expect("chunk_ms");
        assert_eq!(chunks.len(), 2);
        let gap = chunks[1].as_f64().unwrap() - chunks[0].as_f64().unwrap();
        assert!(
            gap >= 2.0,
            "the second chunk left at least 2 ms later: {gap}"
        );
    }
}
