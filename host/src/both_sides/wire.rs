//! What the HTTP client and the built-in simulated server agree on beyond the OpenAI API
//! itself. Both sides import it from here, so the simulator never depends on the client.

/// The header that names a request to the server, as `vllm bench serve` sends it: servers
/// log it (vLLM, SGLang) and the built-in simulator writes it to its send log, so a server's
/// account of a request can be matched with its line in requests.jsonl.
pub const REQUEST_ID: &str = "x-request-id";
