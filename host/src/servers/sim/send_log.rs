//! `--sim-send-log FILE`: one JSON line per finished stream with the moments the server
//! actually handed each content chunk to the connection, as offsets from the request's
//! arrival (the kernel's receive time of its headers: `arrival.rs`), and the request's
//! `x-request-id` when it came with one (the runner sends one: its requests.jsonl has the
//! same `request_id`) and its W3C `traceparent` when it came with one (the runner sends
//! one; requests.jsonl has its `trace_id` and `span_id`). A client's TTFT and E2EL can then be checked against what the
//! server really did, not only against its nominal timetable (its own timers can be late
//! too). `handler_ms` is when the request's handler ran, after that arrival: the server's
//! own wait, which a log counted from the handler would have hidden.
//!
//! A stream that ends without its `[DONE]` (the client closed the connection: hyper then
//! drops the response body) gets its line too, with `"aborted": true` and `aborted_ms`,
//! when the server noticed: a client's cancellation can be checked against what the server
//! saw.
//!
//! The server's control routes (`POST /reset_prefix_cache`, `/start_profile`,
//! `/stop_profile`) add a line of their own, `{"event": "start_profile", "unix_ms": T}`,
//! written when the call came: a test sees where it fell among the streams' lines.

use crate::both_sides::clock;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

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

    /// `{"event": NAME, "unix_ms": T}`: a control call (`reset_prefix_cache`,
    /// `start_profile`, `stop_profile`) came now.
    pub fn event(&self, name: &str) {
        let mut line = serde_json::json!({ "event": name, "unix_ms": unix_ms() }).to_string();
        line.push('\n');
        self.write(line.as_bytes());
    }

    /// One whole line per write, so the file holds whole lines whenever the server is
    /// stopped (a benchmark kills it).
    fn write(&self, line: &[u8]) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = file.write_all(line);
    }
}

/// The headers that name a request, as it came with them (each only when it did).
#[derive(Clone, Debug, Default)]
pub struct RequestNames {
    /// `x-request-id`.
    pub request_id: Option<String>,
    /// `traceparent`, as received (not checked: the log says what came).
    pub traceparent: Option<String>,
}

/// When a request arrived, and when its handler took it up.
#[derive(Clone, Copy)]
pub struct RequestArrival {
    pub arrived: Instant,
    pub handled: Instant,
}

/// The send times of one stream, collected while it runs; its line is written when it
/// finishes, or when it is dropped unfinished (aborted).
pub struct SentTimes {
    log: Arc<SendLog>,
    /// The line was written.
    written: bool,
    id: u64,
    names: RequestNames,
    arrived: Instant,
    /// The handler's start, µs after `arrived`.
    handler_us: u64,
    chunk_us: Vec<u64>,
}

/// Milliseconds since the Unix epoch, with µs resolution.
pub fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_micros() as f64 / 1e3)
}

fn micros(d: std::time::Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

impl SentTimes {
    pub fn new(
        log: Arc<SendLog>,
        id: u64,
        names: RequestNames,
        arrival: RequestArrival,
    ) -> SentTimes {
        SentTimes {
            log,
            written: false,
            id,
            names,
            arrived: arrival.arrived,
            handler_us: micros(arrival.handled.saturating_duration_since(arrival.arrived)),
            chunk_us: Vec::new(),
        }
    }

    /// A content chunk leaves now.
    pub fn chunk_sent(&mut self) {
        self.chunk_us
            .push(micros(clock::since(self.arrived.into_std())));
    }

    /// `{"id":N,"request_id":"...","traceparent":"...","handler_ms":H,"chunk_ms":[...]}`: each content chunk's
    /// send time after the request's headers arrived, in ms with µs resolution.
    pub fn finish(mut self) {
        self.write(false);
    }

    fn write(&mut self, aborted: bool) {
        self.written = true;
        let ms: Vec<f64> = self.chunk_us.iter().map(|&us| us as f64 / 1e3).collect();
        let handler_ms = self.handler_us as f64 / 1e3;
        let mut line =
            serde_json::json!({ "id": self.id, "handler_ms": handler_ms, "chunk_ms": ms });
        if let Some(request_id) = self.names.request_id.take() {
            line["request_id"] = request_id.into();
        }
        if let Some(traceparent) = self.names.traceparent.take() {
            line["traceparent"] = traceparent.into();
        }
        if aborted {
            line["aborted"] = true.into();
            line["aborted_ms"] =
                (clock::since(self.arrived.into_std()).as_micros() as f64 / 1e3).into();
        }
        let mut line = line.to_string();
        line.push('\n');
        self.log.write(line.as_bytes());
    }
}

impl Drop for SentTimes {
    /// Dropped unfinished: the client went away mid-stream (or the server stopped).
    fn drop(&mut self) {
        if !self.written {
            self.write(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_is_one_line_of_its_chunk_offsets() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sent.jsonl");
        let log = Arc::new(SendLog::create(&path).expect("log file"));
        let arrived = Instant::now();
        let arrival = RequestArrival {
            arrived,
            handled: arrived + std::time::Duration::from_micros(1500),
        };
        let names = RequestNames {
            request_id: Some("runner-1-0-3".into()),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        };
        let mut times = SentTimes::new(log, 7, names, arrival);
        times.chunk_sent();
        std::thread::sleep(std::time::Duration::from_millis(2));
        times.chunk_sent();
        times.finish();
        let text = std::fs::read_to_string(&path).expect("log");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["id"], 7);
        assert_eq!(line["request_id"], "runner-1-0-3");
        assert_eq!(
            line["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
        assert_eq!(line["handler_ms"], 1.5);
        let chunks = line["chunk_ms"].as_array().expect("chunk_ms");
        assert_eq!(chunks.len(), 2);
        let gap = chunks[1].as_f64().unwrap() - chunks[0].as_f64().unwrap();
        assert!(
            gap >= 2.0,
            "the second chunk left at least 2 ms later: {gap}"
        );
        assert!(line.get("aborted").is_none());
    }

    #[test]
    fn a_control_call_is_a_line_of_its_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sent.jsonl");
        let log = SendLog::create(&path).expect("log file");
        let before = unix_ms();
        log.event("start_profile");
        let text = std::fs::read_to_string(&path).expect("log");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["event"], "start_profile");
        assert!(line["unix_ms"].as_f64().is_some_and(|t| t >= before));
    }

    #[test]
    fn a_stream_dropped_unfinished_is_logged_as_aborted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("sent.jsonl");
        let log = Arc::new(SendLog::create(&path).expect("log file"));
        let now = Instant::now();
        let arrival = RequestArrival {
            arrived: now,
            handled: now,
        };
        let names = RequestNames {
            request_id: Some("r-0-1".into()),
            traceparent: None,
        };
        let mut times = SentTimes::new(log, 3, names, arrival);
        times.chunk_sent();
        drop(times);
        let text = std::fs::read_to_string(&path).expect("log");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(
            (line["id"].as_u64(), line["aborted"].as_bool()),
            (Some(3), Some(true))
        );
        assert_eq!(line["chunk_ms"].as_array().map(Vec::len), Some(1));
        assert!(line.get("traceparent").is_none());
        assert!(line["aborted_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    }
}
