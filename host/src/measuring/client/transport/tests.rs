//! The transport against a real loopback HTTP/1.1 server of the test's own, which stamps
//! each chunk just before writing it: that stamp is the truth the client's times are held
//! to (the same monotonic clock, one process).

use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::connector::TimedConnector;
use super::wire_log::{ReadStamp, WireLog, WriteStamp};
use super::{ReadArrival, ReceiveClock, Transport};

const CHUNKS: usize = 20;
/// Not a multiple of the busy thread's 10 ms cycle: chunks meet it at every phase.
const GAP: Duration = Duration::from_millis(17);

/// Serves one streamed response of [`CHUNKS`] chunks [`GAP`] apart on its own thread and
/// runtime; returns its URL and, once done, the moment just before each chunk's write.
fn chunk_server() -> (String, std_mpsc::Receiver<Vec<Instant>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("address"));
    let (tx, rx) = std_mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            listener.set_nonblocking(true).expect("non-blocking");
            let listener = TcpListener::from_std(listener).expect("listener");
            let (mut conn, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut byte = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                let n = conn.read(&mut byte).await.expect("request");
                assert!(n > 0, "the client closed early");
                head.extend_from_slice(&byte[..n]);
            }
            let start = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            conn.write_all(start.as_bytes()).await.expect("head");
            let mut sent = Vec::new();
            for i in 0..CHUNKS {
                tokio::time::sleep(GAP).await;
                let event = format!("data: {i}\n\n");
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                sent.push(Instant::now());
                conn.write_all(chunk.as_bytes()).await.expect("chunk");
            }
            conn.write_all(b"0\r\n\r\n").await.expect("end");
            let _ = tx.send(sent);
        });
    });
    (url, rx)
}

/// Reads the server's response through `clock`; with `late_by`, the client's runtime
/// thread is kept busy (blocked, as a preempted thread is) that long out of every 10 ms,
/// so chunks wait in the kernel before the client reads them. Returns each chunk's
/// arrival as the transport saw it, and the server's send stamps.
fn read_stream(clock: ReceiveClock, late_by: Duration) -> (Vec<ReadArrival>, Vec<Instant>) {
    let (url, sent) = chunk_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let arrivals = rt.block_on(async move {
        let transport = Transport::new(clock, Duration::from_secs(5)).expect("transport");
        let request = http::Request::post(url)
            .body(Full::new(Bytes::from_static(b"{}")))
            .expect("request");
        let busy = tokio::spawn(async move {
            // Bounded: the stream lasts CHUNKS × GAP = 340 ms.
            for _ in 0..200 {
                if !late_by.is_zero() {
                    std::thread::sleep(late_by);
                }
                tokio::time::sleep(Duration::from_millis(10) - late_by).await;
            }
        });
        let mut resp = transport.send(request, false).await.expect("response");
        let mut arrivals = Vec::new();
        while let Some((_, arrival)) = resp.chunk().await.expect("body") {
            arrivals.push(arrival);
        }
        busy.abort();
        arrivals
    });
    let sent = sent
        .recv_timeout(Duration::from_secs(10))
        .expect("send stamps");
    (arrivals, sent)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(target_os = "linux")]
#[test]
fn kernel_times_do_not_move_when_the_client_reads_late() {
    let (arrivals, sent) = read_stream(ReceiveClock::Kernel, Duration::from_millis(7));
    // hyper hands over each HTTP chunk as a frame of its own (the terminating one
    // carries no data).
    assert_eq!(arrivals.len(), CHUNKS, "{arrivals:?}");
    let error: Vec<f64> = arrivals
        .iter()
        .zip(&sent)
        .map(|(a, s)| a.at.duration_since(*s).as_secs_f64() * 1e3)
        .collect();
    let delay: Vec<f64> = arrivals
        .iter()
        .map(|a| ms(a.delay.expect("a kernel time for every chunk")))
        .collect();
    // The client is blocked 7 of every 10 ms: a chunk waits 0 to 7 ms for its read.
    // That wait is the client's own delay, and it is not in the arrival times.
    let (error, delay) = (median(error), median(delay));
    eprintln!("late reader: median arrival after the write {error:.3} ms, median client delay {delay:.3} ms");
    assert!(
        error < 1.0,
        "median arrival after the server's write: {error:.3} ms"
    );
    assert!(
        delay >= 1.0,
        "median client delay {delay:.3} ms: the busy thread was not seen"
    );
}

#[test]
fn user_clock_times_are_the_reads() {
    let (arrivals, sent) = read_stream(ReceiveClock::User, Duration::ZERO);
    assert_eq!(arrivals.len(), CHUNKS);
    assert!(arrivals.iter().all(|a| a.delay.is_none()));
    // Read after the server wrote: never before.
    assert!(arrivals.iter().zip(&sent).all(|(a, s)| a.at >= *s));
}

#[test]
fn an_arrival_is_the_newest_read_before_the_bytes_were_taken() {
    let log = WireLog::default();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    log.read(ReadStamp {
        read: at(10),
        arrival: Some(at(8)),
    });
    log.read(ReadStamp {
        read: at(30),
        arrival: None,
    });
    let early = log.arrival(at(20));
    assert_eq!(early.at, at(8));
    assert_eq!(early.delay, Some(Duration::from_millis(12)));
    // Without a kernel time the arrival is the moment the bytes were taken.
    let late = log.arrival(at(31));
    assert_eq!((late.at, late.delay), (at(31), None));
    // Nothing read yet: the same.
    assert_eq!(log.arrival(at(5)).delay, None);
}

#[test]
fn a_piece_never_arrives_before_the_piece_before_it() {
    let t0 = Instant::now();
    let at = |us: u64| t0 + Duration::from_micros(us);
    // The second read's clock pair put its bytes 1.8 µs before the first read's.
    let stepped_back = ReadArrival {
        at: at(1000) - Duration::from_nanos(1800),
        delay: Some(Duration::from_micros(50)),
    };
    let moved = stepped_back.not_before(Some(at(1000)));
    assert_eq!(moved.at, at(1000));
    // Taken at the same moment as before the move.
    assert_eq!(
        moved.at + moved.delay.unwrap(),
        stepped_back.at + Duration::from_micros(50)
    );
    // A later arrival, or the first piece, is kept as it is.
    let later = ReadArrival {
        at: at(1001),
        delay: None,
    };
    assert_eq!(later.not_before(Some(at(1000))), later);
    assert_eq!(stepped_back.not_before(None), stepped_back);
}

#[test]
fn a_request_went_out_in_the_first_write_after_its_hand_off() {
    let log = WireLog::default();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    for start in [1, 5, 9] {
        log.wrote(WriteStamp {
            start: at(start),
            took: Duration::from_micros(20),
        });
    }
    assert_eq!(log.first_write_since(at(4)).map(|w| w.start), Some(at(5)));
    assert_eq!(log.first_write_since(at(10)), None);
}

#[test]
fn only_a_request_unwritten_or_unanswered_on_a_used_connection_never_reached() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let write = |log: &WireLog, ms| {
        log.wrote(WriteStamp {
            start: at(ms),
            took: Duration::from_micros(20),
        })
    };
    let read = |log: &WireLog, ms| {
        log.read(ReadStamp {
            read: at(ms),
            arrival: None,
        })
    };
    // A new connection: nothing written yet, then the request written.
    let fresh = WireLog::default();
    assert!(fresh.never_reached(at(1)));
    write(&fresh, 2);
    assert!(
        !fresh.never_reached(at(1)),
        "a reset on a new connection is the server's"
    );
    // A pooled connection: an earlier request and its answer, then this request.
    let pooled = WireLog::default();
    write(&pooled, 1);
    read(&pooled, 2);
    assert!(pooled.never_reached(at(3)), "not written");
    write(&pooled, 4);
    assert!(pooled.never_reached(at(3)), "written, no byte back");
    read(&pooled, 5);
    assert!(!pooled.never_reached(at(3)), "answered in part");
}

#[tokio::test]
async fn connections_opened_ahead_are_used_first_and_closed_ones_dropped() {
    use tower_service::Service;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let uri: http::Uri = format!("http://{}/", listener.local_addr().expect("address"))
        .parse()
        .expect("uri");
    let mut connector = TimedConnector::new(true, Duration::from_secs(5));
    connector.preopen(&uri, 3).await;
    let mut accepted = Vec::new();
    for _ in 0..3 {
        accepted.push(listener.accept().await.expect("accept").0);
    }
    // The server closes one of them while it waits.
    drop(accepted.remove(0));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let accept_soon = || async {
        tokio::time::timeout(Duration::from_millis(200), listener.accept())
            .await
            .is_ok()
    };
    let first = connector.call(uri.clone()).await.expect("first");
    let second = connector.call(uri.clone()).await.expect("second");
    assert!(
        !accept_soon().await,
        "a connection opened ahead was not used"
    );
    let third = connector.call(uri.clone()).await.expect("third");
    assert!(accept_soon().await, "the closed connection was handed out");
    drop((first, second, third));
}
