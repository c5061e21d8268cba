//! What the HTTP client and the built-in simulated server agree on beyond the OpenAI API
//! itself. Both sides import it from here, so the simulator never depends on the client.

/// The header that names a request to the server, as `vllm bench serve` sends it: servers
/// log it (vLLM, SGLang) and the built-in simulator writes it to its send log, so a server's
/// account of a request can be matched with its line in requests.jsonl.
pub const REQUEST_ID: &str = "x-request-id";

/// The W3C Trace Context header (<https://www.w3.org/TR/trace-context/>): the client sends
/// each request as a span of the run's trace, and the built-in simulator writes what it
/// received to its send log, as a tracing server files the request under that span.
pub const TRACEPARENT: &str = "traceparent";
