//! requests.jsonl: one line per finished request, written as requests finish. A line on
//! disk is always a whole record: when a write fails (a full disk), the file is cut back
//! to its last whole record and recording stops; the run goes on and reports, and the
//! error is the run's last line.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::EngineError;
use crate::measuring::metrics::RequestRecord;

pub(super) struct RecordFile {
    path: PathBuf,
    /// `None` once a write failed: nothing more is recorded.
    writer: Option<BufWriter<File>>,
    /// Bytes handed to the writer, all whole records.
    handed: u64,
    /// Bytes known to be in the file, all whole records.
    whole: u64,
    /// Where each record handed but not yet known to be in the file ends.
    ends: VecDeque<u64>,
    /// Records known to be whole in the file.
    on_disk: u64,
    /// Records the run finished, written or not.
    offered: u64,
    error: Option<std::io::Error>,
}

impl RecordFile {
    pub(super) fn create(path: PathBuf) -> Result<RecordFile, EngineError> {
        let file = File::create(&path).map_err(|source| EngineError::Records {
            path: path.display().to_string(),
            source,
        })?;
        Ok(RecordFile {
            path,
            writer: Some(BufWriter::new(file)),
            handed: 0,
            whole: 0,
            ends: VecDeque::new(),
            on_disk: 0,
            offered: 0,
            error: None,
        })
    }

    /// Appends one record as one line. Its strings were redacted where they entered (see
    /// `redact`): the serialised line is not, so its structure is never touched.
    pub(super) fn write(&mut self, record: &RequestRecord) {
        self.offered += 1;
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let mut line = serde_json::to_string(record).unwrap_or_default();
        line.push('\n');
        match w.write_all(line.as_bytes()) {
            Ok(()) => {
                self.handed += line.len() as u64;
                self.ends.push_back(self.handed);
                // The writer passes the file whole records only (its buffer, or a line
                // larger than it): what it does not hold is on disk.
                let whole = self.handed - w.buffer().len() as u64;
                self.reached(whole);
            }
            Err(e) => self.fail(e),
        }
    }

    /// Hands what is buffered to the file, so a crash loses only the queue.
    pub(super) fn flush(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            match w.flush() {
                Ok(()) => self.reached(self.handed),
                Err(e) => self.fail(e),
            }
        }
    }

    /// The file holds `whole` bytes: the records ending there or before are on disk.
    fn reached(&mut self, whole: u64) {
        self.whole = whole;
        while self.ends.front().is_some_and(|&end| end <= whole) {
            self.ends.pop_front();
            self.on_disk += 1;
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.error.get_or_insert(e);
        if let Some(w) = self.writer.take() {
            // The buffer is dropped unwritten and a torn last line cut off.
            let (file, _) = w.into_parts();
            let _ = file.set_len(self.whole);
        }
    }

    /// The first write error, if any.
    pub(super) fn finish(mut self) -> Result<(), EngineError> {
        self.flush();
        match self.error {
            Some(source) => Err(EngineError::RecordsCut {
                path: self.path.display().to_string(),
                written: self.on_disk,
                total: self.offered,
                lost: self.offered - self.on_disk,
                source,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /dev/full accepts the open and fails every write with ENOSPC, as a full disk does.
    #[test]
    fn a_full_disk_stops_recording_with_the_error_and_no_torn_line() {
        let mut f = RecordFile::create(PathBuf::from("/dev/full")).unwrap();
        let record: RequestRecord =
            serde_json::from_str(r#"{"phase":0,"index":0,"scheduled_ns":0,"sent_ns":0,"chunks":[],"end_ns":0,"input_tokens":1,"output_tokens":0,"text_tokens":0}"#)
                .unwrap();
        for _ in 0..100_000 {
            f.write(&record);
        }
        assert!(f.writer.is_none(), "recording stopped");
        let err = f.finish().unwrap_err().to_string();
        assert!(err.contains("/dev/full"), "{err}");
        assert!(
            err.starts_with("requests.jsonl was cut: 0 of 100000 request records written")
                && err.contains("100000 lost"),
            "{err}"
        );
    }

    #[test]
    fn a_failed_write_cuts_the_file_back_to_its_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.jsonl");
        let mut f = RecordFile::create(path.clone()).unwrap();
        f.writer
            .as_mut()
            .unwrap()
            .get_mut()
            .write_all(b"{\"whole\":1}\n")
            .unwrap();
        f.handed = 12;
        f.whole = 12;
        // A torn line reached the file, then the write failed.
        f.writer
            .as_mut()
            .unwrap()
            .get_mut()
            .write_all(b"{\"torn")
            .unwrap();
        f.fail(std::io::Error::other("disk full"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"whole\":1}\n");
        assert!(f.finish().is_err());
    }
}
