//! In virtual time the client reaches the in-process simulator over an in-memory pipe
//! (`tokio::io::duplex`), not TCP: a socket's bytes would move on the kernel's clock, not
//! the run's. The simulator registers its address here; the client's connector asks for a
//! pipe to an address before it would open a TCP connection.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::DuplexStream;

/// How much one direction of a pipe buffers before the writer waits for the reader.
const PIPE_BYTES: usize = 64 * 1024;

/// Serves the server's end of one new pipe (spawns its connection on the caller's runtime).
pub type Accept = Arc<dyn Fn(DuplexStream) + Send + Sync>;

static SERVERS: Mutex<Vec<(String, Accept)>> = Mutex::new(Vec::new());

/// Removes its server from the registry when dropped.
pub struct Listening(String);

impl Drop for Listening {
    fn drop(&mut self) {
        servers().retain(|(addr, _)| *addr != self.0);
    }
}

fn servers() -> std::sync::MutexGuard<'static, Vec<(String, Accept)>> {
    SERVERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves pipes to `addr` (`host:port`, as the client's URL names it) with `accept`.
pub fn listen(addr: String, accept: Accept) -> Listening {
    servers().push((addr.clone(), accept));
    Listening(addr)
}

/// A new pipe to the in-process server at `addr`, if one listens there.
pub fn connect(addr: &str) -> Option<DuplexStream> {
    let accept = servers()
        .iter()
        .find(|(a, _)| a == addr)
        .map(|(_, accept)| accept.clone())?;
    let (client, server) = tokio::io::duplex(PIPE_BYTES);
    accept(server);
    Some(client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_pipe_reaches_only_its_listener() {
        let echo: Accept = Arc::new(|mut io: DuplexStream| {
            tokio::spawn(async move {
                let mut buf = [0u8; 4];
                if io.read_exact(&mut buf).await.is_ok() {
                    let _ = io.write_all(&buf).await;
                }
            });
        });
        let listening = listen("pipe-test:1".into(), echo);
        assert!(connect("pipe-test:2").is_none());
        let mut io = connect("pipe-test:1").expect("listening");
        io.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        io.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ping");
        drop(listening);
        assert!(connect("pipe-test:1").is_none());
    }
}
