//! The kernel's receive time of what a TCP read returns: Linux `SO_TIMESTAMPING` with
//! software receive stamps (the kernel's Documentation/networking/timestamping.rst). A
//! `recvmsg` then carries, in an `SCM_TIMESTAMPING` control message, when the kernel
//! received the last byte it returns; coalesced segments keep the latest time. That time
//! does not move when the reading thread runs late, which the time the read returns does.
//! Both sides of a measurement use it: the streaming client for each chunk's arrival
//! (`client::transport`), the simulator for each request's (`sim::arrival`).
//! `nix` (a kept binding of these calls) does the socket option and the control message.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant, SystemTime};

/// A kernel time older than this at the read is not trusted (a stepped wall clock).
const OLDEST_ARRIVAL: Duration = Duration::from_secs(60);

/// A kernel time this far after the read's own wall-clock time counts as the read time;
/// further means the wall clock stepped back between the two, and it is not trusted.
const CLOCK_SLACK: Duration = Duration::from_millis(1);

/// Asks the kernel to stamp what the socket receives; an error means it cannot. Returns
/// once the kernel stamps what arrives (see [`live_stamping`]).
#[cfg(target_os = "linux")]
pub fn enable(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    ask_for_stamps(fd)?;
    live_stamping::wait();
    Ok(())
}

#[cfg(target_os = "linux")]
fn ask_for_stamps(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt, TimestampingFlag};
    let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    setsockopt(&fd, sockopt::Timestamping, &flags).map_err(io::Error::from)
}

/// Linux stamps received packets only while some socket of the system asks for it, and
/// the first such socket turns the stamping on from a work queue, later
/// (`net_enable_timestamp` in the kernel's net/core/dev.c): what arrives before that work
/// ran carries no time, and its reads fall back to the time they returned. A request sent
/// at once to a server that has just asked (a unit test's, a run's first connection) lost
/// its arrival that way on a busy machine. So the first [`enable`] of a process sends
/// itself datagrams on loopback until one comes back stamped, and keeps that socket open:
/// while it asks, the stamping stays on for the process's life.
#[cfg(target_os = "linux")]
mod live_stamping {
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::fd::{AsFd, AsRawFd};
    use std::sync::OnceLock;
    use std::time::Duration;

    use nix::sys::socket::MsgFlags;

    /// Datagrams sent before giving up (the reads then fall back, as without stamps).
    const PROBES: u32 = 200;
    /// How long each datagram is waited for, and the pause before the next one.
    const PROBE_WAIT: Duration = Duration::from_millis(1);

    static PROBE: OnceLock<Option<UdpSocket>> = OnceLock::new();

    /// Returns once the kernel stamps what arrives, or after [`PROBES`] tries.
    pub fn wait() {
        PROBE.get_or_init(|| {
            let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
            super::ask_for_stamps(socket.as_fd()).ok()?;
            socket.connect(socket.local_addr().ok()?).ok()?;
            socket.set_read_timeout(Some(PROBE_WAIT)).ok()?;
            (0..PROBES).find(|_| comes_back_stamped(&socket))?;
            Some(socket)
        });
    }

    fn comes_back_stamped(socket: &UdpSocket) -> bool {
        let mut control = super::control_buffer();
        let stamped = socket.send(&[0]).is_ok()
            && super::read_stamped(
                socket.as_raw_fd(),
                &mut [0; 1],
                &mut control,
                MsgFlags::empty(),
            )
            .is_ok_and(|got| got.arrival.is_some());
        if !stamped {
            std::thread::sleep(PROBE_WAIT);
        }
        stamped
    }
}

#[cfg(not(target_os = "linux"))]
pub fn enable(_fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "receive timestamps are read on Linux only",
    ))
}

/// What one read returned.
pub struct Received {
    pub bytes: usize,
    /// When the read returned.
    pub read: Instant,
    /// When the kernel received its last byte, on the same clock as `read`.
    pub arrival: Option<Instant>,
}

/// Room for the control message of one read.
#[cfg(target_os = "linux")]
pub fn control_buffer() -> Vec<u8> {
    nix::cmsg_space!(nix::sys::socket::Timestamps)
}

#[cfg(not(target_os = "linux"))]
pub fn control_buffer() -> Vec<u8> {
    Vec::new()
}

/// One non-blocking read of `fd` into `buf`, with the kernel's receive time when the
/// socket gives one (`control` from [`control_buffer`]).
#[cfg(target_os = "linux")]
pub fn recv(fd: RawFd, buf: &mut [u8], control: &mut [u8]) -> io::Result<Received> {
    read_stamped(fd, buf, control, nix::sys::socket::MsgFlags::MSG_DONTWAIT)
}

/// One read of `fd` with `flags` (without `MSG_DONTWAIT` it waits as long as the socket's
/// own read timeout says).
#[cfg(target_os = "linux")]
fn read_stamped(
    fd: RawFd,
    buf: &mut [u8],
    control: &mut [u8],
    flags: nix::sys::socket::MsgFlags,
) -> io::Result<Received> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned};
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(control), flags).map_err(io::Error::from)?;
    let (read, wall) = clocks_now();
    let stamped = msg
        .cmsgs()
        .ok()
        .into_iter()
        .flatten()
        .find_map(|c| match c {
            ControlMessageOwned::ScmTimestampsns(t) => Some(t.system),
            _ => None,
        });
    let arrival = stamped.and_then(|ts| {
        let secs = u64::try_from(ts.tv_sec()).ok()?;
        let nanos = u32::try_from(ts.tv_nsec()).ok()?;
        let kernel = SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))?;
        arrival_instant(kernel, wall, read)
    });
    Ok(Received {
        bytes: msg.bytes,
        read,
        arrival,
    })
}

/// `read` (one non-blocking read of `tcp`, e.g. [`recv`]) once `tcp` is readable, again
/// while it would block: tokio's `try_io` clears the readiness when it does. A read that
/// `drained` the socket (it returned less than it asked for) clears the readiness too, as
/// tokio's own `poll_read` does: without that, every read of a streamed chunk is followed
/// by a second system call that only finds the socket empty (about one `recvmsg` in two
/// against a server that writes each chunk on its own). The readiness is cleared only if
/// no event came since it was read, so bytes that arrive later still wake the reader.
pub fn poll_read_with<T>(
    tcp: &tokio::net::TcpStream,
    cx: &mut std::task::Context<'_>,
    mut read: impl FnMut() -> io::Result<T>,
    drained: impl Fn(&T) -> bool,
) -> std::task::Poll<io::Result<T>> {
    loop {
        std::task::ready!(tcp.poll_read_ready(cx))?;
        let mut kept = None;
        let done = tcp.try_io(tokio::io::Interest::READABLE, || match read() {
            // Reported as "would block" so that try_io clears the readiness; the bytes
            // read are kept and returned below.
            Ok(got) if drained(&got) => {
                kept = Some(got);
                Err(io::ErrorKind::WouldBlock.into())
            }
            other => other,
        });
        if let Some(got) = kept {
            return std::task::Poll::Ready(Ok(got));
        }
        match done {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            done => return std::task::Poll::Ready(done),
        }
    }
}

/// Never called: [`enable`] fails here, and the socket is read without control messages.
#[cfg(not(target_os = "linux"))]
pub fn recv(_fd: RawFd, _buf: &mut [u8], _control: &mut [u8]) -> io::Result<Received> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "receive timestamps are read on Linux only",
    ))
}

/// The most two monotonic readings around a wall-clock reading may be apart for the
/// pair to count as taken together: the monotonic time of the wall-clock reading is then
/// known within half of it (10 µs), and so is every arrival converted with the pair.
const PAIR_SPREAD: Duration = Duration::from_micros(20);

/// The monotonic clock (the middle of two readings) and the wall clock read together. A
/// pair read across a preemption or an interrupt (the two clocks then seem apart by the
/// time the thread was away, and arrivals would read early) is read again, up to three
/// times; the tightest pair is kept.
fn clocks_now() -> (Instant, SystemTime) {
    let read_pair = || {
        let before = Instant::now();
        let wall = SystemTime::now();
        let spread = before.elapsed();
        (spread, before + spread / 2, wall)
    };
    let mut best = read_pair();
    for _ in 0..3 {
        if best.0 <= PAIR_SPREAD {
            break;
        }
        let again = read_pair();
        if again.0 < best.0 {
            best = again;
        }
    }
    (best.1, best.2)
}

/// The kernel's wall-clock receive time `kernel` on the monotonic clock, given the wall
/// clock `wall` and the monotonic clock `read` taken together just after the read: the
/// two clocks advance alike, so the age of the bytes is the same on both.
pub fn arrival_instant(kernel: SystemTime, wall: SystemTime, read: Instant) -> Option<Instant> {
    match wall.duration_since(kernel) {
        Ok(age) if age <= OLDEST_ARRIVAL => read.checked_sub(age),
        Ok(_) => None,
        Err(ahead) if ahead.duration() <= CLOCK_SLACK => Some(read),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_of_the_bytes_carries_over_to_the_monotonic_clock() {
        let (read, wall) = clocks_now();
        let kernel = wall - Duration::from_micros(250);
        let arrival = arrival_instant(kernel, wall, read).unwrap();
        assert_eq!(read - arrival, Duration::from_micros(250));
    }

    /// Without the wait in `enable`, a datagram sent at once came back unstamped 196 times
    /// in 200 on a machine where no other socket asked for stamps.
    #[cfg(target_os = "linux")]
    #[test]
    fn once_enable_returns_the_first_bytes_are_stamped() {
        use std::net::{Ipv4Addr, UdpSocket};
        use std::os::fd::{AsFd, AsRawFd};
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        enable(socket.as_fd()).expect("stamps on loopback");
        socket
            .connect(socket.local_addr().expect("address"))
            .expect("connect");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        socket.send(b"x").expect("send");
        let got = read_stamped(
            socket.as_raw_fd(),
            &mut [0; 1],
            &mut control_buffer(),
            nix::sys::socket::MsgFlags::empty(),
        )
        .expect("the datagram");
        assert!(
            got.arrival.is_some(),
            "the first datagram came without a time"
        );
    }

    #[test]
    fn stepped_clocks_give_no_arrival() {
        let (read, wall) = clocks_now();
        assert_eq!(
            arrival_instant(wall - Duration::from_secs(61), wall, read),
            None
        );
        assert_eq!(
            arrival_instant(wall + Duration::from_millis(5), wall, read),
            None
        );
        // A kernel time a little after the wall clock (its own clock read) is the read.
        assert_eq!(
            arrival_instant(wall + Duration::from_micros(3), wall, read),
            Some(read)
        );
    }
}
