//! The HTTP side: an OpenAI-compatible streaming client, its SSE framing, and the decoding
//! of a response into timed content chunks.

pub mod api;
pub mod cancel;
mod error_body;
pub mod exchange;
pub mod headers;
pub mod openai;
pub mod sse;
pub mod stream;
pub mod tool_calls;
pub mod trace_context;
pub mod transport;

#[cfg(test)]
mod props;

pub use cancel::{CancelPoint, RequestExtras};
pub use exchange::{ContentChunk, Exchange, Generated};
pub use openai::{prepare, Api, Client, ClientError, Prepared, Timeouts, UsageRequest};
pub use stream::BodyDecoder;
pub use trace_context::{TraceId, TraceParent};
pub use transport::ReceiveClock;
