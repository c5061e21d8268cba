//! A fault-injecting OpenAI-compatible server: real HTTP/1.1 on loopback, written on raw
//! TCP so that every fault is exactly what a broken server does on the wire (a reset, a
//! body cut short, a stall, bytes that are not SSE). Which fault a request gets is decided
//! by its index, read from the prompt `req <index>`, so the injected counts are known
//! whatever the order requests arrive in. Anything else (the runner's pre-run test
//! request) is answered normally.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A normal streamed answer of three tokens.
    None,
    /// HTTP 400 with an OpenAI error body.
    BadRequest,
    /// HTTP 429 with `Retry-After: 7`.
    RateLimited,
    /// HTTP 503.
    Unavailable,
    /// HTTP 503 whose body stops half-way and stalls: still a 5xx, not a timeout.
    UnavailableStalled,
    /// HTTP 401 whose body echoes the request's Authorization header back.
    EchoAuth,
    /// A normal stream whose final event carries llama.cpp-style `timings` echoing the
    /// Authorization header, in a value and in a key.
    EchoAuthInTimings,
    /// HTTP 400 whose body echoes the Authorization header so that the key straddles the
    /// 300th character, where error messages are cut.
    EchoAuthAtCut,
    /// A 307 redirect to another loopback port (bound, not listening): a benchmark request
    /// does not follow it, and counts it as a failed `http_other`.
    RedirectAway,
    /// A 307 redirect to the same URL: followed, it would loop (reqwest's default stops
    /// after 10, so the server would see 11 requests for one).
    RedirectLoop,
    /// HTTP 500 whose text body carries terminal escape sequences (retitle, clear screen,
    /// colour) and a bidirectional override.
    EscapeBody,
    /// A 200 event stream whose first line is no SSE field and carries escape sequences.
    EscapeLine,
    /// HTTP 500 with a gzip-encoded (binary) body.
    GzipBody,
    /// A normal stream whose lines end with a lone CR (allowed by the SSE format).
    CrLines,
    /// A normal stream with events of empty data (`data:` and `data: `) among its own:
    /// keep-alives that carry no message.
    EmptyData,
    /// A normal stream that starts with a UTF-8 byte-order mark (allowed too).
    Bom,
    /// The request is read, then the connection is reset (RST) before any response.
    Reset,
    /// The request is read, then the connection is closed (FIN) without an answer: the
    /// client cannot tell this from a pooled connection the server had already closed.
    CloseAfterRead,
    /// A normal answer, then the connection is closed without `Connection: close`, as
    /// llama.cpp's server does after every stream.
    CloseAfterAnswer,
    /// A normal answer, then the connection is reset (SO_LINGER 0): a next request that
    /// already reached the server's kernel is dropped unread.
    ResetAfterAnswer,
    /// One content event holding a 100,000-character word (no whitespace).
    LongWord,
    /// The given number of content events of 48 KiB of random letters, one word: 64 of
    /// them (3 MB) take seconds to count.
    HugeWord(usize),
    /// A normal answer of three tokens whose first leaves 10 ms after the request was read;
    /// the server logs that moment ([`Seen::first_token_ms`]) so a client's TTFT can be
    /// checked against what the server really did.
    Paced,
    /// Content events of one character, without end, as fast as the client reads.
    Endless,
    /// Headers and one content event, then the connection closes mid-body.
    Cut,
    /// Headers and one content event, then nothing: only the request timeout ends it.
    StallAfterFirst,
    /// Headers, then nothing: the first-token timeout ends it.
    StallBeforeFirst,
    /// A 200 event stream whose lines are bare JSON, not SSE fields.
    NotSse,
    /// An SSE event whose data is truncated JSON.
    BadJson,
    /// One content event, then an OpenAI error object inside the stream.
    ErrorObject,
    /// A well-formed stream without any generated text.
    Empty,
}

type Plan = Arc<dyn Fn(u64) -> Fault + Send + Sync>;

/// How a path other than the completions is answered, when not as usual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// 200 with `{}`, as a control route that did its work.
    Done,
    /// The request is read and never answered (the connection held for at most 60 s).
    Hang,
}

type Routes = Arc<dyn Fn(&str) -> Option<Route> + Send + Sync>;

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    /// Request indices, in arrival order (each should appear once: the runner never retries).
    pub indices: Vec<u64>,
    /// Authorization headers received.
    pub authorization: Vec<String>,
    /// Every header of each indexed request (names lower-case), by request index.
    pub headers: HashMap<u64, HashMap<String, String>>,
    /// Requests with a body over [`BIG_BODY`], read in part and then reset.
    pub big_bodies_reset: usize,
    /// For [`Fault::Paced`] answers, by request index: when the first token was written,
    /// in ms after the request had been read.
    pub first_token_ms: HashMap<u64, f64>,
}

/// A request body over this is read only up to it, then the connection is reset: a server
/// refusing a huge upload half-way, while the client is still writing.
pub const BIG_BODY: usize = 1 << 20;

/// The escape sequences of [`Fault::EscapeBody`] and [`Fault::EscapeLine`].
pub const ESCAPES: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred\u{202e}";

pub struct FaultServer {
    pub url: String,
    pub seen: Arc<Mutex<Seen>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultServer {
    pub fn start(plan: impl Fn(u64) -> Fault + Send + Sync + 'static) -> FaultServer {
        FaultServer::routed(plan, |_| None)
    }

    /// A server that answers the paths `routes` names as it says (every other as usual).
    pub fn routed(
        plan: impl Fn(u64) -> Fault + Send + Sync + 'static,
        routes: impl Fn(&str) -> Option<Route> + Send + Sync + 'static,
    ) -> FaultServer {
        let plan: Plan = Arc::new(plan);
        let routes: Routes = Arc::new(routes);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let seen2 = seen.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("fault server runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                // Bound, never listening: connecting here is refused.
                let dead = TcpSocket::new_v4().expect("socket");
                dead.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
                let dead_addr = dead.local_addr().expect("addr");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("report address");
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let routing = (plan.clone(), routes.clone());
                        tokio::spawn(connection(stream, routing, seen2.clone(), dead_addr));
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stop_rx => {}
                }
                drop(dead);
            });
            // Stalled connections die with the runtime.
            rt.shutdown_timeout(Duration::from_millis(100));
        });
        let addr: SocketAddr = addr_rx.recv().expect("fault server started");
        FaultServer {
            url: format!("http://{addr}"),
            seen,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Request {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
    /// The body is over [`BIG_BODY`]: only its start was read, `body` is empty.
    too_big: bool,
}

/// Reads one HTTP/1.1 request; `None` when the client closed the connection.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if len > BIG_BODY {
        // Some of it, then the caller resets the connection.
        let mut chunk = vec![0u8; 64 << 10];
        let _ = stream.read(&mut chunk).await;
        return Some(Request {
            path,
            headers,
            body: Vec::new(),
            too_big: true,
        });
    }
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Some(Request {
        path,
        headers,
        body,
        too_big: false,
    })
}

/// The request index from a prompt `req <index>`; `None` for anything else.
fn index_of(body: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("prompt")?
        .as_str()?
        .strip_prefix("req ")?
        .parse()
        .ok()
}

/// The request index from its `x-request-id` (`<prefix><phase>-<index>`): a session's
/// requests cannot name their index in the prompt (the host gives it).
fn index_of_request_id(headers: &HashMap<String, String>) -> Option<u64> {
    headers
        .get("x-request-id")?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

async fn connection(
    mut stream: TcpStream,
    (plan, routes): (Plan, Routes),
    seen: Arc<Mutex<Seen>>,
    dead: SocketAddr,
) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut stream, &mut buf).await {
        match routes(&req.path) {
            Some(Route::Done) => {
                let done = simple("200 OK", "", "{}");
                if stream.write_all(done.as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
            Some(Route::Hang) => return stall(&mut stream).await,
            None => {}
        }
        if req.too_big {
            seen.lock().unwrap().big_bodies_reset += 1;
            let _ = stream.set_zero_linger();
            return;
        }
        let read_at = std::time::Instant::now();
        let index = req
            .path
            .ends_with("/completions")
            .then(|| index_of(&req.body).or_else(|| index_of_request_id(&req.headers)))
            .flatten();
        let fault = if req.path.ends_with("/completions") {
            let mut s = seen.lock().unwrap();
            if let Some(auth) = req.headers.get("authorization") {
                s.authorization.push(auth.clone());
            }
            match index {
                Some(i) => {
                    s.indices.push(i);
                    s.headers.insert(i, req.headers.clone());
                    plan(i)
                }
                None => Fault::None,
            }
        } else {
            Fault::None
        };
        if let (Fault::Paced, Some(i)) = (fault, index) {
            match paced_stream(&mut stream, read_at).await {
                Some(ms) => seen.lock().unwrap().first_token_ms.insert(i, ms),
                None => return,
            };
            continue;
        }
        let keep_going = respond(&mut stream, &req, fault, dead).await;
        if !keep_going {
            return;
        }
    }
}

fn simple(status: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

/// One chunk of a chunked body.
fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

fn event(json: &str) -> String {
    chunk(&format!("data: {json}\n\n"))
}

const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
const TOKEN: &str = r#"{"choices":[{"index":0,"text":" tok"}]}"#;
const USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}"#;

/// A normal streamed answer of three tokens.
/// A stream of one word without whitespace, of random lowercase letters (a repeated
/// letter would count fast).
fn huge_word_stream(events: usize) -> String {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut s = STREAM_HEAD.to_string();
    for _ in 0..events {
        let text: String = (0..48 << 10)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect();
        let piece = serde_json::json!({"choices": [{"index": 0, "text": text}]});
        s += &event(&piece.to_string());
    }
    s + &*event("[DONE]") + "0\r\n\r\n"
}

fn normal_stream() -> String {
    let mut s = STREAM_HEAD.to_string();
    for _ in 0..3 {
        s += &event(TOKEN);
    }
    s += &event(USAGE);
    s += &event("[DONE]");
    s + "0\r\n\r\n"
}

/// [`Fault::Paced`]: headers at once, the first token 10 ms after the request was read,
/// then the rest. Returns when the first token was handed to the socket (ms after
/// `read_at`), or `None`
/// when the client went away.
async fn paced_stream(stream: &mut TcpStream, read_at: std::time::Instant) -> Option<f64> {
    stream.write_all(STREAM_HEAD.as_bytes()).await.ok()?;
    tokio::time::sleep_until((read_at + Duration::from_millis(10)).into()).await;
    // Stamped before the write: the client cannot have the token before this moment.
    let first = read_at.elapsed().as_secs_f64() * 1e3;
    stream.write_all(event(TOKEN).as_bytes()).await.ok()?;
    let mut rest = event(TOKEN) + &*event(TOKEN) + &*event(USAGE) + &*event("[DONE]");
    rest += "0\r\n\r\n";
    stream.write_all(rest.as_bytes()).await.ok()?;
    Some(first)
}

/// Holds the connection until the client gives up (bounded, should it never).
async fn stall(stream: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Writes the answer; returns whether the connection stays open for another request.
async fn respond(stream: &mut TcpStream, req: &Request, fault: Fault, dead: SocketAddr) -> bool {
    let out = match req.path.as_str() {
        "/health" => simple("200 OK", "", "{}"),
        "/v1/models" => simple(
            "200 OK",
            "",
            r#"{"object":"list","data":[{"id":"fault-model","object":"model"}]}"#,
        ),
        _ => match error_answer(req, fault, dead).or_else(|| stream_answer(req, fault)) {
            Some(out) => out,
            None => return misbehave(stream, fault).await,
        },
    };
    stream.write_all(out.as_bytes()).await.is_ok()
}

/// The faults answered whole with an HTTP error or a redirect.
fn error_answer(req: &Request, fault: Fault, dead: SocketAddr) -> Option<String> {
    let out = match fault {
        Fault::BadRequest => simple(
            "400 Bad Request",
            "",
            r#"{"error":{"message":"injected: max_tokens is too large","type":"BadRequestError"}}"#,
        ),
        Fault::RateLimited => simple(
            "429 Too Many Requests",
            "retry-after: 7\r\n",
            r#"{"error":{"message":"injected: slow down"}}"#,
        ),
        Fault::Unavailable => simple(
            "503 Service Unavailable",
            "",
            r#"{"error":{"message":"injected: overloaded"}}"#,
        ),
        Fault::EchoAuth => {
            let auth = req.headers.get("authorization").cloned().unwrap_or_default();
            simple(
                "401 Unauthorized",
                "",
                &format!(r#"{{"error":{{"message":"injected: bad key in header `{auth}`"}}}}"#),
            )
        }
        Fault::EchoAuthAtCut => {
            let auth = req.headers.get("authorization").cloned().unwrap_or_default();
            let key = auth.strip_prefix("Bearer ").unwrap_or(&auth);
            // `HTTP 400: ` is not part of the cut text: 290 characters of padding, then the
            // key, so its first 10 characters fall before character 300 and the rest after.
            let body = format!("{}{key} and more text after it", "x".repeat(290));
            simple("400 Bad Request", "", &body)
        }
        Fault::RedirectAway => format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{dead}{}\r\ncontent-length: 0\r\n\r\n",
            req.path
        ),
        Fault::RedirectLoop => format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {}\r\ncontent-length: 0\r\n\r\n",
            req.path
        ),
        Fault::EscapeBody => {
            let body = format!("overloaded {ESCAPES}\nsecond line");
            format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        _ => return None,
    };
    Some(out)
}

/// The faults answered whole with a 200 event stream, well-formed or not.
fn stream_answer(req: &Request, fault: Fault) -> Option<String> {
    let out = match fault {
        Fault::None | Fault::Paced => normal_stream(),
        Fault::EchoAuthInTimings => {
            let auth = req
                .headers
                .get("authorization")
                .cloned()
                .unwrap_or_default();
            let timings = serde_json::json!({
                "choices": [],
                "usage": {"prompt_tokens": 2, "completion_tokens": 3},
                "timings": {"prompt_ms": 1.5, "note": format!("seen {auth}"), auth.clone(): 1},
            });
            let mut s = STREAM_HEAD.to_string();
            for _ in 0..3 {
                s += &event(TOKEN);
            }
            s += &event(&timings.to_string());
            s += &event("[DONE]");
            s + "0\r\n\r\n"
        }
        Fault::EscapeLine => {
            STREAM_HEAD.to_string() + &*chunk(&format!("oops {ESCAPES}\n\n")) + "0\r\n\r\n"
        }
        Fault::CrLines | Fault::Bom => {
            let (mut start, nl) = if fault == Fault::Bom {
                ("\u{feff}", "\n")
            } else {
                ("", "\r")
            };
            let mut s = STREAM_HEAD.to_string();
            for data in [TOKEN, TOKEN, TOKEN, USAGE, "[DONE]"] {
                // The mark goes out with the first event (an empty chunk would end the body).
                s += &chunk(&format!("{start}data: {data}{nl}{nl}"));
                start = "";
            }
            s + "0\r\n\r\n"
        }
        Fault::EmptyData => {
            let mut s = STREAM_HEAD.to_string() + &*chunk("data:\n\n");
            for data in [TOKEN, TOKEN, TOKEN, USAGE, "[DONE]"] {
                s += &chunk(&format!("data: \n\ndata: {data}\n\n"));
            }
            s + "0\r\n\r\n"
        }
        Fault::LongWord => {
            let word = serde_json::json!({"choices": [{"index": 0, "text": "a".repeat(100_000)}]});
            STREAM_HEAD.to_string() + &*event(&word.to_string()) + &*event("[DONE]") + "0\r\n\r\n"
        }
        Fault::HugeWord(events) => huge_word_stream(events),
        Fault::NotSse => {
            STREAM_HEAD.to_string() + &*chunk(&format!("{TOKEN}\n{TOKEN}\n")) + "0\r\n\r\n"
        }
        Fault::BadJson => {
            STREAM_HEAD.to_string()
                + &*event(r#"{"choices":[{"index":0,"text":" tok"}"#)
                + &*event("[DONE]")
                + "0\r\n\r\n"
        }
        Fault::ErrorObject => {
            STREAM_HEAD.to_string()
                + &*event(TOKEN)
                + &*event(
                    r#"{"error":{"message":"injected: engine died","type":"InternalServerError","code":500}}"#,
                )
                + &*event("[DONE]")
                + "0\r\n\r\n"
        }
        Fault::Empty => {
            STREAM_HEAD.to_string()
                + &*event(r#"{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}"#)
                + &*event(r#"{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":0}}"#)
                + &*event("[DONE]")
                + "0\r\n\r\n"
        }
        _ => return None,
    };
    Some(out)
}

/// The faults that write part of an answer, stall, or close the connection; returns
/// whether the connection stays open.
async fn misbehave(stream: &mut TcpStream, fault: Fault) -> bool {
    match fault {
        Fault::UnavailableStalled => {
            let head = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"error\":";
            let _ = stream.write_all(head.as_bytes()).await;
            stall(stream).await;
            false
        }
        Fault::GzipBody => {
            // A gzip member header and deflate bytes: what a compressed error page starts
            // with, not text.
            let body: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\x56\x4a\x2d\x2a\xca\x2f\x52\xb2\x52\x1b\x9b\x00";
            let head = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            stream.write_all(body).await.is_ok()
        }
        Fault::CloseAfterRead => false,
        Fault::Endless => {
            let _ = stream.write_all(STREAM_HEAD.as_bytes()).await;
            let batch = event(TOKEN).repeat(1000);
            // Bounded, should the client never stop reading: 10 million events.
            for _ in 0..10_000 {
                if stream.write_all(batch.as_bytes()).await.is_err() {
                    break;
                }
            }
            false
        }
        Fault::CloseAfterAnswer | Fault::ResetAfterAnswer => {
            let _ = stream.write_all(normal_stream().as_bytes()).await;
            let _ = stream.flush().await;
            // The close comes a moment after the answer (llama.cpp first releases its
            // slot), while a client's next request is on its way: that request is never
            // read, and the close resets the connection over it.
            tokio::time::sleep(Duration::from_millis(1)).await;
            if fault == Fault::ResetAfterAnswer {
                let _ = stream.set_zero_linger();
            }
            false
        }
        Fault::Reset => {
            let _ = stream.set_zero_linger();
            false
        }
        Fault::Cut => {
            let s = STREAM_HEAD.to_string() + &*event(TOKEN);
            let _ = stream.write_all(s.as_bytes()).await;
            let _ = stream.flush().await;
            false
        }
        Fault::StallAfterFirst | Fault::StallBeforeFirst => {
            let mut s = STREAM_HEAD.to_string();
            if fault == Fault::StallAfterFirst {
                s += &event(TOKEN);
            }
            let _ = stream.write_all(s.as_bytes()).await;
            stall(stream).await;
            false
        }
        _ => false,
    }
}
