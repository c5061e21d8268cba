//! A response of the timed transport: its head, its body read piece by piece with the
//! time each piece arrived, and when its request went out, from its connection's
//! [`WireLog`].

use crate::both_sides::clock;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::wire_log::{ReadArrival, WireLog, WriteStamp};

pub struct TimedResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
    /// `None` only if hyper-util stopped passing connection extras on.
    log: Option<WireLog>,
    /// When the body's previous piece arrived: no piece arrives before it.
    last_arrival: Option<Instant>,
}

impl TimedResponse {
    pub fn new(response: hyper::Response<Incoming>) -> TimedResponse {
        let (head, body) = response.into_parts();
        TimedResponse {
            status: head.status,
            log: head.extensions.get::<WireLog>().cloned(),
            headers: head.headers,
            body,
            last_arrival: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The next piece of the body, and when it arrived; `None` at its end. Trailers are
    /// skipped.
    pub async fn chunk(&mut self) -> Result<Option<(Bytes, ReadArrival)>, hyper::Error> {
        loop {
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            // Taken before anything else, the moment the piece is in hand.
            let taken = clock::now();
            if let Ok(data) = frame?.into_data() {
                let arrival = match &self.log {
                    Some(log) => log.arrival(taken),
                    None => ReadArrival {
                        at: taken,
                        delay: None,
                    },
                }
                .not_before(self.last_arrival);
                self.last_arrival = Some(arrival.at);
                return Ok(Some((data, arrival)));
            }
        }
    }

    /// The write that sent a request handed to the transport at `handed`.
    pub fn sent(&self, handed: Instant) -> Option<WriteStamp> {
        self.log.as_ref()?.first_write_since(handed)
    }
}

/// Whether a request handed to the transport at `handed` and failed with `e` provably
/// never reached the server, so that sending it again cannot count it twice: the
/// connection closed cleanly before any response ([`closed_before_response`]), or it was
/// reset (or the write failed) before the request was written whole or, on a connection
/// reused from the pool, before any byte of an answer ([`WireLog::never_reached`]). A server
/// that closes its connection after every answer resets the pooled connections that a
/// next request already reached; a reset on a new connection is the server's own doing.
pub fn never_reached(e: &hyper_util::client::legacy::Error, handed: Instant) -> bool {
    if e.is_connect() {
        return false;
    }
    if closed_before_response(e) {
        return true;
    }
    let Some(log) = e.connect_info().and_then(|info| {
        let mut extras = http::Extensions::new();
        info.get_extras(&mut extras);
        extras.get::<WireLog>().cloned()
    }) else {
        return false;
    };
    broken_connection(e) && (log.never_reached(handed) || (body_unwritten(e) && log.answered()))
}

/// The connection broke while hyper wrote the request's body: the server cannot have read
/// the request whole. hyper names this kind of error only in its text.
fn body_unwritten(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(inner) = source {
        if let Some(h) = inner.downcast_ref::<hyper::Error>() {
            return h.to_string() == "error writing a body to connection";
        }
        source = inner.source();
    }
    false
}

/// A reset, an aborted connection or a broken pipe somewhere in `e`'s causes.
fn broken_connection(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    let mut source = Some(e);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe) {
                return true;
            }
        }
        source = inner.source();
    }
    false
}

/// The connection closed cleanly before any byte of a response: hyper's "incomplete
/// message" (a reset or a refused connection is another error). llama.cpp's server
/// closes its connection after every streamed response without saying so.
pub fn closed_before_response(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(h) = inner.downcast_ref::<hyper::Error>() {
            return h.is_incomplete_message();
        }
        source = inner.source();
    }
    false
}
