//! What the measuring side and the built-in simulator both use: the run's clock (real or virtual), the in-memory pipe between them in virtual time, the precise timer, the kernel's receive stamps and the wire contract beyond the OpenAI API.

pub mod clock;
pub mod pipe;
pub mod receive_stamp;
pub mod timer;
pub mod wire;
