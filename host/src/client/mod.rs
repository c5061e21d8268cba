//! The HTTP side: an OpenAI-compatible streaming client and its SSE framing.

pub mod openai;
pub mod sse;

pub use openai::{prepare, Api, Client, ClientError, Exchange, Prepared, UsageRequest};
