//! Each format's line: which format a first line is, and one request from one line.

use std::path::Path;

use serde_json::{Map, Value};

use super::{TraceChat, TraceError, TraceFormat, TraceRequest, MAX_TIMESTAMP_S, MAX_TOKENS};
use crate::safeguards::display::excerpt;

/// What is wrong with one line, before the file and line number are known.
#[derive(Debug)]
pub(super) enum LineError {
    Line(String),
    Field(&'static str, String),
}

impl LineError {
    pub(super) fn at(self, path: &Path, line: usize) -> TraceError {
        let path = path.to_path_buf();
        match self {
            LineError::Line(what) => TraceError::Line { path, line, what },
            LineError::Field(field, what) => TraceError::Field {
                path,
                line,
                field,
                what,
            },
        }
    }
}

/// The Azure CSV header's columns, in the published order.
const AZURE_COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

pub(super) fn detect(first: &str) -> Option<TraceFormat> {
    let first = first.trim().trim_start_matches('\u{feff}');
    if first.starts_with('{') {
        let object = serde_json::from_str::<Map<String, Value>>(first).ok()?;
        return if object.contains_key("chat_id") {
            Some(TraceFormat::Bailian)
        } else if object.contains_key("timestamp") {
            Some(TraceFormat::Mooncake)
        } else {
            None
        };
    }
    let columns: Vec<&str> = first.split(',').map(str::trim).collect();
    (columns == AZURE_COLUMNS).then_some(TraceFormat::Azure)
}

pub(super) fn request(format: TraceFormat, line: &str) -> Result<TraceRequest, LineError> {
    match format {
        TraceFormat::Azure => azure(line),
        TraceFormat::Mooncake | TraceFormat::Bailian => {
            let object = serde_json::from_str::<Map<String, Value>>(line)
                .map_err(|e| LineError::Line(format!("not a JSON object: {e}")))?;
            json(format, &object)
        }
    }
}

fn json(format: TraceFormat, o: &Map<String, Value>) -> Result<TraceRequest, LineError> {
    let timestamp = number(o, "timestamp")?;
    let chat = match format {
        TraceFormat::Bailian => Some(TraceChat {
            id: integer(o, "chat_id")?,
            parent: integer(o, "parent_chat_id")?,
            turn: count(o, "turn")?,
        }),
        _ => None,
    };
    let hash_ids = match o.get("hash_ids") {
        None => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|v| v.as_u64())
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| {
                LineError::Field(
                    "hash_ids",
                    "expected an array of non-negative integers".into(),
                )
            })?,
        Some(_) => return Err(LineError::Field("hash_ids", "expected an array".into())),
    };
    // Mooncake counts milliseconds, Bailian seconds.
    let at_s = if format == TraceFormat::Mooncake {
        timestamp / 1000.0
    } else {
        timestamp
    };
    Ok(TraceRequest {
        at_s: bounded_time("timestamp", at_s)?,
        input_tokens: tokens("input_length", field(o, "input_length")?.as_u64())?,
        output_tokens: tokens("output_length", field(o, "output_length")?.as_u64())?,
        hash_ids: Some(hash_ids),
        chat,
    })
}

fn field<'a>(o: &'a Map<String, Value>, name: &'static str) -> Result<&'a Value, LineError> {
    o.get(name)
        .ok_or_else(|| LineError::Field(name, "missing".into()))
}

fn number(o: &Map<String, Value>, name: &'static str) -> Result<f64, LineError> {
    match field(o, name)?.as_f64() {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(LineError::Field(name, "expected a number >= 0".into())),
    }
}

/// `at_s` where it is a time a trace could hold ([`MAX_TIMESTAMP_S`]).
fn bounded_time(name: &'static str, at_s: f64) -> Result<f64, LineError> {
    if at_s > MAX_TIMESTAMP_S {
        return Err(LineError::Field(
            name,
            format!("{at_s:.3e} s is past {MAX_TIMESTAMP_S:.0e} s (the year 2286): give the trace's own times"),
        ));
    }
    Ok(at_s)
}

/// A token count, at most [`MAX_TOKENS`].
fn tokens(name: &'static str, n: Option<u64>) -> Result<u64, LineError> {
    match n {
        Some(n) if n <= MAX_TOKENS => Ok(n),
        Some(n) => Err(LineError::Field(
            name,
            format!("{n} tokens is more than any request's: at most {MAX_TOKENS}"),
        )),
        None => Err(LineError::Field(
            name,
            "expected a non-negative integer".into(),
        )),
    }
}

fn integer(o: &Map<String, Value>, name: &'static str) -> Result<i64, LineError> {
    field(o, name)?
        .as_i64()
        .ok_or_else(|| LineError::Field(name, "expected an integer".into()))
}

fn count(o: &Map<String, Value>, name: &'static str) -> Result<u64, LineError> {
    field(o, name)?
        .as_u64()
        .ok_or_else(|| LineError::Field(name, "expected a non-negative integer".into()))
}

fn azure(line: &str) -> Result<TraceRequest, LineError> {
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    if cells.len() != AZURE_COLUMNS.len() {
        return Err(LineError::Line(format!(
            "expected 3 comma-separated cells (TIMESTAMP,ContextTokens,GeneratedTokens), got {}",
            cells.len()
        )));
    }
    let count = |i: usize, name: &'static str| match cells[i].parse::<u64>() {
        Ok(n) => tokens(name, Some(n)),
        Err(_) => Err(LineError::Field(
            name,
            format!("expected a token count, got `{}`", excerpt(cells[i])),
        )),
    };
    let at_s = azure_seconds(cells[0]).ok_or_else(|| {
        LineError::Field(
            "TIMESTAMP",
            format!(
                "expected a time like 2023-11-16 18:15:46.6805900, got `{}`",
                excerpt(cells[0])
            ),
        )
    })?;
    Ok(TraceRequest {
        at_s: bounded_time("TIMESTAMP", at_s)?,
        input_tokens: count(1, "ContextTokens")?,
        output_tokens: count(2, "GeneratedTokens")?,
        hash_ids: None,
        chat: None,
    })
}

/// Seconds since the Unix epoch of Azure's `2023-11-16 18:15:46.6805900` (no zone: only
/// differences are used). chrono's `%.f` takes at most 9 digits, Azure writes 7.
pub fn azure_seconds(text: &str) -> Option<f64> {
    let t = chrono::NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?;
    let utc = t.and_utc();
    Some(utc.timestamp() as f64 + f64::from(utc.timestamp_subsec_nanos()) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_timestamps_keep_their_fraction() {
        let a = azure_seconds("2023-11-16 18:15:46.6805900").unwrap();
        let b = azure_seconds("2023-11-16 18:15:47.0000000").unwrap();
        assert!((b - a - 0.31941).abs() < 1e-6, "{}", b - a);
        assert!(azure_seconds("2023-11-16 18:15:46").is_some());
        assert!(azure_seconds("yesterday").is_none());
    }

    #[test]
    fn formats_are_told_apart_by_their_first_line() {
        let bailian = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 3, "output_length": 4, "type": "text", "turn": 1, "hash_ids": [1]}"#;
        let mooncake =
            r#"{"timestamp": 5, "input_length": 3, "output_length": 4, "hash_ids": [1]}"#;
        assert_eq!(detect(bailian), Some(TraceFormat::Bailian));
        assert_eq!(detect(mooncake), Some(TraceFormat::Mooncake));
        assert_eq!(
            detect("TIMESTAMP,ContextTokens,GeneratedTokens"),
            Some(TraceFormat::Azure)
        );
        assert_eq!(detect("a,b,c"), None);
        assert_eq!(detect(r#"{"x": 1}"#), None);
    }
}
