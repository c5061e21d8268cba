//! A TCP connection that logs the time of every read and write (`wire_log.rs`): reads
//! with the kernel's receive time where the socket gives one (`both_sides/receive_stamp.rs`), writes
//! from just before the call to its end. hyper drives it from its connection task; the
//! log reaches the request through the response's extensions. In virtual time the
//! connection is an in-memory pipe to the in-process simulator (`both_sides/pipe.rs`),
//! each read stamped with the run's clock.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;

use super::wire_log::{ReadStamp, WireLog, WriteStamp};
use crate::both_sides::{clock, receive_stamp};

/// The most one read takes: a streamed chunk is far smaller, and hyper asks again.
const READ_BYTES: usize = 16 * 1024;

thread_local! {
    /// Where a read lands before its bytes are copied into hyper's buffer (which may be
    /// uninitialised): one per I/O thread, not one per connection, since a read is copied
    /// out before `poll_read` returns. At 10,000 open streams that is 160 MiB less.
    static READ_BUFFER: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_BYTES].into_boxed_slice());
}

pub struct TimedStream {
    link: Link,
    log: WireLog,
    /// The kernel stamps what this socket receives.
    kernel_times: bool,
    control: Vec<u8>,
}

/// What carries the bytes.
pub enum Link {
    Tcp(TcpStream),
    /// In virtual time, to the in-process simulator.
    Pipe(DuplexStream),
}

impl TimedStream {
    /// `tcp`, with the kernel's receive times when `kernel_times` and the socket takes the
    /// option.
    pub fn new(tcp: TcpStream, kernel_times: bool) -> TimedStream {
        let kernel_times = kernel_times && receive_stamp::enable(tcp.as_fd()).is_ok();
        TimedStream {
            link: Link::Tcp(tcp),
            log: WireLog::default(),
            kernel_times,
            control: receive_stamp::control_buffer(),
        }
    }

    /// A pipe to the in-process simulator: no kernel, so no kernel times.
    pub fn pipe(pipe: DuplexStream) -> TimedStream {
        TimedStream {
            link: Link::Pipe(pipe),
            log: WireLog::default(),
            kernel_times: false,
            control: Vec::new(),
        }
    }

    pub fn link(&self) -> &Link {
        &self.link
    }
}

/// One non-blocking read into `buf`, and when it returned (and when its bytes arrived,
/// with `kernel_times`).
fn read_once(
    tcp: &TcpStream,
    buf: &mut [u8],
    control: &mut [u8],
    kernel_times: bool,
) -> io::Result<(usize, ReadStamp)> {
    if kernel_times {
        let got = receive_stamp::recv(tcp.as_raw_fd(), buf, control)?;
        let stamp = ReadStamp {
            read: got.read,
            arrival: got.arrival,
        };
        return Ok((got.bytes, stamp));
    }
    let bytes = tcp.try_read(buf)?;
    let stamp = ReadStamp {
        read: clock::now(),
        arrival: None,
    };
    Ok((bytes, stamp))
}

impl Read for TimedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let TimedStream {
            link,
            log,
            kernel_times,
            control,
        } = self.get_mut();
        let want = buf.remaining().min(READ_BYTES);
        let tcp = match link {
            Link::Tcp(tcp) => tcp,
            Link::Pipe(pipe) => return read_pipe(pipe, cx, buf, log),
        };
        READ_BUFFER.with_borrow_mut(|own| {
            let (n, stamp) = ready!(receive_stamp::poll_read_with(
                tcp,
                cx,
                || read_once(tcp, &mut own[..want], control, *kernel_times),
                |(n, _)| *n < want,
            ))?;
            if n > 0 {
                log.read(stamp);
            }
            buf.put_slice(&own[..n]);
            Poll::Ready(Ok(()))
        })
    }
}

/// One read from a pipe, stamped with the run's clock when it brought bytes.
fn read_pipe(
    pipe: &mut DuplexStream,
    cx: &mut Context<'_>,
    mut buf: ReadBufCursor<'_>,
    log: &mut WireLog,
) -> Poll<io::Result<()>> {
    READ_BUFFER.with_borrow_mut(|own| {
        let want = buf.remaining().min(READ_BYTES);
        let mut into = ReadBuf::new(&mut own[..want]);
        ready!(Pin::new(pipe).poll_read(cx, &mut into))?;
        let n = into.filled().len();
        if n > 0 {
            log.read(ReadStamp {
                read: clock::now(),
                arrival: None,
            });
        }
        buf.put_slice(&own[..n]);
        Poll::Ready(Ok(()))
    })
}

impl TimedStream {
    /// Runs one write call on the connection, logging when it started and how long it
    /// took when it wrote anything.
    fn timed_write(
        self: Pin<&mut Self>,
        write: impl FnOnce(Pin<&mut (dyn AsyncWrite + Unpin)>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let start = clock::now();
        let done = write(this.link.writer());
        if let Poll::Ready(Ok(n)) = done {
            if n > 0 {
                this.log.wrote(WriteStamp {
                    start,
                    took: clock::since(start),
                });
            }
        }
        done
    }
}

impl Link {
    fn writer(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin)> {
        match self {
            Link::Tcp(tcp) => Pin::new(tcp as &mut (dyn AsyncWrite + Unpin)),
            Link::Pipe(pipe) => Pin::new(pipe as &mut (dyn AsyncWrite + Unpin)),
        }
    }
}

impl Write for TimedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(|io| io.poll_write(cx, data))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(|io| io.poll_write_vectored(cx, data))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.link {
            Link::Tcp(tcp) => tcp.is_write_vectored(),
            Link::Pipe(pipe) => pipe.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().link.writer().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().link.writer().poll_shutdown(cx)
    }
}

impl Connection for TimedStream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.log.clone())
    }
}
