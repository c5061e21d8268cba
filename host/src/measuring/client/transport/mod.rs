//! The streaming client's own HTTP transport: hyper-util's pooled HTTP/1.1 client (with
//! rustls for `https`) over connections of ours ([`TimedStream`]) that log when the
//! kernel received each read's bytes and when each write went out. reqwest cannot carry
//! such a connection (its connector must return its own type), so the timed requests go
//! through hyper-util directly; the untimed calls (health, model list) stay on reqwest.

mod connector;
mod response;
mod timed_stream;
pub mod wire_log;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use connector::{ConnectError, MAX_PREOPENED};
pub use response::{never_reached, TimedResponse};
pub use wire_log::{ReadArrival, WireLog, WriteStamp};

use connector::TimedConnector;

type Https = hyper_rustls::HttpsConnector<TimedConnector>;

/// Which clock the latencies read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReceiveClock {
    /// The kernel's receive time of each read's bytes (`SO_TIMESTAMPING`), where the
    /// socket gives one; else the user-space read time.
    #[default]
    Kernel,
    /// The time the client read the bytes.
    User,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot set up TLS: {0}")]
pub struct TlsError(String);

/// Pooled and unpooled hyper clients sharing one connector.
#[derive(Clone)]
pub struct Transport {
    pooled: HyperClient<Https, Full<Bytes>>,
    /// Keeps no idle connection: a request sent again after its pooled connection closed
    /// under it goes out on a new one.
    unpooled: HyperClient<Https, Full<Bytes>>,
    connector: TimedConnector,
}

impl Transport {
    pub fn new(clock: ReceiveClock, connect_timeout: Duration) -> Result<Transport, TlsError> {
        let connector = TimedConnector::new(clock == ReceiveClock::Kernel, connect_timeout);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| TlsError(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector.clone());
        let client = |idle: usize| {
            HyperClient::builder(TokioExecutor::new())
                .pool_max_idle_per_host(idle)
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_timer(TokioTimer::new())
                .build(https.clone())
        };
        Ok(Transport {
            pooled: client(usize::MAX),
            unpooled: client(0),
            connector,
        })
    }

    /// Sends `request`; `fresh`: on a new connection, not a pooled one.
    pub async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        fresh: bool,
    ) -> Result<TimedResponse, hyper_util::client::legacy::Error> {
        let client = if fresh { &self.unpooled } else { &self.pooled };
        client.request(request).await.map(TimedResponse::new)
    }

    /// Opens up to `count` connections to `base`'s server ahead of the requests that
    /// will use them.
    pub async fn preopen(&self, base: &http::Uri, count: usize) {
        self.connector.preopen(base, count).await;
    }
}

#[cfg(test)]
mod tests;
