//! The request-stream digest: sha256 over the identity of every request a run sends, in
//! send order. Two runs with the same digest sent the same bodies at the same scheduled
//! offsets, whichever guest language produced them.
//!
//! One request's identity is a [`RequestKey`]: its phase, its index in the phase, its
//! scheduled offset and the sha256 of its body. This module is the only place that turns
//! a key into the digest's bytes ([`RequestKey::bytes`]) and the only place that reads a
//! key back from its logged form ([`StreamEntry`], one line of a shard's stream.jsonl):
//! the dispatcher, the shard's stream log and `runner merge` all go through it, so the
//! merged digest of a sharded run equals the digest of the same run on one machine.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bytes one request adds to the digest: phase, index and offset (8 bytes each, little
/// endian), then the 32-byte body digest.
pub const KEY_BYTES: usize = 56;

/// The offset of a closed-loop request, which has no scheduled time.
const CLOSED_LOOP_OFFSET_NS: i64 = -1;

/// One request's identity in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestKey {
    pub phase: usize,
    pub index: u64,
    /// Scheduled offset from the phase start in ns, rounded; -1 in closed loop.
    pub offset_ns: i64,
    pub body_sha256: [u8; 32],
}

impl RequestKey {
    /// The key of a request scheduled `offset` seconds into its phase (`None`: closed
    /// loop, sent when a slot frees) with this body digest.
    pub fn new(phase: usize, index: u64, offset: Option<f64>, body_sha256: [u8; 32]) -> Self {
        RequestKey {
            phase,
            index,
            offset_ns: offset.map_or(CLOSED_LOOP_OFFSET_NS, |o| (o * 1e9).round() as i64),
            body_sha256,
        }
    }

    /// sha256 of a request body.
    pub fn body_digest(body: &[u8]) -> [u8; 32] {
        Sha256::digest(body).into()
    }

    /// The bytes the digest takes for this request.
    pub fn bytes(&self) -> [u8; KEY_BYTES] {
        let mut out = [0u8; KEY_BYTES];
        out[..8].copy_from_slice(&(self.phase as u64).to_le_bytes());
        out[8..16].copy_from_slice(&self.index.to_le_bytes());
        out[16..24].copy_from_slice(&self.offset_ns.to_le_bytes());
        out[24..].copy_from_slice(&self.body_sha256);
        out
    }
}

/// The running digest of a request stream.
#[derive(Clone, Default)]
pub struct RequestDigest(Sha256);

impl RequestDigest {
    pub fn new() -> Self {
        RequestDigest(Sha256::new())
    }

    /// Adds the next request sent.
    pub fn add(&mut self, key: &RequestKey) {
        self.0.update(key.bytes());
    }

    /// The digest as lowercase hex.
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// A [`RequestKey`] as one line of a shard's stream.jsonl. Shards log every request they
/// generate for sending; `runner merge` keeps those that were sent (they have a record)
/// and adds them in (phase, index) order, the order a single run sends them in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamEntry {
    pub phase: usize,
    pub index: u64,
    /// Scheduled offset from the phase start in ns, rounded; -1 in closed loop.
    pub offset_ns: i64,
    /// sha256 of the request body, hex.
    pub body_sha256: String,
}

impl From<&RequestKey> for StreamEntry {
    fn from(key: &RequestKey) -> Self {
        StreamEntry {
            phase: key.phase,
            index: key.index,
            offset_ns: key.offset_ns,
            body_sha256: hex::encode(key.body_sha256),
        }
    }
}

impl StreamEntry {
    /// The key this line logged; an error names a body digest that is not 64 hex digits.
    pub fn key(&self) -> Result<RequestKey, String> {
        let body = &self.body_sha256;
        let mut body_sha256 = [0u8; 32];
        hex::decode_to_slice(body, &mut body_sha256)
            .map_err(|_| format!("not a sha256 hex digest: `{body}`"))?;
        Ok(RequestKey {
            phase: self.phase,
            index: self.index,
            offset_ns: self.offset_ns,
            body_sha256,
        })
    }

    /// The bytes the run digest takes for the request this line logged.
    pub fn digest_bytes(&self) -> Result<Vec<u8>, String> {
        self.key().map(|k| k.bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_key_reads_back_to_the_same_digest_bytes() {
        let body = RequestKey::body_digest(b"{\"prompt\":\"hi\"}");
        for offset in [None, Some(0.0), Some(1.2345678904), Some(1e6)] {
            let key = RequestKey::new(3, 17, offset, body);
            let line = serde_json::to_string(&StreamEntry::from(&key)).unwrap();
            let back: StreamEntry = serde_json::from_str(&line).unwrap();
            assert_eq!(back.key(), Ok(key));
            assert_eq!(back.digest_bytes().unwrap(), key.bytes().to_vec());
        }
        assert_eq!(RequestKey::new(0, 0, None, body).offset_ns, -1);
        assert_eq!(RequestKey::new(0, 0, Some(1.5e-9), body).offset_ns, 2);
    }

    #[test]
    fn the_layout_is_phase_index_offset_body() {
        let key = RequestKey::new(1, 2, Some(3e-9), [7; 32]);
        let bytes = key.bytes();
        assert_eq!(&bytes[..8], &1u64.to_le_bytes());
        assert_eq!(&bytes[8..16], &2u64.to_le_bytes());
        assert_eq!(&bytes[16..24], &3i64.to_le_bytes());
        assert_eq!(&bytes[24..], &[7; 32]);
        let mut one = RequestDigest::new();
        one.add(&key);
        assert_eq!(one.finish(), hex::encode(Sha256::digest(bytes)));
    }

    #[test]
    fn a_body_digest_that_is_not_64_hex_digits_is_refused() {
        let entry = |body: &str| StreamEntry {
            phase: 0,
            index: 0,
            offset_ns: -1,
            body_sha256: body.into(),
        };
        for bad in ["", "ab", &"g".repeat(64), &"a".repeat(63), &"é".repeat(32)] {
            let e = entry(bad).key().unwrap_err();
            assert!(e.contains("not a sha256 hex digest"), "{bad}: {e}");
        }
        assert!(entry(&"Ab".repeat(32)).key().is_ok());
    }
}
