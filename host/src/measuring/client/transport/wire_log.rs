//! What one connection's socket saw: when each read returned and when the kernel had
//! received its last byte, and when each write started and how long it took. The socket
//! (`timed_stream.rs`) writes it from hyper's connection task; the request that owns the
//! connection reads it (`response.rs`), which finds it in the response's extensions
//! (hyper-util's `Connected::extra`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Reads and writes kept per connection: an HTTP/1.1 connection carries one request at a
/// time, and its reader looks only at the newest entries.
const KEPT: usize = 16;

/// One read from the socket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadStamp {
    /// When the read returned, in user space.
    pub read: Instant,
    /// When the kernel received the last byte it returned; `None` where it gave no time.
    pub arrival: Option<Instant>,
}

/// One write to the socket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WriteStamp {
    /// Just before the write call.
    pub start: Instant,
    /// How long the call took: its bytes were in the kernel by `start + took`.
    pub took: Duration,
}

/// When the bytes a reader just took arrived, as far as the socket knows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadArrival {
    /// The kernel's receive time, else the read time.
    pub at: Instant,
    /// Read time minus the kernel's receive time; `None` without a kernel time.
    pub delay: Option<Duration>,
}

impl ReadArrival {
    /// This arrival, moved up to `previous` (the arrival of the response's piece before)
    /// when it seems earlier. Each read converts the kernel's wall-clock stamp to the
    /// monotonic clock with a clock pair of its own (`receive_stamp::arrival_instant`),
    /// known within microseconds, so the arrivals of two reads a few µs apart can step
    /// back by that much (5 ns to 1.8 µs seen against a zero-delay server); within one
    /// response a later piece never arrived before an earlier one. The delay is counted
    /// again from the moved time, so `at + delay` stays the moment the piece was taken.
    pub fn not_before(self, previous: Option<Instant>) -> ReadArrival {
        match previous {
            Some(previous) if previous > self.at => ReadArrival {
                at: previous,
                delay: self
                    .delay
                    .map(|d| (self.at + d).saturating_duration_since(previous)),
            },
            _ => self,
        }
    }
}

#[derive(Debug, Default)]
struct Entries {
    reads: VecDeque<ReadStamp>,
    writes: VecDeque<WriteStamp>,
}

/// The shared log of one connection; cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct WireLog(Arc<Mutex<Entries>>);

fn push<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() == KEPT {
        queue.pop_front();
    }
    queue.push_back(item);
}

impl WireLog {
    fn entries(&self) -> MutexGuard<'_, Entries> {
        // A panic elsewhere cannot leave two deques inconsistent in a way that matters.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn read(&self, stamp: ReadStamp) {
        push(&mut self.entries().reads, stamp);
    }

    pub fn wrote(&self, stamp: WriteStamp) {
        push(&mut self.entries().writes, stamp);
    }

    /// The arrival of bytes a reader took at `taken`: the newest read that had returned
    /// by then. hyper's connection task hands a body frame over before it reads again
    /// (its body channel holds one frame), so that read holds the frame's last byte;
    /// several frames from one read share its time, as coalesced segments share the
    /// kernel's latest (a read of several segments returns the stamp of the last of them:
    /// Linux's `tcp_recvmsg` keeps the newest one it copied). Without a kernel time, the
    /// time the reader took the bytes.
    pub fn arrival(&self, taken: Instant) -> ReadArrival {
        let entries = self.entries();
        let read = entries.reads.iter().rev().find(|r| r.read <= taken);
        match read.and_then(|r| r.arrival) {
            Some(arrival) => ReadArrival {
                at: arrival,
                delay: Some(taken.saturating_duration_since(arrival)),
            },
            None => ReadArrival {
                at: taken,
                delay: None,
            },
        }
    }

    /// The first write that started at or after `handed`: a request handed to hyper at
    /// `handed` goes out in the connection's next write (one request at a time).
    pub fn first_write_since(&self, handed: Instant) -> Option<WriteStamp> {
        let entries = self.entries();
        entries.writes.iter().find(|w| w.start >= handed).copied()
    }

    /// Whether a request handed over at `handed`, on a connection that then broke,
    /// provably never reached the server: none of its bytes were written, or the
    /// connection had brought an earlier answer (it came from the pool) and not one byte
    /// came back after the request's write. The second is the keep-alive race: the server
    /// closed the connection after its last answer while this request was on its way,
    /// and its kernel reset the connection over the unread request. (A request that
    /// waited in the pool may find the connection's last write is the request before it:
    /// then it is taken as written, the cautious side.)
    pub fn never_reached(&self, handed: Instant) -> bool {
        let entries = self.entries();
        let Some(last) = entries.writes.back().filter(|w| w.start >= handed) else {
            return true;
        };
        // Reads before the write: an earlier answer; none after it: no answer to this one.
        entries.reads.back().is_some_and(|r| r.read < last.start)
    }

    /// Whether any byte ever came back on this connection: it carried an earlier request
    /// (a server sends nothing before a request).
    pub fn answered(&self) -> bool {
        !self.entries().reads.is_empty()
    }
}
