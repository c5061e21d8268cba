//! What the measuring side and the built-in simulator both use: the precise timer, the kernel's receive stamps and the wire contract beyond the OpenAI API.

pub mod receive_stamp;
pub mod timer;
pub mod wire;
