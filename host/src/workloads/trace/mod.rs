//! Request traces as published (Mooncake and Bailian JSONL, Azure's CSV), read for `runner trace analyze`: the scenarios replay them themselves.

pub mod analysis;
mod chats;
mod formats;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::safeguards::bounded_file::{self, BoundedReadError, Bytes};

/// The largest trace file read: the published Bailian traces are about 130 MB, Azure's
/// week-long 2024 CSVs a few hundred.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// The longest line read: a Bailian request of a 1M-token context has 62,500 hash ids,
/// about 500 KB of JSON.
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// The most tokens one request may count: 2³², four thousand times the longest context
/// windows, so a line's count is a real one and a whole trace's sum cannot wrap.
pub const MAX_TOKENS: u64 = 1 << 32;
/// The latest timestamp, seconds: 10¹⁰ s is the year 2286 on the Unix clock and three
/// centuries on a trace's own clock; beyond it a timestamp is no time a trace was taken.
pub const MAX_TIMESTAMP_S: f64 = 1e10;

/// The published formats this reads, told apart by their first line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token blocks).
    Mooncake,
    /// JSONL: `chat_id`, `parent_chat_id` (-1 for a root), `timestamp` (s), `input_length`,
    /// `output_length`, `type`, `turn`, `hash_ids` (16-token blocks).
    Bailian,
    /// CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
}

impl TraceFormat {
    /// Tokens per hash id in the format's own traces.
    pub fn block_tokens(self) -> Option<u64> {
        match self {
            TraceFormat::Mooncake => Some(512),
            TraceFormat::Bailian => Some(16),
            TraceFormat::Azure => None,
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceFormat::Mooncake => "Mooncake JSONL",
            TraceFormat::Bailian => "Bailian JSONL",
            TraceFormat::Azure => "Azure CSV",
        })
    }
}

/// A Bailian request's place in its conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceChat {
    pub id: i64,
    /// -1 for a root chat.
    pub parent: i64,
    pub turn: u64,
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Seconds, on the trace's own clock.
    pub at_s: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `None` where the format has none (Azure).
    pub hash_ids: Option<Vec<u64>>,
    /// Bailian only.
    pub chat: Option<TraceChat>,
}

/// A whole trace, its requests in the file's order.
#[derive(Debug)]
pub struct Trace {
    pub format: TraceFormat,
    pub requests: Vec<TraceRequest>,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Read(#[from] BoundedReadError),
    #[error("{path}:{line}: the line is {len} long: a trace line may be at most {limit}")]
    LineTooLong {
        path: PathBuf,
        line: usize,
        len: Bytes,
        limit: Bytes,
    },
    #[error("{path}:{line}: {what}")]
    Line {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("{path}:{line}: field `{field}`: {what}")]
    Field {
        path: PathBuf,
        line: usize,
        field: &'static str,
        what: String,
    },
    #[error("{path} is not a trace this reads: its first line is neither a Mooncake or Bailian JSON object nor Azure's CSV header `TIMESTAMP,ContextTokens,GeneratedTokens`")]
    UnknownFormat { path: PathBuf },
    #[error("{path} holds no request")]
    Empty { path: PathBuf },
}

/// Reads the trace at `path`, its format recognised from its first line.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let text = bounded_file::read_to_string(path, MAX_TRACE_BYTES, "a trace")?;
    parse(path, &text)
}

/// Parses `text`, the contents of `path` (named in errors).
pub fn parse(path: &Path, text: &str) -> Result<Trace, TraceError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((first_no, first)) = lines.next() else {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    };
    check_length(path, first_no, first)?;
    let format = formats::detect(first).ok_or_else(|| TraceError::UnknownFormat {
        path: path.to_path_buf(),
    })?;
    let rest: Box<dyn Iterator<Item = (usize, &str)>> = if format == TraceFormat::Azure {
        Box::new(lines)
    } else {
        Box::new(std::iter::once((first_no, first)).chain(lines))
    };
    let mut requests = Vec::new();
    let mut rule = chats::ChatRule::default();
    for (no, line) in rest {
        check_length(path, no, line)?;
        let request = formats::request(format, line).map_err(|e| e.at(path, no))?;
        if let Some(chat) = &request.chat {
            rule.add(no, chat).map_err(|e| e.at(path, no))?;
        }
        requests.push(request);
    }
    if requests.is_empty() {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(Trace { format, requests })
}

fn check_length(path: &Path, no: usize, line: &str) -> Result<(), TraceError> {
    if line.len() > MAX_LINE_BYTES {
        return Err(TraceError::LineTooLong {
            path: path.to_path_buf(),
            line: no,
            len: Bytes(line.len() as u64),
            limit: Bytes(MAX_LINE_BYTES as u64),
        });
    }
    Ok(())
}
