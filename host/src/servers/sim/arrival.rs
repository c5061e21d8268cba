//! When each request reached the simulator: the kernel's receive time of the read that
//! completed its headers (`crate::both_sides::receive_stamp`), not the moment its handler ran. The
//! server's thread takes a request up late when it is busy (writing the chunks of its other
//! streams, or preempted), and a send log counted from that moment reads short by the wait:
//! a client checked against it would carry the server's wait as its own error.
//!
//! Each accepted connection keeps the time of its newest read ([`LastRead`]); hyper calls
//! the handler once the request's head is parsed, so at the handler's start that read is
//! the one that completed the head. Where the kernel gives no receive times (another OS, a
//! refused socket option) it is the time the read returned, still before the handler ran.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Instant;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::Request;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::both_sides::receive_stamp;

/// The most one read takes (and zeroes first: hyper's buffer may be uninitialised).
const READ_BYTES: usize = 16 * 1024;

/// The time of a connection's newest read, shared by the connection and its handlers.
#[derive(Clone, Default)]
pub struct LastRead(Arc<Mutex<Option<Instant>>>);

impl LastRead {
    fn set(&self, at: Instant) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(at);
    }

    fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The arrival of `request`: its connection's newest read, when the server was started
/// with [`ArrivalListener`] and the connection read anything.
pub fn arrival_of(request: &Request) -> Option<Instant> {
    let ConnectInfo(last) = request.extensions().get::<ConnectInfo<LastRead>>()?;
    last.get()
}

impl Connected<IncomingStream<'_, ArrivalListener>> for LastRead {
    fn connect_info(stream: IncomingStream<'_, ArrivalListener>) -> LastRead {
        stream.io().last_read.clone()
    }
}

/// A TCP listener whose connections stamp their reads (with `TCP_NODELAY`: each SSE event
/// must leave as soon as it is written, not wait for Nagle).
pub struct ArrivalListener {
    tcp: TcpListener,
}

impl ArrivalListener {
    /// Asks the kernel to stamp what `tcp`'s connections receive: accepted sockets inherit
    /// the listener's option, so even bytes that came before `accept` carry their time.
    pub fn new(tcp: TcpListener) -> ArrivalListener {
        let _ = receive_stamp::enable(tcp.as_fd());
        ArrivalListener { tcp }
    }
}

impl Listener for ArrivalListener {
    type Io = StampedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (StampedStream, SocketAddr) {
        let (tcp, addr) = Listener::accept(&mut self.tcp).await;
        let _ = tcp.set_nodelay(true);
        (StampedStream::new(tcp), addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// An accepted connection that keeps the time of its newest read.
pub struct StampedStream {
    tcp: TcpStream,
    last_read: LastRead,
    /// The kernel stamps what this socket receives.
    kernel_times: bool,
    control: Vec<u8>,
}

impl StampedStream {
    fn new(tcp: TcpStream) -> StampedStream {
        let kernel_times = receive_stamp::enable(tcp.as_fd()).is_ok();
        StampedStream {
            tcp,
            last_read: LastRead::default(),
            kernel_times,
            control: receive_stamp::control_buffer(),
        }
    }

    /// One read with the kernel's receive time of its bytes.
    fn poll_read_stamped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let StampedStream {
            tcp,
            last_read,
            control,
            ..
        } = self;
        let into = buf.initialize_unfilled_to(buf.remaining().min(READ_BYTES));
        let want = into.len();
        let got = ready!(receive_stamp::poll_read_with(
            tcp,
            cx,
            || receive_stamp::recv(tcp.as_raw_fd(), into, control),
            |got| got.bytes < want,
        ))?;
        if got.bytes > 0 {
            last_read.set(got.arrival.unwrap_or(got.read));
        }
        buf.advance(got.bytes);
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.kernel_times {
            return this.poll_read_stamped(cx, buf);
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.tcp).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.last_read.set(Instant::now());
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for StampedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::future::IntoFuture;
    use std::io::Write;
    use std::time::Duration;

    use axum::routing::get;
    use axum::Router;
    use tokio::sync::oneshot;

    use super::*;

    /// The server's only thread is held up 30 ms after the client wrote its request (it
    /// has not even accepted the connection): the request's arrival is still the moment
    /// its bytes came in, within the client's write, and the handler ran 30 ms after it.
    #[test]
    fn a_request_arrives_when_its_bytes_do_not_when_its_handler_runs() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let tcp = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let listener = ArrivalListener::new(tcp);
        let addr = listener.local_addr().expect("address");
        let (tell, told) = oneshot::channel();
        let tell = Arc::new(Mutex::new(Some(tell)));
        let app = Router::new().route(
            "/",
            get(move |request: Request| async move {
                let handled = Instant::now();
                if let Some(tell) = tell.lock().expect("sender").take() {
                    let _ = tell.send((arrival_of(&request), handled));
                }
            }),
        );
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        let before = Instant::now();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: sim\r\n\r\n")
            .expect("request");
        let written = Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let app = app.into_make_service_with_connect_info::<LastRead>();
        let (arrival, handled) = runtime.block_on(async {
            tokio::select! {
                _ = axum::serve(listener, app).into_future() => panic!("the server stopped"),
                got = told => got.expect("the handler ran"),
            }
        });
        let arrival = arrival.expect("the connection read the request");
        // The kernel's wall-clock time, turned monotonic within 10 µs (both_sides/receive_stamp.rs).
        let slack = Duration::from_micros(20);
        assert!(
            arrival + slack >= before && arrival <= written + slack,
            "arrival {:?} after the write's start, which took {:?}",
            arrival.saturating_duration_since(before),
            written - before
        );
        let waited = handled - arrival;
        assert!(
            waited >= Duration::from_millis(30),
            "the handler ran {waited:?} after the arrival"
        );
    }
}
