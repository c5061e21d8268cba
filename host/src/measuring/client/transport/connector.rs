//! Opens the client's TCP connections, each a [`TimedStream`], with no Nagle delay and
//! within the connect timeout. Connections opened ahead of a phase ([`TimedConnector::
//! preopen`]) are handed out first, so no request's send lateness or TTFT counts a TCP
//! handshake; one the server closed while it waited is dropped, not handed out. An
//! address the in-process simulator serves in virtual time gets a pipe instead.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use tokio::net::TcpStream;

use super::timed_stream::{Link, TimedStream};
use crate::both_sides::pipe;

/// The most connections kept open ahead for one server.
pub const MAX_PREOPENED: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the URL {0} names no host")]
    NoHost(String),
    #[error("tcp connect error: {0}")]
    Io(#[from] io::Error),
    #[error("tcp connect timed out after {0:?}")]
    Timeout(Duration),
}

struct Shared {
    kernel_times: bool,
    connect_timeout: Duration,
    /// Connections opened ahead, by `host:port`.
    ready: Mutex<HashMap<String, Vec<TimedStream>>>,
}

/// hyper-util's connector service for the timed client; cloning shares the connections
/// opened ahead.
#[derive(Clone)]
pub struct TimedConnector(Arc<Shared>);

/// Where a URI connects.
fn host_port(uri: &Uri) -> Result<(String, u16), ConnectError> {
    let host = uri
        .host()
        .ok_or_else(|| ConnectError::NoHost(uri.to_string()))?;
    // An IPv6 literal comes bracketed in the URI, and is looked up without.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let default = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    Ok((host, uri.port_u16().unwrap_or(default)))
}

impl TimedConnector {
    pub fn new(kernel_times: bool, connect_timeout: Duration) -> TimedConnector {
        TimedConnector(Arc::new(Shared {
            kernel_times,
            connect_timeout,
            ready: Mutex::default(),
        }))
    }

    /// Opens connections to `uri`'s server until `count` wait ready (at most
    /// [`MAX_PREOPENED`]); those that fail are left to the requests to report.
    pub async fn preopen(&self, uri: &Uri, count: usize) {
        let Ok((host, port)) = host_port(uri) else {
            return;
        };
        let key = format!("{host}:{port}");
        let waiting = self.ready_for(&key, |ready| ready.len());
        let missing = count.min(MAX_PREOPENED).saturating_sub(waiting);
        let opening = (0..missing).map(|_| self.0.open(&host, port));
        let opened = futures_util::future::join_all(opening).await;
        self.ready_for(&key, |ready| {
            ready.extend(opened.into_iter().flatten());
            ready.truncate(MAX_PREOPENED);
        });
    }

    fn ready_for<T>(&self, key: &str, f: impl FnOnce(&mut Vec<TimedStream>) -> T) -> T {
        let mut ready = self.0.ready.lock().unwrap_or_else(|e| e.into_inner());
        f(ready.entry(key.to_string()).or_default())
    }

    /// A connection opened ahead that is still open, if any.
    fn take_ready(&self, key: &str) -> Option<TimedStream> {
        self.ready_for(key, |ready| {
            while let Some(stream) = ready.pop() {
                let open = match stream.link() {
                    Link::Tcp(tcp) => still_open(tcp),
                    Link::Pipe(_) => true,
                };
                if open {
                    return Some(stream);
                }
            }
            None
        })
    }

    async fn connect(self, uri: Uri) -> Result<TimedStream, ConnectError> {
        let (host, port) = host_port(&uri)?;
        if let Some(stream) = self.take_ready(&format!("{host}:{port}")) {
            return Ok(stream);
        }
        self.0.open(&host, port).await
    }
}

impl Shared {
    async fn open(&self, host: &str, port: u16) -> Result<TimedStream, ConnectError> {
        if let Some(pipe) = pipe::connect(&format!("{host}:{port}")) {
            return Ok(TimedStream::pipe(pipe));
        }
        let connecting = TcpStream::connect((host, port));
        let tcp = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| ConnectError::Timeout(self.connect_timeout))??;
        tcp.set_nodelay(true)?;
        Ok(TimedStream::new(tcp, self.kernel_times))
    }
}

/// Whether the server has not closed a connection that waited unused: nothing to read
/// yet. A close, or bytes nobody asked for, and it is not used.
#[cfg(target_os = "linux")]
fn still_open(tcp: &TcpStream) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    matches!(
        recv(tcp.as_raw_fd(), &mut byte, flags),
        Err(nix::errno::Errno::EAGAIN)
    )
}

#[cfg(not(target_os = "linux"))]
fn still_open(_tcp: &TcpStream) -> bool {
    true
}

impl tower_service::Service<Uri> for TimedConnector {
    type Response = TimedStream;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<TimedStream, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}
