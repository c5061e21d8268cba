//! What the timing models emit, shared by the per-request streams (`engine`) and the
//! continuous-batching scheduler (`batch`), so neither imports the other's internals.

use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::Stream;
use tokio::time::Instant;

/// What happens to a request, in order: admitted once, then chunks of tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The engine took the request (chat streams answer with the role-only delta), with
    /// its prompt tokens found in the prefix cache where the timing model has one.
    Admitted { cached: Option<usize> },
    /// This many more tokens were generated and go out as one SSE event.
    Tokens(usize),
}

/// The events of one request; dropping it (client gone) cancels the request.
pub type Events = Pin<Box<dyn Stream<Item = Event> + Send>>;

/// `base + offset`, or a year later when that would overflow (never a panic).
pub fn after(base: Instant, offset: Duration) -> Instant {
    base.checked_add(offset)
        .or_else(|| base.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(base)
}
