//! Which clock a phase's latencies were read on. A content chunk's time is the kernel's
//! receive time of its bytes where the socket gave one (`crate::both_sides::receive_stamp`),
//! else the time the client read them; a send time is the start of the socket write of the
//! request's first bytes where the client's own socket saw it, else the hand-off to the
//! HTTP client. Per phase: how many chunks and sends each clock stamped, the client's own
//! delay (read minus kernel arrival) of every kernel-stamped chunk, and how long the
//! stamped writes took: the bound on a send stamp's error.

use serde::{Deserialize, Serialize};

use super::record::{Reach, RequestRecord};
use super::stat::{add_count, in_field, Distribution, StatState, StatStateError, StreamingStat};

/// The percentiles of the client delay whatever `--percentiles` asked for: its rows in
/// the text report are the median and P99.
pub const CLIENT_DELAY_PERCENTILES: [f64; 2] = [50.0, 99.0];

/// The percentile of the send write durations: the report's clock line reads P99.
pub const SEND_WRITE_PERCENTILES: [f64; 1] = [99.0];

/// A phase's account of its clocks, reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StampSources {
    /// Content chunks of the successful requests stamped with the kernel's receive time.
    pub kernel_chunks: u64,
    /// Content chunks of the successful requests stamped with the time the client read
    /// them: the kernel gave no receive time.
    pub read_chunks: u64,
    /// Requests sent whose send time is the start of their first socket write.
    pub socket_write_sends: u64,
    /// Requests sent whose send time is the hand-off to the HTTP client.
    pub handoff_sends: u64,
    /// How long the stamped first writes took, ms; always has P99.
    pub send_write: Distribution,
}

/// The clocks of a phase's requests as they finish.
#[derive(Clone, Debug)]
pub struct StampSourceStats {
    kernel_chunks: u64,
    read_chunks: u64,
    socket_write_sends: u64,
    handoff_sends: u64,
    client_delay: StreamingStat,
    send_write: StreamingStat,
}

impl Default for StampSourceStats {
    fn default() -> StampSourceStats {
        StampSourceStats {
            kernel_chunks: 0,
            read_chunks: 0,
            socket_write_sends: 0,
            handoff_sends: 0,
            client_delay: StreamingStat::new(),
            send_write: StreamingStat::new(),
        }
    }
}

/// [`StampSourceStats`] as a serialisable state, for merging shards; absent from the shards of
/// a runner that kept no account of its clocks (then every count reads 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StampSourceState {
    pub kernel_chunks: u64,
    pub read_chunks: u64,
    pub socket_write_sends: u64,
    pub handoff_sends: u64,
    pub client_delay: Option<StatState>,
    pub send_write: Option<StatState>,
}

fn stat_from(state: Option<&StatState>) -> Result<StreamingStat, StatStateError> {
    match state {
        Some(s) => StreamingStat::from_state(s),
        None => Ok(StreamingStat::new()),
    }
}

impl StampSourceStats {
    /// Every request that reached a connection counts its send (its send time enters the
    /// send lateness whatever its outcome); a successful one counts its chunks too, the
    /// chunks its latencies read. A request that made no connection sent nothing to stamp.
    pub fn record(&mut self, r: &RequestRecord) {
        if r.reached != Reach::No {
            match r.send_write_ns {
                Some(ns) => {
                    self.socket_write_sends += 1;
                    self.send_write.record(ns as f64);
                }
                None => self.handoff_sends += 1,
            }
        }
        if !r.succeeded() {
            return;
        }
        for c in &r.chunks {
            match c.client_delay_ns {
                Some(ns) => {
                    self.kernel_chunks += 1;
                    self.client_delay.record(ns as f64);
                }
                None => self.read_chunks += 1,
            }
        }
    }

    /// The client delay of the kernel-stamped chunks, ms, at `percentiles`.
    pub fn client_delay(&self, percentiles: &[f64]) -> Distribution {
        self.client_delay.distribution(percentiles)
    }

    pub fn summarize(&self) -> StampSources {
        StampSources {
            kernel_chunks: self.kernel_chunks,
            read_chunks: self.read_chunks,
            socket_write_sends: self.socket_write_sends,
            handoff_sends: self.handoff_sends,
            send_write: self.send_write.distribution(&SEND_WRITE_PERCENTILES),
        }
    }

    pub fn state(&self) -> StampSourceState {
        StampSourceState {
            kernel_chunks: self.kernel_chunks,
            read_chunks: self.read_chunks,
            socket_write_sends: self.socket_write_sends,
            handoff_sends: self.handoff_sends,
            client_delay: Some(self.client_delay.state()),
            send_write: Some(self.send_write.state()),
        }
    }

    pub fn from_state(s: &StampSourceState) -> Result<StampSourceStats, StatStateError> {
        Ok(StampSourceStats {
            kernel_chunks: s.kernel_chunks,
            read_chunks: s.read_chunks,
            socket_write_sends: s.socket_write_sends,
            handoff_sends: s.handoff_sends,
            client_delay: stat_from(s.client_delay.as_ref()).map_err(in_field("client_delay"))?,
            send_write: stat_from(s.send_write.as_ref()).map_err(in_field("send_write"))?,
        })
    }

    /// Adds another shard's account of the same phase.
    pub fn merge(&mut self, o: &StampSourceStats) -> Result<(), StatStateError> {
        for (field, a, b) in [
            ("kernel_chunks", &mut self.kernel_chunks, o.kernel_chunks),
            ("read_chunks", &mut self.read_chunks, o.read_chunks),
            (
                "socket_write_sends",
                &mut self.socket_write_sends,
                o.socket_write_sends,
            ),
            ("handoff_sends", &mut self.handoff_sends, o.handoff_sends),
        ] {
            add_count(field, a, b)?;
        }
        self.client_delay
            .merge(&o.client_delay)
            .map_err(in_field("client_delay"))?;
        self.send_write
            .merge(&o.send_write)
            .map_err(in_field("send_write"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_without_an_account_merges_as_empty() {
        let record: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "scheduled_ns": 0, "sent_ns": 0, "send_write_ns": 8_000,
            "chunks": [{ "t_ns": 1_000_000, "tokens": 1, "client_delay_ns": 3_000 }],
            "end_ns": 2_000_000, "input_tokens": 1, "output_tokens": 1, "text_tokens": 1,
            "http_status": 200,
        }))
        .expect("a valid record");
        let mut stats = StampSourceStats::default();
        stats.record(&record);
        // A shard file from before the account has no `clock`: `PhaseState` defaults it.
        let older =
            StampSourceStats::from_state(&StampSourceState::default()).expect("an empty state");
        stats.merge(&older).expect("merge");
        let through_json: StampSourceState =
            serde_json::from_str(&serde_json::to_string(&stats.state()).unwrap()).unwrap();
        let back = StampSourceStats::from_state(&through_json).expect("a state");
        let c = back.summarize();
        assert_eq!((c.kernel_chunks, c.read_chunks), (1, 0));
        assert_eq!((c.socket_write_sends, c.handoff_sends), (1, 0));
        assert_eq!((c.send_write.count, c.send_write.max), (1, 0.008));
        let d = back.client_delay(&CLIENT_DELAY_PERCENTILES);
        assert_eq!(
            (d.count, d.median, d.percentile(99.0)),
            (1, 0.003, Some(0.003))
        );
    }
}
