//! The simulator's routes served over in-memory pipes (virtual time, `both_sides/pipe.rs`):
//! hyper's server-side HTTP/1.1 connection on the run's own runtime, the same axum
//! `Router` (a tower `Service`) the TCP listener serves. A request's arrival is then the
//! moment its handler starts, on the run's clock (no kernel stamps on a pipe).

use std::sync::Arc;

use axum::body::Body;
use axum::Router;
use hyper_util::rt::TokioIo;
use tower_service::Service;

use crate::both_sides::pipe;

/// Serves each new pipe's server end with `app`, on the caller's runtime.
pub(super) fn accept_with(app: Router) -> pipe::Accept {
    Arc::new(move |io| {
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let mut app = app.clone();
            async move { app.call(request.map(Body::new)).await }
        });
        tokio::spawn(async move {
            // A connection's end (the client dropped the pipe) is no error of the run.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), service)
                .await;
        });
    })
}
