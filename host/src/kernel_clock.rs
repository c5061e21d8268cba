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

/// Asks the kernel to stamp what the socket receives; an error means it cannot.
#[cfg(target_os = "linux")]
pub fn enable(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt, TimestampingFlag};
    let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    setsockopt(&fd, sockopt::Timestamping, &flags).map_err(io::Error::from)
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
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(control), MsgFlags::MSG_DONTWAIT)
        .map_err(io::Error::from)?;
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
/// while it would block: tokio's `try_io` clears the readiness when it does.
pub fn poll_read_with<T>(
    tcp: &tokio::net::TcpStream,
    cx: &mut std::task::Context<'_>,
    mut read: impl FnMut() -> io::Result<T>,
) -> std::task::Poll<io::Result<T>> {
    loop {
        std::task::ready!(tcp.poll_read_ready(cx))?;
        match tcp.try_io(tokio::io::Interest::READABLE, &mut read) {
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
